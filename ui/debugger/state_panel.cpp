#include "debugger/state_panel.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <cmath>
#include <functional>
#include <map>

#include "debugger/stepper_controller.h"
#include "timeline/theme.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;

namespace {

constexpr int kHasOpRole = Qt::UserRole;
constexpr int kKindRole = Qt::UserRole + 1;
constexpr int kStageRole = Qt::UserRole + 2;
constexpr int kMbRole = Qt::UserRole + 3;

QString fmtMs(double v) {
  if (!std::isfinite(v)) return QStringLiteral("–");
  return msValue(v);
}

QString fmtBytes(std::int64_t b) {
  return QString::fromStdString(ps::core::formatByteSize(b));
}

void setOp(QTreeWidgetItem* it, const Op& op) {
  it->setData(0, kHasOpRole, true);
  it->setData(0, kKindRole, static_cast<int>(op.kind));
  it->setData(0, kStageRole, op.stage);
  it->setData(0, kMbRole, op.microbatch);
  it->setToolTip(1, StatePanel::tr("Click to select it on the timeline"));
}

QTreeWidgetItem* addRow(QTreeWidgetItem* parent, const QString& label, const QString& value) {
  auto* it = new QTreeWidgetItem(parent);
  it->setText(0, label);
  it->setText(1, value);
  return it;
}

const QColor kRed(0xe5, 0x39, 0x35);
const QColor kPlayhead(0xd8, 0x1b, 0x60);

}  // namespace

StatePanel::StatePanel(QWidget* parent) : QWidget(parent) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->setSpacing(4);
  header_ = new QLabel;
  header_->setTextFormat(Qt::RichText);
  header_->setWordWrap(true);
  tree_ = new QTreeWidget;
  tree_->setColumnCount(2);
  tree_->setHeaderLabels({tr("Device"), tr("State at the playhead")});
  tree_->setUniformRowHeights(true);
  tree_->setAlternatingRowColors(true);
  tree_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  // Values as wide as they are (a narrow dock scrolls sideways instead of eliding them).
  tree_->header()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  tree_->header()->setStretchLastSection(false);
  lay->addWidget(header_);
  lay->addWidget(tree_, 1);
  connect(tree_, &QTreeWidget::itemClicked, this, [this](QTreeWidgetItem* it) {
    if (!it->data(0, kHasOpRole).toBool()) return;
    Op op;
    op.kind = static_cast<OpKind>(it->data(0, kKindRole).toInt());
    op.stage = it->data(0, kStageRole).toInt();
    op.microbatch = it->data(0, kMbRole).toInt();
    Q_EMIT opActivated(op);
  });
  clearState(tr("No timeline to step through."));
}

QString StatePanel::headerText() const {
  return header_->text();
}

void StatePanel::clearState(const QString& why) {
  tree_->clear();
  transfers_ = nullptr;
  header_->setText(why);
}

