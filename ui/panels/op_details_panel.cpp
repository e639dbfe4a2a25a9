#include "panels/op_details_panel.h"

#include <QEvent>
#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>

#include "document/measured_overlay.h"
#include "document/schedule_document.h"
#include "pipestudio/core/analysis/comparison.h"
#include "pipestudio/core/planning/schedule_edits.h"
#include "timeline/theme.h"
#include "timeline/timeline_view.h"
#include "widgets/text_wrap.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;

namespace {

constexpr int kOpRole = Qt::UserRole;        // an item that names an op: kind, stage, micro-batch
constexpr int kFullRole = Qt::UserRole + 1;  // the value before wrapping
QString ms(double v) {
  return msText(v);
}

const TimelineOp* timed(const Timeline& t, int device, int step) {
  auto lo = std::lower_bound(t.ops.begin(), t.ops.end(), device,
                             [](const TimelineOp& o, int d) { return o.device < d; });
  for (auto it = lo; it != t.ops.end() && it->device == device; ++it)
    if (it->step == step) return &*it;
  return nullptr;
}

const Transfer* transferOf(const Timeline& t, const Op& producer, const Op& consumer) {
  for (const auto& tr : t.transfers)
    if (tr.producer == producer && tr.consumer == consumer) return &tr;
  return nullptr;
}

void setOp(QTreeWidgetItem* it, const Op& op) {
  it->setData(0, kOpRole, QVariantList{static_cast<int>(op.kind), op.stage, op.microbatch});
  it->setToolTip(1, OpDetailsPanel::tr("Click to select it on the timeline"));
}

}  // namespace

OpDetailsPanel::OpDetailsPanel(ScheduleDocument* doc, MeasuredOverlay* overlay, TimelineView* view,
                               QWidget* parent)
    : QWidget(parent), doc_(doc), overlay_(overlay), view_(view) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  header_ = new QLabel;
  header_->setWordWrap(true);
  header_->setTextFormat(Qt::RichText);
  tree_ = new QTreeWidget;
  tree_->setColumnCount(2);
  tree_->setHeaderHidden(true);
  tree_->setUniformRowHeights(false);
  tree_->setWordWrap(false);
  tree_->header()->setSectionResizeMode(0, QHeaderView::Interactive);
  tree_->header()->setSectionResizeMode(1, QHeaderView::Stretch);
  tree_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  tree_->viewport()->installEventFilter(this);
  lay->addWidget(header_);
  lay->addWidget(tree_, 1);
  connect(tree_, &QTreeWidget::itemClicked, this, [this](QTreeWidgetItem* it) {
    const QVariantList v = it->data(0, kOpRole).toList();
    if (v.size() != 3) return;
    Q_EMIT opActivated(Op{static_cast<OpKind>(v[0].toInt()), v[1].toInt(), v[2].toInt()});
  });
  connect(view_, &TimelineView::selectionChanged, this, &OpDetailsPanel::refresh);
  connect(overlay_, &MeasuredOverlay::changed, this, &OpDetailsPanel::refresh);
  connect(doc_, &ScheduleDocument::changed, this, &OpDetailsPanel::refresh);
  refresh();
}

QString OpDetailsPanel::headerText() const {
  return header_->text();
}

QString OpDetailsPanel::text() const {
  QString out;
  std::function<void(const QTreeWidgetItem*, int)> walk = [&](const QTreeWidgetItem* it, int depth) {
    const QString full = it->data(1, kFullRole).toString();
    out += QString(qsizetype{depth} * 2, QLatin1Char(' ')) + it->text(0) + QStringLiteral(": ") +
           (full.isEmpty() ? it->text(1) : full) + QLatin1Char('\n');
    for (int i = 0; i < it->childCount(); ++i) walk(it->child(i), depth + 1);
  };
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) walk(tree_->topLevelItem(i), 0);
  return out;
}

const CriticalPath& OpDetailsPanel::planCriticalPath() {
  auto a = doc_->analysisPtr();
  if (criticalFor_ != a) {
    critical_ = a->timeline.complete ? criticalPath(a->timeline, a->schedule) : CriticalPath{};
    criticalFor_ = a;
  }
  return critical_;
}

