#include "debugger/deviation_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include "pipestudio/core/analysis/comparison.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;

DeviationPanel::DeviationPanel(QWidget* parent) : QWidget(parent) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(6, 6, 6, 6);
  headline_ =
      new QLabel(tr("No measured overlay. File › Open Measured Trace… or open a run from a session."));
  headline_->setWordWrap(true);
  headline_->setTextFormat(Qt::RichText);
  table_ = new QTableWidget(0, 6);
  table_->setHorizontalHeaderLabels(
      {tr("Group"), tr("Ops"), tr("Planned ms"), tr("Measured ms"), tr("Ratio"), tr("Mean |err|")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  lay->addWidget(headline_);
  lay->addWidget(table_, 1);
}

QString DeviationPanel::headline() const {
  return headline_->text();
}

void DeviationPanel::setComparison(const Comparison* c, const PlanContext& plan) {
  table_->setRowCount(0);
  if (!c) {
    headline_->setText(tr("No measured overlay. File › Open Measured Trace… or open a run from a session."));
    headline_->setToolTip(QString());
    return;
  }
  QString head;
  if (plan.progress.finished)
    head = tr("Makespan: planned %1, measured %2 (%3%4 %)")
               .arg(msPlain(c->plannedMakespan), msPlain(c->measuredMakespan))
               .arg(c->relativeError >= 0 ? QStringLiteral("+") : QString())
               .arg(c->relativeError * 100, 0, 'f', 1);
  else  // a stalled plan has no makespan to compare with: its partial one is no prediction
    head = tr("Makespan: planned %1, measured %2")
               .arg(notAvailableText(plan.progress), msPlain(c->measuredMakespan));
  head += tr(" · %1 matched").arg(c->matches.size());
  if (plan.notReached > 0)
    head += tr(" · %n measured op(s) the stalled plan never reached", nullptr, plan.notReached);
  const int notInPlan = plan.notReached > 0 || plan.notInPlan > 0
                            ? plan.notInPlan
                            : static_cast<int>(c->unmatchedMeasured.size());
  head += tr(" · %1 not in the plan · %2 planned ops not measured · alignment %3")
              .arg(notInPlan)
              .arg(c->unmatchedPlanned.size())
              .arg(QString::fromUtf8(alignmentName(c->alignment).data(),
                                     static_cast<int>(alignmentName(c->alignment).size())));
  if (plan.defaultModel)
    head +=
        tr("<br><b>The plan uses the uniform default cost model</b>, not this model's costs: "
           "Run › Profile Model… measures them.");
  else if (!plan.costModel.isEmpty())
    head += tr("<br>Planned with the cost profile %1.").arg(plan.costModel.toHtmlEscaped());
  headline_->setText(head);
  headline_->setToolTip(tr("Planned times come from the document's cost model (%1)")
                            .arg(plan.costModel.isEmpty() ? tr("unnamed") : plan.costModel));
  std::vector<const ErrorStats*> rows{&c->overall};
  for (const auto& e : c->byKind) rows.push_back(&e);
  for (const auto& e : c->byDevice) rows.push_back(&e);
  table_->setRowCount(static_cast<int>(rows.size()));
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const ErrorStats& e = *rows[static_cast<size_t>(r)];
    const QStringList cells{
        QString::fromStdString(e.label), QString::number(e.count), msValue(e.plannedMs),
        msValue(e.measuredMs),
        e.plannedMs > 0 ? QString::number(e.ratio, 'f', 2) + QStringLiteral("×") : QStringLiteral("–"),
        // Ops planned to take no time have no deviation to average.
        e.plannedMs > 0 ? QString::number(e.meanAbsError * 100, 'f', 1) + QStringLiteral(" %")
                        : QStringLiteral("–")};
    for (int col = 0; col < cells.size(); ++col) {
      auto* it = new QTableWidgetItem(cells[col]);
      if (col > 0) it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (r == 0) {
        QFont f = it->font();
        f.setBold(true);
        it->setFont(f);
      }
      table_->setItem(r, col, it);
    }
  }
}

}  // namespace ps::ui