void StatePanel::setState(const StepState& st, const Stepper& stepper, bool measured) {
  const Timeline& tl = stepper.timeline();
  const Schedule& plan = stepper.plan();
  auto name = [&](const Op& op) { return QString::fromStdString(plan.opName(op)); };

  // Keep what the user collapsed collapsed across steps.
  std::map<QString, bool> collapsed;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i)
    collapsed[tree_->topLevelItem(i)->text(0)] = !tree_->topLevelItem(i)->isExpanded();
  tree_->setUpdatesEnabled(false);
  tree_->clear();

  QString head = tr("<b>t = %1 ms</b> · event %2 of %3 · %4")
                     .arg(fmtMs(st.time))
                     .arg(st.position)
                     .arg(stepper.size())
                     .arg(measured ? (live_ ? tr("run in progress") : tr("measured run"))
                                   : tr("planned (simulated) timeline"));
  if (st.stopped && live_) {
    head += tr("<br>The run is still going: the newest measured event so far.");
  } else if (st.stopped && cancelled_) {
    const QString why = st.diagnostics.empty()
                            ? tr("the run was cancelled")
                            : QString::fromStdString(st.diagnostics.front().message).toHtmlEscaped();
    head += tr("<br><b>Cancelled here:</b> %1").arg(why);
  } else if (st.stopped && hang_) {
    const QString err = Theme::html(Theme::forPalette(palette()).error);
    head +=
        tr("<br><span style='color:%1'><b>Hung here:</b> %2</span>")
            .arg(err,
                 QString::fromStdString(hang_->cause.empty() ? hang_->code : hang_->cause).toHtmlEscaped());
    head += tr("<br><span style='color:%1'><b>%2</b> %3</span>")
                .arg(Theme::html(Theme::forPalette(palette()).deadlock),
                     hang_->cycle ? tr("Wait cycle:") : tr("Wait chain:"),
                     QString::fromStdString(hang_->text).toHtmlEscaped());
  } else if (st.stopped) {
    QString why = st.diagnostics.empty()
                      ? tr("the timeline is incomplete")
                      : QString::fromStdString(st.diagnostics.front().message).toHtmlEscaped();
    head += tr("<br><span style='color:%1'><b>Stopped here:</b> %2</span>")
                .arg(Theme::html(Theme::forPalette(palette()).error), why);
  }
  header_->setText(head);

  QFont bold = tree_->font();
  bold.setBold(true);
  const QColor muted = palette().color(QPalette::PlaceholderText);
  for (const DeviceState& d : st.devices) {
    auto* dev = new QTreeWidgetItem(tree_);
    dev->setText(0, tr("Device %1").arg(d.device));
    dev->setFont(0, bold);
    QString status;
    int stuckAt = -1;  // index in the hang's stuck steps
    if (st.stopped && hang_ && !live_ && !cancelled_)
      for (size_t k = 0; k < hang_->stuck.size(); ++k)
        if (hang_->stuck[k].device == d.device) stuckAt = static_cast<int>(k);
    if (!d.running.empty()) {
      QStringList names;
      for (size_t i : d.running) names << name(tl.ops[i].op);
      status = tr("running %1").arg(names.join(QStringLiteral(" + ")));
      dev->setForeground(1, kPlayhead);
    } else if (d.finished) {
      status = tr("finished");
      dev->setForeground(1, muted);
    } else if (d.blocked && cancelled_ && st.stopped) {
      status = tr("stopped (cancelled)");
      dev->setForeground(1, muted);
    } else if (d.blocked && (live_ || cancelled_ || !isStuck(d, st))) {
      // An input on its way (the pipeline filling, a producer running): the normal wait.
      status = tr("waiting");
      dev->setForeground(1, muted);
    } else if (stuckAt >= 0) {
      // The engine's post-mortem names this device's step: whatever the measured timeline
      // shows (an input that ran but never arrived looks ready), it is stuck there.
      status = tr("stuck (hung)");
      dev->setForeground(1, Theme::forPalette(palette()).deadlock);
      dev->setFont(1, bold);
    } else if (d.blocked) {
      status = tr("blocked");
      dev->setForeground(1, kRed);
      dev->setFont(1, bold);
    } else {
      status = tr("idle");
    }
    status += tr(" · %1 / %2 ops done").arg(d.opsDone).arg(d.opsPlanned);
    dev->setText(1, status);
    if (stuckAt >= 0 && static_cast<size_t>(stuckAt) < hang_->notes.size() &&
        !hang_->notes[static_cast<size_t>(stuckAt)].empty())
      addRow(dev, tr("engine"), QString::fromStdString(hang_->notes[static_cast<size_t>(stuckAt)]));

    for (size_t i : d.running) {
      const TimelineOp& o = tl.ops[i];
      const QString until =
          std::isfinite(o.end) && o.end >= o.start ? fmtMs(o.end) + tr(" ms") : tr("never ended");
      auto* r = addRow(dev, tr("running"), tr("%1  (%2 ms → %3)").arg(name(o.op), fmtMs(o.start), until));
      setOp(r, o.op);
    }
    for (const WaitingOp& w : d.next) {
      QString v = name(w.op);
      if (w.missing.empty())
        v += d.running.empty() ? tr("  (ready: all inputs here)") : tr("  (inputs ready)");
      else
        v += tr("  waits for %n input(s)", nullptr, static_cast<int>(w.missing.size()));
      auto* n = addRow(dev, tr("next"), v);
      setOp(n, w.op);
      const bool stuck = !live_ && !cancelled_ && isStuck(d, st);
      if (!w.missing.empty() && stuck) n->setForeground(1, kRed);
      for (const InputWait& m : w.missing) {
        const bool pending = (live_ || cancelled_) && m.status == InputStatus::NeverRan;
        const QString status = !pending ? QString::fromUtf8(inputStatusName(m.status).data())
                               : live_  ? tr("not measured yet")
                                        : tr("not run (cancelled before it)");
        QString mv = tr("%1 on device %2: %3").arg(name(m.input)).arg(m.device).arg(status);
        if (m.status == InputStatus::InTransit && m.transfer && *m.transfer < tl.transfers.size())
          mv += tr(" (arrives %1 ms)").arg(fmtMs(tl.transfers[*m.transfer].end));
        auto* c = addRow(n, tr("waits for"), mv);
        setOp(c, m.input);
        if (m.status == InputStatus::NeverRan && !pending) c->setForeground(1, kRed);
      }
      n->setExpanded(true);
    }
    if (d.next.empty() && d.running.empty())
      addRow(dev, tr("next"), d.finished ? tr("nothing: done") : tr("—"));
    if (!d.inFlight.empty()) {
      QStringList mbs;
      bool oneStage = true;
      for (const auto& f : d.inFlight) oneStage = oneStage && f.stage == d.inFlight.front().stage;
      for (const auto& f : d.inFlight)
        mbs << (oneStage ? QString::number(f.microbatch)
                         : QStringLiteral("%1@s%2").arg(f.microbatch).arg(f.stage));
      QString v = tr("%n micro-batch(es): ", nullptr, static_cast<int>(d.inFlight.size())) +
                  mbs.join(QStringLiteral(", "));
      if (oneStage) v += tr(" (s%1)").arg(d.inFlight.front().stage);
      addRow(dev, tr("in flight"), v);
    } else {
      addRow(dev, tr("in flight"), tr("none"));
    }
    QString mem;
    if (d.memoryBytes) mem = fmtBytes(*d.memoryBytes) + (measured ? tr(" measured") : tr(" simulated"));
    if (d.plannedMemoryBytes) {
      if (!mem.isEmpty()) mem += QStringLiteral(" · ");
      mem += fmtBytes(*d.plannedMemoryBytes) + tr(" planned");
    }
    // A device that has not started holds nothing measured yet: that is not a gap in the record.
    if (mem.isEmpty())
      mem = d.opsDone == 0 && d.running.empty() ? tr("none yet (not started)") : tr("not recorded");
    addRow(dev, tr("memory"), mem);
    dev->setExpanded(!collapsed[dev->text(0)]);
  }

  transfers_ = new QTreeWidgetItem(tree_);
  transfers_->setText(0, tr("Transfers"));
  transfers_->setFont(0, bold);
  transfers_->setText(1, st.transfersInAir.empty()
                             ? tr("none in the air")
                             : tr("%n in the air", nullptr, static_cast<int>(st.transfersInAir.size())));
  for (size_t i : st.transfersInAir) {
    if (i >= tl.transfers.size()) continue;
    const Transfer& t = tl.transfers[i];
    QString v = tr("%1 → %2: device %3 → %4, %5 → %6 ms")
                    .arg(name(t.producer), name(t.consumer))
                    .arg(t.srcDevice)
                    .arg(t.dstDevice)
                    .arg(fmtMs(t.start), fmtMs(t.end));
    if (t.bytes > 0) v += QStringLiteral(", ") + fmtBytes(t.bytes);
    auto* r = addRow(transfers_, tr("in the air"), v);
    setOp(r, t.consumer);
  }
  transfers_->setExpanded(!collapsed[transfers_->text(0)]);
  tree_->setUpdatesEnabled(true);
}