void OpDetailsPanel::refresh() {
  tree_->clear();
  const auto ref = view_->selection();
  const auto selected = view_->selectedOp();
  if (!ref || !selected || view_->iterationsShown()) {
    header_->setText(
        tr("Select an op on the timeline (a click, or an arrow key) to see its times, what it "
           "waited for and its dependencies."));
    return;
  }
  const Analysis& a = doc_->analysis();
  const Schedule& s = a.schedule;
  const Op op = *selected;
  auto name = [&](const Op& o) { return QString::fromStdString(s.opName(o)); };
  header_->setText(tr("<b>%1</b> on device %2 · step %3 of %4")
                       .arg(name(op).toHtmlEscaped())
                       .arg(ref->device)
                       .arg(ref->step + 1)
                       .arg(s.devices[static_cast<size_t>(ref->device)].size()));
  auto row = [&](QTreeWidgetItem* parent, const QString& label, const QString& value) {
    auto* it = parent ? new QTreeWidgetItem(parent) : new QTreeWidgetItem(tree_);
    it->setText(0, label);
    it->setText(1, value);
    it->setData(1, kFullRole, value);
    it->setToolTip(1, value);
    return it;
  };
  const QColor muted = palette().color(QPalette::PlaceholderText);

  // Planned.
  const TimelineOp* t = timed(a.timeline, ref->device, ref->step);
  if (t)
    row(nullptr, tr("planned"), tr("%1 → %2 (%3)").arg(ms(t->start), ms(t->end), ms(t->duration())));
  else
    row(nullptr, tr("planned"), tr("not reached: the simulation stalled before it"))->setForeground(1, muted);

  // Measured, with an overlay.
  if (const Comparison* c = overlay_->comparison()) {
    const OpMatch* m = nullptr;
    for (const auto& x : c->matches)
      if (x.op == op) m = &x;
    if (m) {
      QString v = tr("%1 → %2 (%3)").arg(ms(m->measuredStart), ms(m->measuredEnd), ms(m->measuredMs));
      if (m->deviation) v += tr(" · %1× planned").arg(*m->deviation, 0, 'f', 2);
      row(nullptr, tr("measured"), v);
    } else {
      row(nullptr, tr("measured"), tr("not in the measured run"))->setForeground(1, muted);
    }
  }

  // Waited, and for what: the input that arrived last, or the device's previous op.
  std::optional<Op> lastInput;
  if (t) {
    const TimelineOp* prev = ref->step > 0 ? timed(a.timeline, ref->device, ref->step - 1) : nullptr;
    const double free = prev ? prev->end : 0.0;
    double latest = -1;
    for (const Op& dep : doc_->dependencies(op)) {
      const auto dr = doc_->find(dep);
      const TimelineOp* dt = dr ? timed(a.timeline, dr->device, dr->step) : nullptr;
      if (!dt) continue;
      double arrive = dt->end;
      if (const Transfer* xfer = transferOf(a.timeline, dep, op)) arrive = std::max(arrive, xfer->end);
      if (arrive > latest) {
        latest = arrive;
        lastInput = dep;
      }
    }
    const double wait = t->start - free;
    QString v;
    if (wait <= 1e-6)
      v = prev ? tr("no wait: it started as its device's previous op ended") : tr("no wait");
    else if (lastInput && latest >= t->start - 1e-6)
      v = tr("%1 for %2 (arrived %3)").arg(ms(wait), name(*lastInput), ms(latest));
    else
      v = tr("%1 idle before it").arg(ms(wait));
    row(nullptr, tr("waited"), v);
  }

  // Critical path of the plan.
  if (t) {
    const CriticalPath& cp = planCriticalPath();
    const CriticalStep* on = nullptr;
    for (const auto& st : cp.steps)
      if (st.op < a.timeline.ops.size() && a.timeline.ops[st.op].op == op) on = &st;
    QString v;
    if (cp.steps.empty())
      v = tr("not available (the simulation did not finish)");
    else if (!on)
      v = tr("not on it");
    else if (on->via == CriticalLink::Dependency)
      v = tr("on it, reached through its input (%1)").arg(lastInput ? name(*lastInput) : tr("a dependency"));
    else if (on->via == CriticalLink::DeviceOrder)
      v = tr("on it, reached through its device's order");
    else
      v = tr("on it: where the chain starts");
    auto* it = row(nullptr, tr("critical path"), v);
    if (on) it->setForeground(1, Theme::forPalette(palette()).playhead);
  }

  // Memory after it.
  if (t && ref->device < static_cast<int>(a.timeline.memory.size())) {
    const auto& curve = a.timeline.memory[static_cast<size_t>(ref->device)];
    auto it = std::upper_bound(curve.begin(), curve.end(), t->end,
                               [](double v, const MemorySample& x) { return v < x.time; });
    if (it != curve.begin()) row(nullptr, tr("memory after"), bytesText(std::prev(it)->bytes));
  }

  // Flow: its inputs and the ops that wait for it.
  auto* inputs = row(nullptr, tr("inputs"), QString());
  for (const Op& dep : doc_->dependencies(op)) {
    const auto dr = doc_->find(dep);
    const TimelineOp* dt = dr ? timed(a.timeline, dr->device, dr->step) : nullptr;
    QString v = dr ? tr("device %1").arg(dr->device) : tr("not in the schedule");
    if (dt) {
      v += tr(" · ended %1").arg(ms(dt->end));
      if (const Transfer* xfer = transferOf(a.timeline, dep, op))
        v += tr(" · sent in %1, arrived %2").arg(ms(xfer->end - xfer->start), ms(xfer->end));
    } else if (dr) {
      v += tr(" · not reached");
    }
    if (lastInput && *lastInput == dep) v += tr(" · the last to arrive");
    auto* it = row(inputs, name(dep), v);
    setOp(it, dep);
  }
  inputs->setText(1, inputs->childCount() ? tr("%n op(s)", nullptr, inputs->childCount())
                                          : tr("none: it can start first"));
  inputs->setData(1, kFullRole, inputs->text(1));
  inputs->setToolTip(1, inputs->text(1));
  auto* outputs = row(nullptr, tr("waited on by"), QString());
  for (const Op& next : doc_->dependents(op)) {
    const auto nr = doc_->find(next);
    const TimelineOp* nt = nr ? timed(a.timeline, nr->device, nr->step) : nullptr;
    QString v = nr ? tr("device %1").arg(nr->device) : QString();
    if (nt) v += tr(" · starts %1").arg(ms(nt->start));
    if (t && nt) {
      double ready = t->end;
      if (const Transfer* xfer = transferOf(a.timeline, op, next)) ready = xfer->end;
      v += tr(" · slack %1").arg(ms(std::max(0.0, nt->start - ready)));
    }
    auto* it = row(outputs, name(next), v);
    setOp(it, next);
  }
  outputs->setText(1, outputs->childCount() ? tr("%n op(s)", nullptr, outputs->childCount()) : tr("none"));
  outputs->setData(1, kFullRole, outputs->text(1));
  outputs->setToolTip(1, outputs->text(1));

  // Findings about it.
  for (const auto& d : a.diagnostics)
    for (const auto& r : d.related)
      if (r.device == ref->device && r.step == ref->step) {
        auto* it = row(nullptr, tr("finding"), QString::fromStdString(d.message));
        it->setForeground(1, d.severity == Severity::Error ? Theme::forPalette(palette()).error
                                                           : palette().color(QPalette::Text));
        break;
      }
  tree_->expandAll();
  wrappedAt_ = -1;
  rewrap();
}

void OpDetailsPanel::rewrap() {
  // Values wrap at their column's width (never cut at the dock's edge), the whole in the tooltip.
  tree_->resizeColumnToContents(0);
  const int w = std::max(40, tree_->viewport()->width() - tree_->columnWidth(0) - 12);
  if (w == wrappedAt_) return;
  wrappedAt_ = w;
  std::function<void(QTreeWidgetItem*)> visit = [&](QTreeWidgetItem* it) {
    const QString full = it->data(1, kFullRole).toString();
    if (!full.isEmpty()) it->setText(1, wrapToWidth(full, QFontMetrics(it->font(1)), w));
    for (int i = 0; i < it->childCount(); ++i) visit(it->child(i));
  };
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) visit(tree_->topLevelItem(i));
}

bool OpDetailsPanel::eventFilter(QObject* o, QEvent* e) {
  // The viewport's width, not the dock's: it narrows when the vertical scroll bar appears.
  if (o == tree_->viewport() && e->type() == QEvent::Resize) rewrap();
  return QWidget::eventFilter(o, e);
}

}  // namespace ps::ui
