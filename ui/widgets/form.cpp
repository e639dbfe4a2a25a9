#include "widgets/form.h"

#include <QFormLayout>
#include <QSpinBox>

namespace ps::ui {

QSpinBox* makeSpinBox(int min, int max, int value, const QString& atMinimum) {
  auto* s = new QSpinBox;
  s->setRange(min, max);
  s->setValue(value);
  if (!atMinimum.isEmpty()) s->setSpecialValueText(atMinimum);
  return s;
}

void addFormRows(QFormLayout* form, std::initializer_list<FormRow> rows) {
  for (const FormRow& r : rows) {
    if (r.widget)
      form->addRow(r.label, r.widget);
    else
      form->addRow(r.label, r.layout);
  }
}

}  // namespace ps::ui
