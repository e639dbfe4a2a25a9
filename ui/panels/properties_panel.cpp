#include "panels/properties_panel.h"

#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "document/schedule_document.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;

namespace {
constexpr std::int64_t kMiB = std::int64_t(1) << 20;
constexpr std::int64_t kGiB = std::int64_t(1) << 30;
enum Col { kName, kF, kI, kW, kR, kAct, kWeight, kOut, kCols };

QDoubleSpinBox* spin(double max, int decimals, const QString& suffix, const QString& special) {
  auto* s = new QDoubleSpinBox;
  s->setRange(0, max);
  s->setDecimals(decimals);
  s->setSuffix(suffix);
  s->setSpecialValueText(special);
  s->setKeyboardTracking(false);
  s->setAlignment(Qt::AlignRight);
  return s;
}
}  // namespace

PropertiesPanel::PropertiesPanel(ScheduleDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(8, 8, 8, 8);
  lay->setSpacing(10);

  auto* pipe = new QGroupBox(tr("Pipeline"));
  auto* pf = new QFormLayout(pipe);
  pf->setLabelAlignment(Qt::AlignLeft);
  shape_ = new QLabel;
  shape_->setObjectName(QStringLiteral("shape"));
  placement_ = new QLabel;
  shape_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  pf->addRow(tr("Shape"), shape_);
  pf->addRow(tr("Placement"), placement_);
  auto* regen = new QPushButton(tr("&New from template…"));
  connect(regen, &QPushButton::clicked, this, &PropertiesPanel::newFromTemplateRequested);
  pf->addRow(QString(), regen);
  lay->addWidget(pipe);

  auto* cost = new QGroupBox(tr("Cost model"));
  auto* cl = new QVBoxLayout(cost);
  auto* form = new QFormLayout;
  profileCombo_ = new QComboBox;
  profileCombo_->addItem(tr("Default (uniform)"), QString());
  const QDir profiles(resourcesDir() + QStringLiteral("/profiles"));
  for (const QFileInfo& fi : profiles.entryInfoList({QStringLiteral("*.json")}, QDir::Files, QDir::Name))
    profileCombo_->addItem(fi.completeBaseName(), fi.absoluteFilePath());
  profileCombo_->addItem(tr("Load from file…"), QStringLiteral("?"));
  form->addRow(tr("Profile"), profileCombo_);
  memory_ = new QLineEdit;
  memory_->setObjectName(QStringLiteral("deviceMemory"));
  memory_->setPlaceholderText(tr("unlimited"));
  memory_->setAlignment(Qt::AlignRight);
  memory_->setToolTip(
      tr("Device memory capacity: 80GiB, 40GB, 512 MiB; a plain number is GiB; empty is unlimited"));
  bandwidth_ = spin(10000, 1, tr(" GB/s"), tr("infinite"));
  latency_ = spin(1000, 3, tr(" ms"), QString());
  host_ = spin(10000, 1, tr(" GB/s"), tr("infinite"));
  form->addRow(tr("Device memory"), memory_);
  form->addRow(tr("Link bandwidth"), bandwidth_);
  form->addRow(tr("Link latency"), latency_);
  form->addRow(tr("Host bandwidth"), host_);
  cl->addLayout(form);
  error_ = new QLabel;
  error_->setObjectName(QStringLiteral("propertiesError"));
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #e53935"));
  error_->setVisible(false);
  cl->addWidget(error_);

  table_ = new QTableWidget(0, kCols);
  table_->setHorizontalHeaderLabels({tr("Layer"), tr("F ms"), tr("I ms"), tr("W ms"), tr("R ms"),
                                     tr("Act MiB"), tr("Wt MiB"), tr("Out MiB")});
  const QString tips[] = {tr("Layer name"),
                          tr("Forward time (ms)"),
                          tr("Backward for inputs (ms)"),
                          tr("Weight gradients (ms)"),
                          tr("Recompute time (ms)"),
                          tr("Activations stashed from F to its backward (MiB)"),
                          tr("Weights (MiB); gradients and optimizer state scale with them"),
                          tr("Output sent to the next stage (MiB)")};
  for (int c = 0; c < kCols; ++c) table_->horizontalHeaderItem(c)->setToolTip(tips[c]);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 8);
  // Columns as wide as their contents (a real profile's "1.23457", "transformer.h.11"); the
  // table scrolls sideways in a narrow dock rather than eliding numbers to "1...".
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  table_->horizontalHeader()->setMinimumSectionSize(28);
  auto* unitNote = new QLabel(
      tr("Times in ms, sizes in MiB (or with a unit: 300us, 1.5GiB). Edit a cell to re-simulate."));
  unitNote->setWordWrap(true);
  QPalette np = unitNote->palette();
  np.setColor(QPalette::WindowText, np.color(QPalette::PlaceholderText));
  unitNote->setPalette(np);
  table_->setAlternatingRowColors(true);
  table_->setToolTip(
      tr("Per-layer costs; with one layer per stage these are the stage costs. Edit a cell to "
         "re-simulate."));
  cl->addWidget(table_, 1);
  cl->addWidget(unitNote);
  lay->addWidget(cost, 1);

  connect(table_, &QTableWidget::cellChanged, this, &PropertiesPanel::commitTable);
  for (auto* s : {bandwidth_, latency_, host_})
    connect(s, &QDoubleSpinBox::valueChanged, this, [this] { commitScalars(); });
  connect(memory_, &QLineEdit::editingFinished, this, [this] {
    if (memory_->isModified()) commitScalars();
  });
  connect(profileCombo_, &QComboBox::activated, this, &PropertiesPanel::profileChosen);
  connect(doc_, &ScheduleDocument::changed, this, &PropertiesPanel::refresh);
  refresh();
}