QTreeWidgetItem* StatePanel::deviceItem(int device) const {
  const QString want = tr("Device %1").arg(device);
  for (int i = 0; i < tree_->topLevelItemCount(); ++i)
    if (tree_->topLevelItem(i)->text(0) == want) return tree_->topLevelItem(i);
  return nullptr;
}

QStringList StatePanel::rows(const QTreeWidgetItem* item) {
  QStringList out;
  if (!item) return out;
  for (int i = 0; i < item->childCount(); ++i)
    out << item->child(i)->text(0) + QStringLiteral(": ") + item->child(i)->text(1);
  return out;
}

QString StatePanel::text() const {
  QString out;
  std::function<void(const QTreeWidgetItem*, int)> walk = [&](const QTreeWidgetItem* it, int depth) {
    out += QString(qsizetype{depth} * 2, QLatin1Char(' ')) + it->text(0) + QStringLiteral(": ") +
           it->text(1) + QLatin1Char('\n');
    for (int i = 0; i < it->childCount(); ++i) walk(it->child(i), depth + 1);
  };
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) walk(tree_->topLevelItem(i), 0);
  return out;
}

// ---- breakpoints ------------------------------------------------------------------------------

BreakpointsPanel::BreakpointsPanel(QWidget* parent) : QWidget(parent) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 0, 4, 4);
  lay->setSpacing(4);
  auto* title = new QLabel(tr("<b>Breakpoints</b> (F9 on the selected op)"));
  list_ = new QListWidget;
  list_->setMaximumHeight(72);
  auto spin = [](const QString& tip) {
    auto* s = new QSpinBox;
    s->setRange(-1, 4096);
    s->setSpecialValueText(tr("any"));
    s->setValue(-1);
    s->setToolTip(tip);
    return s;
  };
  device_ = spin(tr("The device (any: every device)"));
  stage_ = spin(tr("The op's stage (any: every stage)"));
  microbatch_ = spin(tr("The op's micro-batch (any: every micro-batch)"));
  kind_ = new QComboBox;
  kind_->addItem(tr("any op"), -1);
  for (int k = 0; k < static_cast<int>(OpKind::kBuiltinCount); ++k)
    kind_->addItem(QString::fromUtf8(builtinKindName(static_cast<OpKind>(k)).data()), k);
  on_ = new QComboBox;
  on_->addItem(tr("starts"));
  on_->addItem(tr("ends"));
  auto* add = new QPushButton(tr("&Add"));
  auto* remove = new QPushButton(tr("Re&move"));
  // Two narrow columns: the dock stays narrow.
  auto* grid = new QGridLayout;
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setHorizontalSpacing(6);
  grid->setVerticalSpacing(2);
  grid->addWidget(new QLabel(tr("Device")), 0, 0);
  grid->addWidget(device_, 0, 1);
  grid->addWidget(on_, 0, 2, 1, 2);
  grid->addWidget(new QLabel(tr("Op")), 1, 0);
  grid->addWidget(kind_, 1, 1);
  grid->addWidget(new QLabel(tr("mb")), 1, 2);
  grid->addWidget(microbatch_, 1, 3);
  grid->addWidget(new QLabel(tr("Stage")), 2, 0);
  grid->addWidget(stage_, 2, 1);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add);
  buttons->addWidget(remove);
  grid->addLayout(buttons, 2, 2, 1, 2);
  grid->setColumnStretch(1, 1);
  grid->setColumnStretch(3, 1);
  lay->addWidget(title);
  lay->addWidget(list_);
  lay->addLayout(grid);
  connect(add, &QPushButton::clicked, this, [this] { Q_EMIT addRequested(draft()); });
  connect(remove, &QPushButton::clicked, this, [this] {
    const int r = list_->currentRow();
    if (r >= 0) Q_EMIT removeRequested(static_cast<size_t>(r));
  });
}

