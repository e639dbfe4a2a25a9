#pragma once
// A one-line label that never pushes its neighbours: text wider than the label ends in "…",
// the whole of it in the tooltip (the status bar's message beside its permanent widgets).
#include <QLabel>

namespace ps::ui {

class ElidedLabel : public QLabel {
  Q_OBJECT
 public:
  explicit ElidedLabel(QWidget* parent = nullptr);
  void setFullText(const QString& text);
  QString fullText() const { return full_; }
  QSize minimumSizeHint() const override;
  QSize sizeHint() const override;

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  void elide();
  QString full_;
};

}  // namespace ps::ui