void PropertiesPanel::refresh() {
  refreshing_ = true;
  const Schedule& s = doc_->schedule();
  const CostProfile& p = doc_->profile();
  QString shape = tr("%1 devices · %2 stages · %3 micro-batches")
                      .arg(s.pipeline.devices)
                      .arg(s.pipeline.stages)
                      .arg(s.pipeline.microbatches);
  // DualPipe: the micro-batches run two routes through copies of the model's blocks.
  if (s.pipeline.routed())
    shape += tr(" · %1 routes over %2 blocks").arg(s.pipeline.routes.size()).arg(s.pipeline.blocks());
  shape_->setText(shape);
  placement_->setText(QString::fromUtf8(placementKindName(s.pipeline.placementKind).data()));
  memory_->setText(p.deviceMemoryBytes > 0 ? bytesPlain(p.deviceMemoryBytes) : QString());
  memory_->setModified(false);
  bandwidth_->setValue(p.link.bandwidthBytesPerMs / 1e6);  // bytes/ms -> GB/s
  latency_->setValue(p.link.latencyMs);
  host_->setValue(p.hostBandwidthBytesPerMs / 1e6);
  table_->setRowCount(static_cast<int>(p.layers.size()));
  for (int r = 0; r < static_cast<int>(p.layers.size()); ++r) {
    const LayerCost& l = p.layers[static_cast<size_t>(r)];
    const double values[] = {l.forwardMs,
                             l.backwardInputMs,
                             l.backwardWeightMs,
                             l.recomputeMs.value_or(l.forwardMs),
                             static_cast<double>(l.activationBytes) / static_cast<double>(kMiB),
                             static_cast<double>(l.weightBytes) / static_cast<double>(kMiB),
                             static_cast<double>(l.outputBytes) / static_cast<double>(kMiB)};
    auto* name = new QTableWidgetItem(QString::fromStdString(l.name));
    table_->setItem(r, kName, name);
    for (int c = kF; c < kCols; ++c) {
      auto* it = new QTableWidgetItem(numberText(values[c - kF]));
      it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(r, c, it);
    }
  }
  int idx = 0;
  for (int i = 1; i < profileCombo_->count() - 1; ++i)
    if (QFileInfo(profileCombo_->itemData(i).toString()).completeBaseName().toStdString() == p.name) idx = i;
  profileCombo_->setCurrentIndex(idx);
  refreshing_ = false;
}

