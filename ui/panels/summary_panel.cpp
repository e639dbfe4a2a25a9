#include "panels/summary_panel.h"

#include <QHeaderView>
#include <QResizeEvent>
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "timeline/theme.h"
#include "widgets/units_text.h"

namespace ps::ui {

namespace {

enum class Better { Lower, Higher };

// How a row's figures read: times and bytes through core's one formatter, the rest as plain
// numbers with fewer decimals for large values so the columns stay narrow.
struct Unit {
  QString (*text)(double);
  double same;  // differences below this read as "="
};

QString fixed(double v, int decimals) {
  const double a = std::abs(v);
  if (a >= 1000)
    decimals = 0;
  else if (a >= 100)
    decimals = std::min(decimals, 1);
  return QString::number(v, 'f', decimals);
}

const Unit kMs{[](double v) { return msPlain(v); }, 0.005};
const Unit kBytes{[](double v) { return bytesPlain(static_cast<std::int64_t>(std::llround(v))); },
                  0.005 * double(1LL << 30)};
const Unit kPercent{[](double v) { return fixed(v, 1) + QStringLiteral(" %"); }, 0.05};
const Unit kCount{[](double v) { return fixed(v, 0); }, 0.5};

// Whether each side's figures exist (its simulation finished), and whether they compare.
struct Sides {
  bool cur = true;
  bool saved = true;
  bool sameModel = true;      // both simulated with the same cost model
  bool curHasErrors = false;  // an invalid schedule is never "better"
};

void addRow(QTreeWidgetItem* parent, QTreeWidget* tree, const QString& name, double cur, double saved,
            const Unit& unit, Better better, Sides have = {}) {
  auto* it = parent ? new QTreeWidgetItem(parent) : new QTreeWidgetItem(tree);
  it->setText(0, name);
  const QString na = QObject::tr("n/a");
  const QColor muted = tree->palette().color(QPalette::PlaceholderText);
  it->setText(1, have.cur ? unit.text(cur) : na);
  it->setText(2, have.saved ? unit.text(saved) : na);
  for (int c = 1; c < 4; ++c) it->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
  if (!have.cur || !have.saved || !have.sameModel) {
    // Nothing to compare: a schedule that does not finish has no figures to be better or
    // worse, and figures of another cost model are not a baseline.
    it->setText(3, QStringLiteral("—"));
    it->setForeground(3, muted);
    if (!have.cur) it->setForeground(1, muted);
    if (!have.sameModel) {
      it->setForeground(2, muted);
      it->setToolTip(3, QObject::tr("Saved was simulated with another cost model: no change is computed"));
    }
    return;
  }
  const double diff = cur - saved;
  if (std::abs(diff) < unit.same) {
    it->setText(3, QStringLiteral("="));
    it->setForeground(3, muted);
  } else {
    it->setText(3, (diff > 0 ? QStringLiteral("+") : QString()) + unit.text(diff));
    const bool good = better == Better::Lower ? diff < 0 : diff > 0;
    if (good && have.curHasErrors) {
      it->setForeground(3, muted);
      it->setToolTip(3, QObject::tr("%1 (the schedule has errors now: not an improvement)").arg(it->text(3)));
    } else {
      it->setForeground(3, good ? Theme::current().good : Theme::current().error);
    }
  }
}

}  // namespace

SummaryPanel::SummaryPanel(QWidget* parent) : QTreeWidget(parent) {
  setColumnCount(4);
  setHeaderLabels({tr("Metric"), tr("Now"), tr("Saved"), tr("Change")});
  setRootIsDecorated(true);
  // The "not available (stalled at …)" line wraps rather than being cut off.
  setUniformRowHeights(false);
  setWordWrap(true);
  setAlternatingRowColors(true);
  setIndentation(10);  // narrow: the figures keep the width
  setSelectionMode(QAbstractItemView::NoSelection);
  setFocusPolicy(Qt::NoFocus);
  // Metric, Now and Saved as wide as their figures (fitColumns: the spanned notes above them
  // do not widen the first column); Change takes the rest and elides, its tooltip whole.
  header()->setStretchLastSection(true);
  for (int c = 0; c < 3; ++c) header()->setSectionResizeMode(c, QHeaderView::Interactive);
  header()->setMinimumSectionSize(24);
  setTextElideMode(Qt::ElideRight);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  header()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
}

void SummaryPanel::setMetrics(const ps::core::TimelineMetrics& cur, const ps::core::TimelineMetrics& saved) {
  setMetrics(cur, saved, SimulationProgress{}, SimulationProgress{});
}

void SummaryPanel::setMetrics(const ps::core::TimelineMetrics& cur, const ps::core::TimelineMetrics& saved,
                              const SimulationProgress& curProgress,
                              const SimulationProgress& savedProgress) {
  const Sides have{curProgress.finished, savedProgress.finished, baseline_.sameModel,
                   baseline_.currentErrors > 0};
  setUpdatesEnabled(false);
  // Keep the device groups the user closed closed.
  for (int i = 0; i < topLevelItemCount(); ++i) {
    QTreeWidgetItem* it = topLevelItem(i);
    if (it->childCount() == 0) continue;
    if (it->isExpanded())
      collapsed_.remove(it->text(0));
    else
      collapsed_.insert(it->text(0));
  }
  clear();
  for (const auto& [p, which] :
       {std::pair{&curProgress, tr("Now")}, std::pair{&savedProgress, tr("Saved")}}) {
    if (p->finished) continue;
    // A spanned line above the figures: why they are missing and how far the simulation got.
    auto* note = new QTreeWidgetItem(this);
    note->setText(0, tr("%1: not available\n(%2)").arg(which, stalledText(*p)));
    note->setFirstColumnSpanned(true);
    note->setForeground(0, Theme::current().error);
    note->setToolTip(0, tr("%1: %2").arg(which, notAvailableText(*p)));
  }
  if (!baseline_.sameModel) {
    auto* note = new QTreeWidgetItem(this);
    note->setText(0, tr("Saved: simulated with another cost model (%1);\nno change is compared")
                         .arg(baseline_.savedModel.isEmpty() ? tr("unnamed") : baseline_.savedModel));
    note->setFirstColumnSpanned(true);
    note->setForeground(0, palette().color(QPalette::PlaceholderText));
    note->setToolTip(0,
                     tr("The Saved figures are those of the file as last opened or saved, under its cost "
                        "model; the document's cost model has changed since, so the two are not compared."));
  }
  if (baseline_.currentErrors > 0 && curProgress.finished) {
    auto* note = new QTreeWidgetItem(this);
    note->setText(0, tr("Now: %n error(s), no change counts as better", nullptr, baseline_.currentErrors));
    note->setFirstColumnSpanned(true);
    note->setForeground(0, Theme::current().error);
    note->setToolTip(0, baseline_.currentProblem);
  }
  addRow(nullptr, this, tr("Makespan"), cur.makespan, saved.makespan, kMs, Better::Lower, have);
  addRow(nullptr, this, tr("Bubble ratio"), cur.bubbleRatio * 100, saved.bubbleRatio * 100, kPercent,
         Better::Lower, have);
  addRow(nullptr, this, tr("Efficiency"), cur.efficiency * 100, saved.efficiency * 100, kPercent,
         Better::Higher, have);
  addRow(nullptr, this, tr("Lower bound"), cur.lowerBound, saved.lowerBound, kMs, Better::Lower, have);
  addIterationRows();
  for (size_t d = 0; d < cur.devices.size(); ++d) {
    const auto& c = cur.devices[d];
    const ps::core::DeviceMetrics s = d < saved.devices.size() ? saved.devices[d] : ps::core::DeviceMetrics{};
    auto* group = new QTreeWidgetItem(this);
    group->setText(0, tr("Device %1").arg(d));
    group->setText(1, have.cur ? bytesPlain(c.peakMemoryBytes) : tr("n/a"));
    group->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
    QFont f = group->font(0);
    f.setBold(true);
    group->setFont(0, f);
    addRow(group, this, tr("Peak memory"), static_cast<double>(c.peakMemoryBytes),
           static_cast<double>(s.peakMemoryBytes), kBytes, Better::Lower, have);
    addRow(group, this, tr("In flight"), c.peakInflightMicrobatches, s.peakInflightMicrobatches, kCount,
           Better::Lower, have);
    addRow(group, this, tr("Busy"), c.busy, s.busy, kMs, Better::Higher, have);
    group->setExpanded(cur.devices.size() <= 8 && !collapsed_.contains(group->text(0)));
  }
  fitColumns();
  setUpdatesEnabled(true);
}

void SummaryPanel::fitColumns() {
  const QFontMetrics fm(font());
  int widths[3] = {fm.horizontalAdvance(headerItem()->text(0)), fm.horizontalAdvance(headerItem()->text(1)),
                   fm.horizontalAdvance(headerItem()->text(2))};
  std::function<void(QTreeWidgetItem*, int)> visit = [&](QTreeWidgetItem* it, int depth) {
    if (!it->isFirstColumnSpanned()) {
      if (it->toolTip(0).isEmpty()) it->setToolTip(0, it->text(0));
      for (int c = 0; c < 3; ++c) {
        QFont f = it->font(c);
        const int w =
            QFontMetrics(f).horizontalAdvance(it->text(c)) + (c == 0 ? (depth + 1) * indentation() : 0);
        widths[c] = std::max(widths[c], w);
      }
      for (int c = 1; c < 4; ++c)
        if (it->toolTip(c).isEmpty() && !it->text(c).isEmpty()) it->setToolTip(c, it->text(c));
    }
    for (int i = 0; i < it->childCount(); ++i) visit(it->child(i), depth + 1);
  };
  for (int i = 0; i < topLevelItemCount(); ++i) visit(topLevelItem(i), 0);
  for (int c = 0; c < 3; ++c) fitted_[c] = widths[c] + (c == 0 ? 10 : 14);  // the items' margins
  fitToViewport();
}

void SummaryPanel::fitToViewport() {
  // Change keeps room for a figure ("+1.63 ms"): in a narrow dock the metric names give way
  // first, then Now and Saved (elided, each whole in its tooltip), rather than the change
  // being pushed out of view.
  const QFontMetrics fm = fontMetrics();
  const int change = fm.horizontalAdvance(QStringLiteral("+0.00 ms")) + 6;
  const int avail = viewport()->width() - change;
  int w[3] = {fitted_[0], fitted_[1], fitted_[2]};
  const int min0 = std::min(fitted_[0], fm.horizontalAdvance(QStringLiteral("Makes…")) + 24);
  const int minFigure = fm.horizontalAdvance(QStringLiteral("0.0…")) + 8;
  w[0] = std::max(min0, std::min(w[0], avail - w[1] - w[2]));
  for (int c = 1; c < 3; ++c) {
    const int over = w[0] + w[1] + w[2] - avail;
    if (over <= 0) break;
    // Now and Saved give way evenly: half the excess each (Saved the rest).
    const int cut = c == 1 ? (over + 1) / 2 : over;
    w[c] = std::max(std::min(fitted_[c], minFigure), w[c] - cut);
  }
  for (int c = 0; c < 3; ++c) setColumnWidth(c, w[c]);
}

void SummaryPanel::resizeEvent(QResizeEvent* e) {
  QTreeWidget::resizeEvent(e);
  fitToViewport();
}

void SummaryPanel::setIterations(const ps::core::IterationResult* r) {
  if (!r) {
    iterations_.reset();
    return;
  }
  iterations_ = IterationFigures{r->iterations,       r->boundary,      r->steadyStateMs,
                                 r->firstIterationMs, r->maxSteadySpan, r->complete};
}

void SummaryPanel::addIterationRows() {
  if (!iterations_) return;
  const IterationFigures& it = *iterations_;
  const QString boundary = QString::fromStdString(std::string(ps::core::iterationBoundaryName(it.boundary)));
  auto* group = new QTreeWidgetItem(this);
  group->setText(0, tr("Iterations"));
  group->setText(1, tr("%1 × %2").arg(it.iterations).arg(boundary));
  group->setToolTip(0, tr("The timeline shows %1 iterations back to back with a %2 boundary; the figures "
                          "above are those of one iteration.")
                           .arg(it.iterations)
                           .arg(boundary));
  QFont f = group->font(0);
  f.setBold(true);
  group->setFont(0, f);
  auto row = [&](const QString& name, const QString& value) {
    auto* r = new QTreeWidgetItem(group);
    r->setText(0, name);
    r->setText(1, value);
    r->setText(2, QStringLiteral("—"));
    for (int c = 1; c < 4; ++c) r->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
    r->setForeground(2, palette().color(QPalette::PlaceholderText));
  };
  const QString na = tr("n/a");
  auto ms = [&](double v) { return it.complete ? msPlain(v) : na; };
  row(tr("Boundary"), boundary);
  row(tr("Steady-state iteration"), ms(it.steadyStateMs));
  row(tr("First iteration"), ms(it.firstIterationMs));
  row(tr("Longest device span"), ms(it.maxSteadySpan));
  group->setExpanded(!collapsed_.contains(group->text(0)));
}

QString SummaryPanel::changeValue(const QString& metric) const {
  const auto items = findItems(metric, Qt::MatchExactly | Qt::MatchRecursive, 0);
  return items.isEmpty() ? QString() : items.front()->text(3);
}

QColor SummaryPanel::changeColor(const QString& metric) const {
  const auto items = findItems(metric, Qt::MatchExactly | Qt::MatchRecursive, 0);
  return items.isEmpty() ? QColor() : items.front()->foreground(3).color();
}

QStringList SummaryPanel::notes() const {
  QStringList out;
  for (int i = 0; i < topLevelItemCount(); ++i)
    if (topLevelItem(i)->isFirstColumnSpanned()) out << topLevelItem(i)->text(0);
  return out;
}

QString SummaryPanel::currentValue(const QString& metric) const {
  const auto items = findItems(metric, Qt::MatchExactly | Qt::MatchRecursive, 0);
  return items.isEmpty() ? QString() : items.front()->text(1);
}

}  // namespace ps::ui
