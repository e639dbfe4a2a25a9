#pragma once
// Small builders for the dialogs' forms, so that a spin box or a row of a form is written once:
// a range, a start value and the text shown at the minimum; a form filled from a list of rows.
#include <QString>
#include <initializer_list>

class QFormLayout;
class QLayout;
class QSpinBox;
class QWidget;

namespace ps::ui {

// A spin box over [min, max] starting at `value`; `atMinimum` is shown instead of the minimum
// ("default", "unlimited") when given.
QSpinBox* makeSpinBox(int min, int max, int value, const QString& atMinimum = {});

// One row of a form: a label and a field (a widget, or a layout of several).
struct FormRow {
  FormRow(const QString& l, QWidget* w) : label(l), widget(w) {}
  FormRow(const QString& l, QLayout* lay) : label(l), layout(lay) {}
  QString label;
  QWidget* widget = nullptr;
  QLayout* layout = nullptr;
};
void addFormRows(QFormLayout* form, std::initializer_list<FormRow> rows);

}  // namespace ps::ui
