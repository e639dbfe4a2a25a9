#include "diagnostics_panel.h"

#include <QHeaderView>
#include <QStyle>

namespace ps::ui {

using namespace ps::core;

DiagnosticsPanel::DiagnosticsPanel(QWidget* parent) : QTreeWidget(parent) {
  setColumnCount(1);
  setHeaderHidden(true);
  setRootIsDecorated(false);
  setUniformRowHeights(true);
  setWordWrap(false);
  setTextElideMode(Qt::ElideRight);
  connect(this, &QTreeWidget::itemClicked, this, [this](QTreeWidgetItem* it) {
    const int d = it->data(0, Qt::UserRole).toInt();
    const int s = it->data(0, Qt::UserRole + 1).toInt();
    if (d >= 0 && s >= 0) Q_EMIT opActivated(OpRef{d, s});
  });
  connect(this, &QTreeWidget::itemActivated, this,
          [this](QTreeWidgetItem* it) { Q_EMIT itemClicked(it, 0); });
}

void DiagnosticsPanel::setDiagnostics(const Diagnostics& ds) {
  clear();
  errors_ = 0;
  const QIcon err = style()->standardIcon(QStyle::SP_MessageBoxCritical);
  const QIcon warn = style()->standardIcon(QStyle::SP_MessageBoxWarning);
  const QIcon info = style()->standardIcon(QStyle::SP_MessageBoxInformation);
  if (ds.empty()) {
    auto* it = new QTreeWidgetItem(this);
    it->setText(0, tr("No problems: the schedule is valid"));
    it->setIcon(0, style()->standardIcon(QStyle::SP_DialogApplyButton));
    it->setData(0, Qt::UserRole, -1);
    it->setData(0, Qt::UserRole + 1, -1);
    it->setForeground(0, palette().color(QPalette::PlaceholderText));
    return;
  }
  constexpr int kMaxShown = 2000;  // a broken 100k-op schedule should not freeze the dock
  int shown = 0;
  for (const auto& d : ds) {
    if (d.severity == Severity::Error) ++errors_;
    if (shown++ >= kMaxShown) continue;
    auto* it = new QTreeWidgetItem(this);
    QString msg = QString::fromStdString(d.message);
    if (!d.hint.empty()) msg += QStringLiteral(" (") + QString::fromStdString(d.hint) + QLatin1Char(')');
    it->setText(0, msg);
    it->setToolTip(0, QStringLiteral("<p>%1</p><p style='color:gray'>%2</p>")
                          .arg(QString::fromStdString(formatDiagnostic(d)).toHtmlEscaped(),
                               QString::fromStdString(d.code)));
    it->setData(0, Qt::UserRole + 2, QString::fromStdString(d.code));
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

}  // namespace ps::ui
