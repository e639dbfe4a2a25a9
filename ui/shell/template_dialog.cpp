#include "shell/template_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>
#include <utility>

#include "document/metrics_text.h"
#include "document/schedule_document.h"
#include "timeline/legend_bar.h"
#include "timeline/timeline_view.h"
#include "widgets/form.h"

namespace ps::ui {

using namespace ps::core;

TemplateDialog::TemplateDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("New schedule from template"));
  auto* lay = new QVBoxLayout(this);
  lay->setSpacing(10);
  auto* top = new QHBoxLayout;
  auto* form = new QFormLayout;
  kind_ = new QComboBox;
  for (ScheduleKind k : allScheduleKinds())
    kind_->addItem(QString::fromUtf8(scheduleKindName(k).data()), static_cast<int>(k));
  devices_ = makeSpinBox(1, 256, 4);
  microbatches_ = makeSpinBox(1, 4096, 8);
  chunks_ = makeSpinBox(0, 16, 0, tr("default"));
  chunks_->setToolTip(tr("Stages per device (0 = the kind's default)"));
  addFormRows(form, {{tr("Kind"), kind_},
                     {tr("Devices"), devices_},
                     {tr("Micro-batches"), microbatches_},
                     {tr("Chunks per device"), chunks_}});
  top->addLayout(form);
  top->addStretch(1);
  lay->addLayout(top);

  previewDoc_ = new ScheduleDocument(this);
  preview_ = new TimelineView(previewDoc_, this);
  preview_->setEditable(false);
  // Every device's row in view (thin rows for many devices), the whole schedule fitted.
  preview_->setMinimumRowHeight(6);
  preview_->setMinimumSize(560, 200);
  legend_ = new LegendBar;
  connect(previewDoc_, &ScheduleDocument::changed, legend_,
          [this] { legend_->setSchedule(previewDoc_->analysis().schedule); });
  lay->addWidget(legend_);
  lay->addWidget(preview_, 1);
  info_ = new QLabel;
  info_->setWordWrap(true);
  lay->addWidget(info_);
  buttons_ = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons_->button(QDialogButtonBox::Ok)->setText(tr("&Create"));
  buttons_->button(QDialogButtonBox::Cancel)->setText(tr("C&ancel"));
  connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
  lay->addWidget(buttons_);

  connect(kind_, &QComboBox::currentIndexChanged, this, &TemplateDialog::regenerate);
  for (auto* s : {devices_, microbatches_, chunks_})
    connect(s, &QSpinBox::valueChanged, this, &TemplateDialog::regenerate);
  // The last kind and sizes the user created (QSettings), else 1F1B on 4 devices x 8.
  QSettings st(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
  const int lastKind = kind_->findText(st.value(QStringLiteral("template/kind")).toString());
  kind_->setCurrentIndex(lastKind >= 0 ? lastKind : std::max(0, kind_->findText(QStringLiteral("1f1b"))));
  const std::pair<const char*, QSpinBox*> sizes[] = {
      {"template/devices", devices_}, {"template/microbatches", microbatches_}, {"template/chunks", chunks_}};
  for (const auto& [key, spin] : sizes) spin->setValue(st.value(QLatin1String(key), spin->value()).toInt());
  connect(this, &QDialog::accepted, this, [this, sizes] {
    QSettings st(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
    st.setValue(QStringLiteral("template/kind"), kind_->currentText());
    for (const auto& [key, spin] : sizes) st.setValue(QLatin1String(key), spin->value());
  });
  regenerate();
  resize(820, 460);
}

void TemplateDialog::setKind(ScheduleKind k) {
  kind_->setCurrentIndex(kind_->findData(static_cast<int>(k)));
}
void TemplateDialog::setDevices(int d) {
  devices_->setValue(d);
}
void TemplateDialog::setMicrobatches(int m) {
  microbatches_->setValue(m);
}
void TemplateDialog::setChunks(int c) {
  chunks_->setValue(c);
}

void TemplateDialog::showEvent(QShowEvent* e) {
  QDialog::showEvent(e);
  // The first preview is fitted before the dialog has its size: fit again once shown.
  // By name: clang-analyzer takes the slot object of the functor overloads for a leak.
  QMetaObject::invokeMethod(preview_, "zoomToFit", Qt::QueuedConnection);
}

QString TemplateDialog::kindName() const {
  return kind_->currentText();
}
int TemplateDialog::devices() const {
  return devices_->value();
}
int TemplateDialog::microbatches() const {
  return microbatches_->value();
}
int TemplateDialog::chunks() const {
  return chunks_->value();
}
const Analysis& TemplateDialog::previewAnalysis() const {
  return previewDoc_->analysis();
}

QString TemplateDialog::errorText() const {
  return schedule_ ? QString() : info_->text();
}

void TemplateDialog::regenerate() {
  GeneratorOptions o;
  o.devices = devices_->value();
  o.microbatches = microbatches_->value();
  o.chunks = chunks_->value();
  const auto kind = static_cast<ScheduleKind>(kind_->currentData().toInt());
  auto s = generateSchedule(kind, o);
  if (!s) {
    schedule_.reset();
    info_->setText(QStringLiteral("<span style='color:#e53935'>%1</span>")
                       .arg(QString::fromStdString(s.error().message).toHtmlEscaped()));
    buttons_->button(QDialogButtonBox::Ok)->setEnabled(false);
    Schedule empty;
    empty.pipeline = Pipeline::make(1, 1, 1, PlacementKind::Linear).value();
    empty.devices.resize(1);
    previewDoc_->load(empty, defaultCostProfile(1));
    return;
  }
  schedule_ = s.value();
  previewDoc_->load(*schedule_, defaultCostProfile(*schedule_));
  const auto& m = previewDoc_->analysis().timeline.metrics;
  info_->setText(tr("%1 stages, %2 ops · makespan %3 · bubble %4 % (default model: %5 × (F 1, I 1, W 0.8 ms) "
                    "per micro-batch, split over the %1 stages)")
                     .arg(schedule_->pipeline.stages)
                     .arg(schedule_->opCount())
                     .arg(makespanText(previewDoc_->analysis()))
                     .arg(m.bubbleRatio * 100, 0, 'f', 1)
                     .arg(schedule_->pipeline.devices));
  buttons_->button(QDialogButtonBox::Ok)->setEnabled(true);
  preview_->zoomToFit();
}

}  // namespace ps::ui