void PropertiesPanel::commitTable(int row, int column) {
  if (refreshing_) return;
  CostProfile p = doc_->profile();
  if (row < 0 || row >= static_cast<int>(p.layers.size())) return;
  LayerCost& l = p.layers[static_cast<size_t>(row)];
  const QString text = table_->item(row, column)->text();
  if (column == kName) {
    l.name = text.toStdString();
  } else {
    // Times: ms or with a unit (300us, 1.5s); sizes: MiB or with a unit (1.5GiB, 40MB).
    const QString field =
        tr("%1 of %2").arg(table_->horizontalHeaderItem(column)->text(), QString::fromStdString(l.name));
    if (column >= kAct) {
      auto bytes = parseByteSizeText(text, kMiB);
      if (!bytes) return reject(fieldError(field, bytes.errors()));
      *(column == kAct ? &l.activationBytes : column == kWeight ? &l.weightBytes : &l.outputBytes) = *bytes;
    } else {
      auto ms = parseDurationText(text);
      if (!ms) return reject(fieldError(field, ms.errors()));
      if (column == kR)
        l.recomputeMs = *ms;
      else
        *(column == kF ? &l.forwardMs : column == kI ? &l.backwardInputMs : &l.backwardWeightMs) = *ms;
    }
  }
  showError({});
  doc_->setProfile(
      p,
      tr("Edit %1 of %2").arg(table_->horizontalHeaderItem(column)->text(), QString::fromStdString(l.name)));
}

void PropertiesPanel::commitScalars() {
  if (refreshing_) return;
  CostProfile p = doc_->profile();
  // Only what the user typed is read back: the shown text is rounded ("79.71 GiB").
  if (memory_->isModified()) {
    auto bytes = memory_->text().trimmed().isEmpty()
                     ? ps::core::Result<std::int64_t>(std::int64_t(0))  // unlimited
                     : parseByteSizeText(memory_->text(), kGiB);
    if (!bytes) return showError(fieldError(tr("Device memory"), bytes.errors()));
    p.deviceMemoryBytes = *bytes;
  }
  showError({});
  p.link.bandwidthBytesPerMs = bandwidth_->value() * 1e6;
  p.link.latencyMs = latency_->value();
  p.hostBandwidthBytesPerMs = host_->value() * 1e6;
  doc_->setProfile(p, tr("Edit memory and link"));
}

QString PropertiesPanel::errorText() const {
  return error_->text();
}

void PropertiesPanel::showError(const QString& text) {
  error_->setText(text);
  error_->setVisible(!text.isEmpty());
}

void PropertiesPanel::reject(const QString& why) {
  refresh();  // the cell shows the profile's value again
  showError(why);
}

void PropertiesPanel::profileChosen(int index) {
  QString path = profileCombo_->itemData(index).toString();
  if (path == QStringLiteral("?")) {
    path = QFileDialog::getOpenFileName(this, tr("Load cost profile"),
                                        resourcesDir() + QStringLiteral("/profiles"),
                                        tr("Cost profiles (*.json)"));
    if (path.isEmpty()) {
      refresh();
      return;
    }
  }
  if (path.isEmpty()) {
    doc_->setProfile(defaultCostProfile(doc_->schedule()), tr("Use the default profile"));
    return;
  }
  auto text = readTextFile(path);
  if (!text) {
    setToolTip(QString::fromStdString(formatDiagnostics(text.errors())));
    refresh();
    return;
  }
  auto p = parseCostProfile(*text, path.toStdString());
  if (!p) {
    setToolTip(QString::fromStdString(formatDiagnostics(p.errors())));
    refresh();
    return;
  }
  CostProfile prof = std::move(p).value();
  if (prof.name.empty()) prof.name = QFileInfo(path).completeBaseName().toStdString();
  doc_->setProfile(prof, tr("Use profile %1").arg(QFileInfo(path).fileName()));
}

}  // namespace ps::ui
