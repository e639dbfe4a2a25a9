#include "panels/iterations_controls.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>

#include "document/schedule_document.h"

namespace ps::ui {

using ps::core::IterationBoundary;

IterationsControls::IterationsControls(ScheduleDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* lay = new QHBoxLayout(this);
  lay->setContentsMargins(6, 0, 6, 0);
  lay->setSpacing(4);
  auto* label = new QLabel(tr("Iterations"), this);
  count_ = new QSpinBox(this);
  count_->setObjectName(QStringLiteral("iterations.count"));
  count_->setRange(1, 16);
  count_->setValue(doc ? doc->iterations() : 1);
  count_->setToolTip(tr("Training iterations shown back to back (1: edit one iteration)"));
  label->setBuddy(count_);
  boundary_ = new QComboBox(this);
  boundary_->setObjectName(QStringLiteral("iterations.boundary"));
  boundary_->addItem(tr("sync"), static_cast<int>(IterationBoundary::Sync));
  boundary_->addItem(tr("overlap"), static_cast<int>(IterationBoundary::Overlap));
  boundary_->setToolTip(
      tr("sync: all devices finish, then each runs its optimizer step and the next iteration starts\n"
         "overlap: each device starts its next iteration after its own optimizer step"));
  boundary_->setCurrentIndex(doc && doc->iterationBoundary() == IterationBoundary::Sync ? 0 : 1);
  boundary_->setEnabled(count_->value() > 1);
  lay->addWidget(label);
  lay->addWidget(count_);
  lay->addWidget(boundary_);
  connect(count_, &QSpinBox::valueChanged, this, &IterationsControls::apply);
  if (doc) connect(doc, &ScheduleDocument::changed, this, &IterationsControls::follow);
  connect(boundary_, &QComboBox::currentIndexChanged, this, &IterationsControls::apply);
}

void IterationsControls::follow() {
  // The setting may also come from elsewhere (command line): show it without re-applying.
  if (!doc_) return;
  const QSignalBlocker a(count_), b(boundary_);
  count_->setValue(doc_->iterations());
  boundary_->setCurrentIndex(doc_->iterationBoundary() == IterationBoundary::Sync ? 0 : 1);
  boundary_->setEnabled(count_->value() > 1);
}

void IterationsControls::apply() {
  boundary_->setEnabled(count_->value() > 1);
  if (!doc_) return;
  doc_->setIterations(count_->value(), static_cast<IterationBoundary>(boundary_->currentData().toInt()));
}

}  // namespace ps::ui