Breakpoint BreakpointsPanel::draft() const {
  Breakpoint bp;
  if (device_->value() >= 0) bp.device = device_->value();
  if (kind_->currentData().toInt() >= 0) bp.kind = static_cast<OpKind>(kind_->currentData().toInt());
  if (stage_->value() >= 0) bp.stage = stage_->value();
  if (microbatch_->value() >= 0) bp.microbatch = microbatch_->value();
  bp.on = on_->currentIndex() == 1 ? StepEventKind::End : StepEventKind::Start;
  return bp;
}

void BreakpointsPanel::setDraft(const Breakpoint& bp) {
  device_->setValue(bp.device.value_or(-1));
  kind_->setCurrentIndex(std::max(0, kind_->findData(bp.kind ? static_cast<int>(*bp.kind) : -1)));
  stage_->setValue(bp.stage.value_or(-1));
  microbatch_->setValue(bp.microbatch.value_or(-1));
  on_->setCurrentIndex(bp.on == StepEventKind::End ? 1 : 0);
}

void BreakpointsPanel::setBreakpoints(const std::vector<Breakpoint>& bps) {
  const int cur = list_->currentRow();
  list_->clear();
  for (const auto& bp : bps) list_->addItem(QStringLiteral("● ") + breakpointText(bp));
  if (bps.empty()) {
    auto* it = new QListWidgetItem(tr("none: F9 on an op, or add one below"));
    it->setFlags(Qt::NoItemFlags);
    list_->addItem(it);
  } else {
    list_->setCurrentRow(std::min(cur, static_cast<int>(bps.size()) - 1));
  }
}

}  // namespace ps::ui
