#include "summary_panel.h"

#include <QHeaderView>
#include <cmath>

namespace ps::ui {

namespace {

enum class Better { Lower, Higher };

// Fewer decimals for large values so the columns stay narrow.
QString fmt(double v, int decimals) {
  const double a = std::abs(v);
  if (a >= 1000)
    decimals = 0;
  else if (a >= 100)
    decimals = std::min(decimals, 1);
  return QString::number(v, 'f', decimals);
}

void addRow(QTreeWidgetItem* parent, QTreeWidget* tree, const QString& name, double cur, double saved,
            int decimals, const QString& unit, Better better) {
  auto* it = parent ? new QTreeWidgetItem(parent) : new QTreeWidgetItem(tree);
  it->setText(0, name);
  it->setText(1, fmt(cur, decimals) + unit);
  it->setText(2, fmt(saved, decimals) + unit);
  const double diff = cur - saved;
  const double eps = 0.5 * std::pow(10.0, -decimals);
  if (std::abs(diff) < eps) {
    it->setText(3, QStringLiteral("="));
    it->setForeground(3, tree->palette().color(QPalette::PlaceholderText));
  } else {
    it->setText(3, (diff > 0 ? QStringLiteral("+") : QString()) + fmt(diff, decimals) + unit);
    const bool good = better == Better::Lower ? diff < 0 : diff > 0;
    it->setForeground(3, good ? QColor(0x2e, 0x9d, 0x4e) : QColor(0xe5, 0x39, 0x35));
  }
  for (int c = 1; c < 4; ++c) it->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
}

}  // namespace

SummaryPanel::SummaryPanel(QWidget* parent) : QTreeWidget(parent) {
  setColumnCount(4);
  setHeaderLabels({tr("Metric"), tr("Now"), tr("Saved"), tr("Change")});
  setRootIsDecorated(true);
  setUniformRowHeights(true);
  setAlternatingRowColors(true);
  setSelectionMode(QAbstractItemView::NoSelection);
  setFocusPolicy(Qt::NoFocus);
  header()->setStretchLastSection(false);
  header()->setSectionResizeMode(0, QHeaderView::Stretch);
  for (int c = 1; c < 4; ++c) header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
  header()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
}

void SummaryPanel::setMetrics(const ps::core::TimelineMetrics& cur, const ps::core::TimelineMetrics& saved) {
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
  addRow(nullptr, this, tr("Makespan"), cur.makespan, saved.makespan, 2, tr(" ms"), Better::Lower);
  addRow(nullptr, this, tr("Bubble ratio"), cur.bubbleRatio * 100, saved.bubbleRatio * 100, 1,
         QStringLiteral(" %"), Better::Lower);
  addRow(nullptr, this, tr("Efficiency"), cur.efficiency * 100, saved.efficiency * 100, 1,
         QStringLiteral(" %"), Better::Higher);
  addRow(nullptr, this, tr("Lower bound"), cur.lowerBound, saved.lowerBound, 2, tr(" ms"), Better::Lower);
  constexpr double kGiB = double(1LL << 30);
  for (size_t d = 0; d < cur.devices.size(); ++d) {
    const auto& c = cur.devices[d];
    const ps::core::DeviceMetrics s = d < saved.devices.size() ? saved.devices[d] : ps::core::DeviceMetrics{};
    auto* group = new QTreeWidgetItem(this);
    group->setText(0, tr("Device %1").arg(d));
    group->setText(1, QString::number(static_cast<double>(c.peakMemoryBytes) / kGiB, 'f', 2) + tr(" GiB"));
    group->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
    QFont f = group->font(0);
    f.setBold(true);
    group->setFont(0, f);
    addRow(group, this, tr("Peak memory"), static_cast<double>(c.peakMemoryBytes) / kGiB,
           static_cast<double>(s.peakMemoryBytes) / kGiB, 2, tr(" GiB"), Better::Lower);
    addRow(group, this, tr("In flight"), c.peakInflightMicrobatches, s.peakInflightMicrobatches, 0, QString(),
           Better::Lower);
    addRow(group, this, tr("Busy"), c.busy, s.busy, 2, tr(" ms"), Better::Higher);
    group->setExpanded(cur.devices.size() <= 8 && !collapsed_.contains(group->text(0)));
  }
  setUpdatesEnabled(true);
}

QString SummaryPanel::currentValue(const QString& metric) const {
  const auto items = findItems(metric, Qt::MatchExactly | Qt::MatchRecursive, 0);
  return items.isEmpty() ? QString() : items.front()->text(1);
}

}  // namespace ps::ui
