#include "widgets/indicators.h"

#include <QApplication>
#include <QCheckBox>
#include <QColor>
#include <QPalette>
#include <QRadioButton>

namespace ps::ui {

QColor indicatorOutline(const QPalette& palette) {
  return palette.color(QPalette::Window).darker(140);  // QFusionStyle's outline
}

void makeIndicatorsVisible(QWidget* root) {
  if (!root) return;
  const QPalette app = QApplication::palette();
  const bool dark = app.color(QPalette::Window).lightnessF() < 0.5;
  QList<QAbstractButton*> buttons;
  for (auto* b : root->findChildren<QCheckBox*>()) buttons << b;
  for (auto* b : root->findChildren<QRadioButton*>()) buttons << b;
  for (QAbstractButton* b : buttons) {
    QPalette p = b->palette();
    // Mid-grey between the text and the window: the outline (darkened by Fusion) stands out.
    const QColor text = app.color(QPalette::WindowText), window = app.color(QPalette::Window);
    p.setColor(QPalette::Window,
               dark ? QColor((text.red() + window.red()) / 2 + 40, (text.green() + window.green()) / 2 + 40,
                             (text.blue() + window.blue()) / 2 + 40)
                    : window);
    b->setPalette(p);
  }
}

}  // namespace ps::ui
