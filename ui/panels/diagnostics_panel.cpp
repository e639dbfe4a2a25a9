#include "panels/diagnostics_panel.h"

#include <QHeaderView>
#include <QResizeEvent>
#include <QStyle>
#include <algorithm>

#include "widgets/text_wrap.h"

namespace ps::ui {

using namespace ps::core;

DiagnosticsPanel::DiagnosticsPanel(QWidget* parent) : QTreeWidget(parent) {
  setColumnCount(1);
  setHeaderHidden(true);
  setRootIsDecorated(false);
  // Findings are never cut ("waits for B1@..."): each wraps at the dock's width onto as many
  // lines as it needs (rewrapped when the dock is resized); the tooltip has the whole finding.
  setUniformRowHeights(false);
  setWordWrap(false);
  setTextElideMode(Qt::ElideNone);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  header()->setSectionResizeMode(QHeaderView::Stretch);
  header()->setStretchLastSection(true);
  connect(this, &QTreeWidget::itemClicked, this, [this](QTreeWidgetItem* it) {
    const int d = it->data(0, Qt::UserRole).toInt();
    const int s = it->data(0, Qt::UserRole + 1).toInt();
    if (d >= 0 && s >= 0) Q_EMIT opActivated(OpRef{d, s});
  });
  connect(this, &QTreeWidget::itemActivated, this,
          [this](QTreeWidgetItem* it) { Q_EMIT itemClicked(it, 0); });
}

int DiagnosticsPanel::textWidth() const {
  // The column less the icon and the item's margins.
  return std::max(80, viewport()->width() - iconSize().width() -
                          4 * style()->pixelMetric(QStyle::PM_FocusFrameHMargin) - 16);
}

void DiagnosticsPanel::rewrap() {
  const int w = textWidth();
  if (w == wrappedAt_) return;
  wrappedAt_ = w;
  for (int i = 0; i < topLevelItemCount(); ++i) {
    QTreeWidgetItem* it = topLevelItem(i);
    const QString full = it->data(0, kFullTextRole).toString();
    it->setText(0, wrapToWidth(full.isEmpty() ? it->text(0) : full, QFontMetrics(it->font(0)), w));
  }
}

void DiagnosticsPanel::resizeEvent(QResizeEvent* e) {
  QTreeWidget::resizeEvent(e);
  rewrap();
}

QString DiagnosticsPanel::fullText(int row) const {
  const QTreeWidgetItem* it = topLevelItem(row);
  if (!it) return {};
  const QString full = it->data(0, kFullTextRole).toString();
  return full.isEmpty() ? it->text(0) : full;
}

void DiagnosticsPanel::setDiagnostics(const Diagnostics& ds) {
  doc_ = ds;
  rebuild();
}

void DiagnosticsPanel::setRunDiagnostics(const Diagnostics& ds, const QString& title) {
  run_ = ds;
  runTitle_ = title;
  rebuild();
}

void DiagnosticsPanel::setPlayhead(std::optional<double> time, SpanOf spanOf) {
  playhead_ = time;
  spanOf_ = std::move(spanOf);
  applyPlayhead();
}

DiagnosticsPanel::PlayheadMark DiagnosticsPanel::markOf(int row) const {
  const QTreeWidgetItem* it = topLevelItem(row);
  return it ? static_cast<PlayheadMark>(it->data(0, kPlayheadRole).toInt()) : PlayheadMark::None;
}

void DiagnosticsPanel::rebuild() {
  clear();
  errors_ = 0;
  shownMessages_.clear();
  if (!run_.empty() || !runTitle_.isEmpty()) {
    auto* head = new QTreeWidgetItem(this);
    head->setText(0, runTitle_);
    head->setData(0, kFullTextRole, runTitle_);
    QFont f = font();
    f.setBold(true);
    head->setFont(0, f);
    head->setData(0, Qt::UserRole, -1);
    head->setData(0, Qt::UserRole + 1, -1);
    head->setData(0, kRunRole, true);
    addItems(run_, true);
  }
  if (doc_.empty()) {
    auto* it = new QTreeWidgetItem(this);
    it->setText(0, tr("No problems: the schedule is valid"));
    it->setData(0, kFullTextRole, it->text(0));
    it->setIcon(0, style()->standardIcon(QStyle::SP_DialogApplyButton));
    it->setData(0, Qt::UserRole, -1);
    it->setData(0, Qt::UserRole + 1, -1);
    it->setForeground(0, palette().color(QPalette::PlaceholderText));
  } else {
    addItems(doc_, false);
  }
  applyPlayhead();
  wrappedAt_ = -1;
  rewrap();
}

void DiagnosticsPanel::addItems(const Diagnostics& ds, bool run) {
  const QIcon err = style()->standardIcon(QStyle::SP_MessageBoxCritical);
  const QIcon warn = style()->standardIcon(QStyle::SP_MessageBoxWarning);
  const QIcon info = style()->standardIcon(QStyle::SP_MessageBoxInformation);
  constexpr int kMaxShown = 2000;  // a broken 100k-op schedule should not freeze the dock
  int shown = 0;
  for (const auto& d : ds) {
    if (d.severity == Severity::Error && !run) ++errors_;
    QString msg = QString::fromStdString(d.message);
    if (!d.hint.empty()) msg += QStringLiteral(" (") + QString::fromStdString(d.hint) + QLatin1Char(')');
    // A failed run's deadlock is often the plan's own (and a run may report it twice): list
    // each finding once, under the run's heading when it is the run's.
    if (shownMessages_.contains(msg)) continue;
    shownMessages_.insert(msg);
    if (shown++ >= kMaxShown) continue;
    auto* it = new QTreeWidgetItem(this);
    it->setText(0, msg);
    it->setData(0, kFullTextRole, msg);
    it->setToolTip(0, QStringLiteral("<p>%1</p><p style='color:gray'>%2</p>")
                          .arg(QString::fromStdString(formatDiagnostic(d)).toHtmlEscaped(),
                               QString::fromStdString(d.code)));
    it->setData(0, Qt::UserRole + 2, QString::fromStdString(d.code));
    it->setData(0, kRunRole, run);
    it->setIcon(0, d.severity == Severity::Error ? err : d.severity == Severity::Warning ? warn : info);
    const OpRef r = d.related.empty() ? OpRef{} : d.related.front();
    it->setData(0, Qt::UserRole, r.device);
    it->setData(0, Qt::UserRole + 1, r.step);
  }
  if (shown > kMaxShown) {
    auto* it = new QTreeWidgetItem(this);
    it->setText(0, tr("… and %1 more").arg(shown - kMaxShown));
    it->setData(0, Qt::UserRole, -1);
    it->setData(0, Qt::UserRole + 1, -1);
  }
}

void DiagnosticsPanel::applyPlayhead() {
  const QColor normal = palette().color(QPalette::Text);
  const QColor later = palette().color(QPalette::PlaceholderText);
  for (int i = 0; i < topLevelItemCount(); ++i) {
    QTreeWidgetItem* it = topLevelItem(i);
    const int d = it->data(0, Qt::UserRole).toInt();
    const int s = it->data(0, Qt::UserRole + 1).toInt();
    PlayheadMark mark = PlayheadMark::None;
    if (playhead_ && spanOf_ && d >= 0 && s >= 0) {
      if (auto span = spanOf_(OpRef{d, s})) {
        // A little slack: a playhead placed on an op's start or end event is "at" it.
        constexpr double kEps = 1e-9;
        if (span->first > *playhead_ + kEps)
          mark = PlayheadMark::Later;
        else if (span->second >= *playhead_ - kEps)
          mark = PlayheadMark::Current;
      }
    }
    it->setData(0, kPlayheadRole, static_cast<int>(mark));
    if (it->data(0, kRunRole).toBool() && d < 0) continue;  // the run's heading keeps its look
    QFont f = font();
    f.setBold(mark == PlayheadMark::Current);
    if (it->font(0).bold() != f.bold()) {
      it->setFont(0, f);
      it->setText(0, wrapToWidth(fullText(i), QFontMetrics(f), textWidth()));  // bold is wider
    }
    if (d >= 0) it->setForeground(0, mark == PlayheadMark::Later ? later : normal);
  }
}

}  // namespace ps::ui
