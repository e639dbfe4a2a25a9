#include "docks/session_dock.h"

#include <QDateTime>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

#include "docks/session_controller.h"
#include "document/schedule_document.h"
#include "pipestudio/core/analysis/comparison.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/sessions/session_store.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;
using ps::sessions::Id;
using ps::sessions::SessionStore;

namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

QString errorsText(const Diagnostics& ds) {
  return qs(formatDiagnostics(ds)).trimmed();
}

QString timeText(std::int64_t ms) {
  return QDateTime::fromMSecsSinceEpoch(ms).toString(QStringLiteral("yyyy-MM-dd hh:mm:ss"));
}

// A read-only cell; the row's id sits in Qt::UserRole of column 0 for the views' handlers.
QStandardItem* cell(const QString& text, const QVariant& sortKey = {}) {
  auto* it = new QStandardItem(text);
  it->setEditable(false);
  if (sortKey.isValid()) it->setData(sortKey, Qt::UserRole + 1);
  return it;
}

// A wall-clock duration in one style for the whole column: seconds with two decimals, or ms
// below a second ("0.00 s" beside "0.001 s" read as two precisions).
QString durationText(double ms) {
  return ms < 1000 ? msText(ms) : nbsp(ps::core::formatMsValue(std::round(ms / 10.0) / 100.0) + " s");
}

qint64 rowId(const QModelIndex& index) {
  return index.sibling(index.row(), 0).data(Qt::UserRole).toLongLong();
}

}  // namespace

// A list of rows with these column headers and the view that shows it.
SessionDock::Listing SessionDock::makeListing(QObject* owner, const QStringList& headers,
                                              QAbstractItemView::SelectionMode selection) {
  Listing l;
  l.model = new QStandardItemModel(0, static_cast<int>(headers.size()), owner);
  l.model->setHorizontalHeaderLabels(headers);
  l.view = new QTreeView;
  l.view->setModel(l.model);
  l.view->setRootIsDecorated(false);
  l.view->setUniformRowHeights(true);
  l.view->setAlternatingRowColors(true);
  l.view->setEditTriggers(QAbstractItemView::NoEditTriggers);
  l.view->setSelectionBehavior(QAbstractItemView::SelectRows);
  l.view->setSelectionMode(selection);
  l.view->header()->setStretchLastSection(true);
  return l;
}

SessionDock::SessionDock(QWidget* parent) : SessionDock(new SessionController, parent) {
  session_->setParent(this);
}

SessionDock::SessionDock(SessionController* session, QWidget* parent)
    : QDockWidget(tr("Session"), parent), session_(session) {
  setObjectName(QStringLiteral("dock.session"));
  qRegisterMetaType<ps::core::Timeline>();
  connect(session_, &SessionController::changed, this, &SessionDock::sessionReplaced);
  connect(session_, &SessionController::written, this, &SessionDock::refresh);

  schedules_ = makeListing(this, {tr("Version"), tr("Name"), tr("Created"), tr("Parent")},
                           QAbstractItemView::ExtendedSelection);
  runs_ = makeListing(this,
                      {tr("Run"), tr("Label"), tr("Schedule"), tr("Status"), tr("Duration"),
                       tr("Makespan (ms)"), tr("Bubble")},
                      QAbstractItemView::ExtendedSelection);
  profiles_ = makeListing(this, {tr("Profile"), tr("Name"), tr("Source"), tr("Created")},
                          QAbstractItemView::SingleSelection);

  connect(schedules_.view, &QTreeView::doubleClicked, this,
          [this](const QModelIndex& i) { openScheduleVersion(rowId(i)); });
  connect(runs_.view, &QTreeView::doubleClicked, this, [this](const QModelIndex& i) { openRun(rowId(i)); });

  // Schedules tab: the list, then Compare and its result.
  auto* schedulePage = new QWidget;
  auto* sl = new QVBoxLayout(schedulePage);
  sl->setContentsMargins(0, 0, 0, 0);
  sl->addWidget(schedules_.view, 1);
  auto* row = new QHBoxLayout;
  compareButton_ = new QPushButton(tr("&Compare"));
  compareButton_->setToolTip(tr("Simulate the two selected versions and compare makespan and bubble ratio"));
  compareButton_->setEnabled(false);
  row->addWidget(compareButton_);
  row->addStretch(1);
  sl->addLayout(row);
  compare_ = new QLabel;
  compare_->setWordWrap(true);
  compare_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  sl->addWidget(compare_);
  connect(compareButton_, &QPushButton::clicked, this, &SessionDock::compareSelected);
  connect(schedules_.view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    compareButton_->setEnabled(schedules_.view->selectionModel()->selectedRows().size() == 2);
  });

  // Runs tab: the list, then Compare (two runs side by side) and its result.
  auto* runPage = new QWidget;
  auto* rl = new QVBoxLayout(runPage);
  rl->setContentsMargins(0, 0, 0, 0);
  rl->addWidget(runs_.view, 1);
  auto* runRow = new QHBoxLayout;
  runCompareButton_ = new QPushButton(tr("Compare &Runs"));
  runCompareButton_->setToolTip(
      tr("Select two runs: their makespans, bubble ratios and op counts side by "
         "side, and per op kind for two runs of one schedule version"));
  runCompareButton_->setEnabled(false);
  runRow->addWidget(runCompareButton_);
  runRow->addStretch(1);
  rl->addLayout(runRow);
  runCompare_ = new QLabel;
  runCompare_->setWordWrap(true);
  runCompare_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  rl->addWidget(runCompare_);
  connect(runCompareButton_, &QPushButton::clicked, this, &SessionDock::compareSelectedRuns);
  connect(runs_.view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    runCompareButton_->setEnabled(runs_.view->selectionModel()->selectedRows().size() == 2);
  });

  tabs_ = new QTabWidget;
  tabs_->addTab(schedulePage, tr("Schedules"));
  tabs_->addTab(runPage, tr("Runs"));
  tabs_->addTab(profiles_.view, tr("Profiles"));

  auto* body = new QWidget;
  auto* bl = new QVBoxLayout(body);
  bl->setContentsMargins(4, 4, 4, 4);
  auto* top = new QHBoxLayout;
  message_ = new QLabel(tr("No session open (File ▸ Open Session…)"));
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* refreshButton = new QPushButton(tr("Re&fresh"));
  connect(refreshButton, &QPushButton::clicked, this, &SessionDock::refresh);
  top->addWidget(message_, 1);
  top->addWidget(refreshButton);
  bl->addLayout(top);
  bl->addWidget(tabs_, 1);
  setWidget(body);
  setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable |
              QDockWidget::DockWidgetFloatable);
  if (session_->hasSession()) refresh();
}

SessionDock::~SessionDock() = default;

SessionStore* SessionDock::store() const {
  return session_->store();
}

bool SessionDock::hasSession() const {
  return session_->hasSession();
}
bool SessionDock::isReadOnly() const {
  return session_->isReadOnly();
}
QString SessionDock::sessionPath() const {
  return session_->path();
}

void SessionDock::showError(const QString& text) {
  messageIsError_ = true;
  message_->setStyleSheet(QStringLiteral("color: #c62828;"));
  message_->setText(text);
}

void SessionDock::showMessage(const QString& text) {
  messageIsError_ = false;
  message_->setStyleSheet({});
  message_->setText(text);
}

QString SessionDock::errorText() const {
  return messageIsError_ ? message_->text() : QString();
}
QString SessionDock::messageText() const {
  return message_->text();
}
QString SessionDock::compareText() const {
  return compare_->text();
}

QString SessionDock::runCompareText() const {
  return runCompare_->text();
}

void SessionDock::clearModels() {
  schedules_.model->removeRows(0, schedules_.model->rowCount());
  runs_.model->removeRows(0, runs_.model->rowCount());
  profiles_.model->removeRows(0, profiles_.model->rowCount());
  compare_->clear();
  runCompare_->clear();
  comparison_.clear();
}

bool SessionDock::openSession(const QString& path, bool readOnly) {
  QString error;
  if (!session_->open(path, readOnly, &error)) {  // changed(): the lists are cleared
    showError(error);
    return false;
  }
  return hasSession();
}

void SessionDock::closeSession() {
  session_->close();
}

void SessionDock::sessionReplaced() {
  current_.reset();
  if (hasSession()) {
    refresh();
    return;
  }
  clearModels();
  showMessage(tr("No session open (File ▸ Open Session…)"));
  Q_EMIT sessionChanged();
}

void SessionDock::refresh() {
  SessionStore* store = session_->store();
  if (!store) return;
  clearModels();
  auto schedules = store->listSchedules();
  auto runs = store->listRuns();
  auto profiles = store->listProfiles();
  QStringList problems;
  std::map<Id, QString> scheduleNames;
  if (schedules) {
    for (const auto& s : *schedules) {
      const QString name = qs(s.name);
      scheduleNames[s.id] = QStringLiteral("%1 (v%2)").arg(name).arg(s.id);
      QList<QStandardItem*> r{cell(QString::number(s.id)), cell(name), cell(timeText(s.createdMs)),
                              cell(s.parentId ? QString::number(*s.parentId) : QString())};
      r[0]->setData(QVariant::fromValue<qint64>(s.id), Qt::UserRole);
      schedules_.model->appendRow(r);
    }
    // Versions in the order they were made (the store lists them by name), by number.
    schedules_.model->setSortRole(Qt::UserRole);
    schedules_.model->sort(0, Qt::AscendingOrder);
  } else {
    problems << errorsText(schedules.errors());
  }
  if (runs) {
    for (const auto& run : *runs) {
      QString status = qs(std::string(ps::core::runStateName(run.status)));
      if (run.interrupted) status += tr(" (interrupted)");
      const auto duration = run.durationMs();
      const auto sched = run.scheduleId ? scheduleNames.find(*run.scheduleId) : scheduleNames.end();
      QList<QStandardItem*> r{
          cell(QString::number(run.id)),
          cell(qs(run.label)),
          cell(sched != scheduleNames.end() ? sched->second : QString()),
          cell(status),
          cell(duration ? durationText(static_cast<double>(*duration)) : QString()),
          cell(run.opCount > 0 ? msValue(run.makespan) : QString()),
          cell(run.opCount > 0 ? QStringLiteral("%1 %").arg(run.bubbleRatio * 100, 0, 'f', 1) : QString())};
      r[0]->setData(QVariant::fromValue<qint64>(run.id), Qt::UserRole);
      if (!run.error.empty()) {
        for (auto* c : r) c->setToolTip(qs(run.error));
      }
      runs_.model->appendRow(r);
    }
  } else {
    problems << errorsText(runs.errors());
  }
  if (profiles) {
    for (const auto& p : *profiles) {
      QList<QStandardItem*> r{cell(QString::number(p.id)), cell(qs(p.name)),
                              cell(qs(std::string(sessions::profileSourceName(p.source)))),
                              cell(timeText(p.createdMs))};
      r[0]->setData(QVariant::fromValue<qint64>(p.id), Qt::UserRole);
      profiles_.model->appendRow(r);
    }
  } else {
    problems << errorsText(profiles.errors());
  }
  for (int c = 0; c < schedules_.model->columnCount(); ++c) schedules_.view->resizeColumnToContents(c);
  for (int c = 0; c < runs_.model->columnCount(); ++c) runs_.view->resizeColumnToContents(c);

  if (!problems.isEmpty()) {
    showError(tr("Cannot read session %1: %2")
                  .arg(QFileInfo(session_->path()).fileName(), problems.join(QLatin1Char('\n'))));
  } else {
    QString text = tr("%1 · %n version(s)", nullptr, schedules_.model->rowCount())
                       .arg(QFileInfo(session_->path()).fileName());
    text += tr(" · %n run(s)", nullptr, runs_.model->rowCount());
    if (store->readOnly()) {
      text += tr(" · read-only");
      for (const auto& n : store->notes()) text += QStringLiteral("\n") + qs(n.message);
    }
    showMessage(text);
  }
  Q_EMIT sessionChanged();
}

void SessionDock::openScheduleVersion(qint64 id) {
  if (!store()) return;
  auto v = store()->schedule(id);
  if (!shown(v, tr("Cannot open version %1").arg(id))) return;
  current_ = id;
  Q_EMIT openScheduleRequested(qs(v->pipeText), qs(v->info.name), id);
}

void SessionDock::openRun(qint64 id) {
  if (!store()) return;
  auto run = store()->run(id);
  if (!shown(run, tr("Cannot open run %1").arg(id))) return;
  auto timeline = store()->loadTimeline(id);
  if (!shown(timeline, tr("Cannot load run %1").arg(id))) return;
  QString text, name;
  if (run->summary.scheduleId) {
    auto v = store()->schedule(*run->summary.scheduleId);
    if (v) {
      text = qs(v->pipeText);
      name = qs(v->info.name);
      current_ = v->info.id;
    }
  }
  Q_EMIT openRunRequested(id, *timeline, text, name);
}

bool SessionDock::saveVersion(const QString& name, const QString& pipeText) {
  if (!store()) {
    showError(tr("No session open"));
    return false;
  }
  if (store()->readOnly()) {
    showError(
        tr("%1 is open read-only; the version was not stored").arg(QFileInfo(session_->path()).fileName()));
    return false;
  }
  auto id =
      store()->addSchedule(name.isEmpty() ? std::string("schedule") : name.toStdString(),
                           pipeText.toStdString(), current_ ? std::optional<Id>(*current_) : std::nullopt);
  if (!shown(id, tr("Cannot store the version"))) return false;
  current_ = *id;
  refresh();
  for (int r = 0; r < schedules_.model->rowCount(); ++r) {
    if (schedules_.model->item(r, 0)->data(Qt::UserRole).toLongLong() == *id) {
      schedules_.view->setCurrentIndex(schedules_.model->index(r, 0));
      break;
    }
  }
  return true;
}

std::optional<CostProfile> SessionDock::profileForVersion(qint64 id, QString* name) const {
  if (!store()) return std::nullopt;
  sessions::RunFilter f;
  f.scheduleId = id;
  auto runs = store()->listRuns(f);
  if (!runs) return std::nullopt;
  for (const auto& r : *runs) {  // newest first
    if (!r.profileId) continue;
    auto pv = store()->profile(*r.profileId);
    if (!pv) continue;
    auto p = parseCostProfile(pv->json, pv->info.name);
    if (!p) continue;
    if (name) *name = qs(pv->info.name);
    return std::move(p).value();
  }
  return std::nullopt;
}

std::vector<VersionComparison> SessionDock::compareVersions(const std::vector<qint64>& ids) const {
  std::vector<VersionComparison> out;
  if (!store()) return out;
  for (qint64 id : ids) {
    VersionComparison c;
    c.versionId = id;
    auto v = store()->schedule(id);
    if (!v) {
      c.error = errorsText(v.errors());
      out.push_back(c);
      continue;
    }
    c.name = qs(v->info.name);
    DslOptions dopts;
    dopts.filename = v->info.name + " (v" + std::to_string(id) + ")";
    auto parsed = parseDsl(v->pipeText, dopts);
    if (!parsed) {
      c.error = errorsText(parsed.errors());
      out.push_back(c);
      continue;
    }
    const Schedule& s = *parsed;
    // Costs: the profile recorded with this version's newest run that has one, else the
    // designer's current model, else the default model for this stage count.
    QString profileName;
    std::optional<CostProfile> profile = profileForVersion(id, &profileName);
    if (profile) c.profileName = profileName;
    Result<SimulationModel> model = Diagnostics{};
    if (profile) model = makeSimulationModel(s, *profile);
    if (!profile && fallback_) {
      model = makeSimulationModel(s, *fallback_);
      if (model) c.profileName = tr("current cost model");
    }
    if (!model) {
      model = makeSimulationModel(s, defaultCostProfile(s));
      if (model) c.profileName = tr("default cost model");
    }
    if (!model) {
      c.error = errorsText(model.errors());
      out.push_back(c);
      continue;
    }
    SimulationOptions so;
    so.recordMemory = false;
    so.recordTransfers = false;
    auto t = simulate(s, *model, so);
    if (!t) {
      c.error = errorsText(t.errors());
    } else {
      c.ok = true;
      c.makespan = t->metrics.makespan;
      c.bubbleRatio = t->metrics.bubbleRatio;
      if (!t->complete) {
        c.ok = false;
        c.error = tr("the simulation stalls: %1").arg(errorsText(t->diagnostics));
      }
    }
    out.push_back(c);
  }
  return out;
}

void SessionDock::compareSelected() {
  std::vector<qint64> ids;
  for (const QModelIndex& i : schedules_.view->selectionModel()->selectedRows()) ids.push_back(rowId(i));
  std::sort(ids.begin(), ids.end());
  if (ids.size() != 2) {
    compare_->setText(tr("Select two versions to compare."));
    return;
  }
  comparison_ = compareVersions(ids);
  QStringList lines;
  for (const auto& c : comparison_) {
    if (c.ok)
      lines << tr("v%1 %2: makespan %3, bubble %4 % (%5)")
                   .arg(c.versionId)
                   .arg(c.name, msText(c.makespan))
                   .arg(c.bubbleRatio * 100, 0, 'f', 1)
                   .arg(c.profileName);
    else
      lines << tr("v%1 %2: cannot simulate: %3").arg(c.versionId).arg(c.name, c.error);
  }
  if (comparison_.size() == 2 && comparison_[0].ok && comparison_[1].ok && comparison_[0].makespan > 0) {
    const double d = comparison_[1].makespan - comparison_[0].makespan;
    lines << tr("v%1 − v%2: %3 (%4 %)")
                 .arg(comparison_[1].versionId)
                 .arg(comparison_[0].versionId)
                 .arg(msText(d))
                 .arg(d / comparison_[0].makespan * 100, 0, 'f', 1);
  }
  compare_->setText(lines.join(QLatin1Char('\n')));
}

std::vector<RunComparison> SessionDock::compareRuns(const std::vector<qint64>& ids,
                                                    QStringList* perKind) const {
  std::vector<RunComparison> out;
  if (!store()) return out;
  std::vector<Timeline> timelines;
  for (qint64 id : ids) {
    RunComparison c;
    c.runId = id;
    auto run = store()->run(id);
    if (!run) {
      c.error = errorsText(run.errors());
      out.push_back(c);
      timelines.emplace_back();
      continue;
    }
    const auto& r = run->summary;
    c.label = qs(r.label);
    c.status = qs(std::string(ps::core::runStateName(r.status)));
    c.source = qs(std::string(timelineSourceName(run->source)));
    c.scheduleId = r.scheduleId ? std::optional<qint64>(*r.scheduleId) : std::nullopt;
    auto t = store()->loadTimeline(id);
    if (!t) {
      c.error = errorsText(t.errors());
      out.push_back(c);
      timelines.emplace_back();
      continue;
    }
    c.ok = !t->ops.empty();
    if (!c.ok) c.error = tr("no ops recorded");
    c.makespan = t->metrics.makespan;
    c.bubbleRatio = t->metrics.bubbleRatio;
    c.ops = static_cast<qint64>(t->ops.size());
    c.complete = t->complete;
    out.push_back(c);
    timelines.push_back(std::move(t).value());
  }
  // Two runs of one schedule version: op by op, the second against the first, per kind.
  if (perKind && out.size() == 2 && out[0].ok && out[1].ok && out[0].scheduleId &&
      out[0].scheduleId == out[1].scheduleId) {
    auto v = store()->schedule(*out[0].scheduleId);
    auto plan = v ? parseDsl(v->pipeText) : Result<Schedule>(Diagnostics{});
    if (plan) {
      const Comparison cmp = compareTimelines(*plan, timelines[0], timelines[1], ComparisonOptions{});
      for (const ErrorStats& e : cmp.byKind)
        if (e.plannedMs > 0)
          *perKind << tr("%1 %2×").arg(QString::fromStdString(e.label)).arg(e.ratio, 0, 'f', 2);
    }
  }
  return out;
}

void SessionDock::compareSelectedRuns() {
  std::vector<qint64> ids;
  for (const QModelIndex& i : runs_.view->selectionModel()->selectedRows()) ids.push_back(rowId(i));
  std::sort(ids.begin(), ids.end());
  if (ids.size() != 2) {
    runCompare_->setText(tr("Select two runs to compare."));
    return;
  }
  QStringList perKind;
  const auto runs = compareRuns(ids, &perKind);
  QStringList lines;
  for (const auto& c : runs) {
    if (c.ok)
      lines << tr("run %1 %2 (%3, %4): makespan %5, bubble %6 %, %7 ops%8")
                   .arg(c.runId)
                   .arg(c.label, c.source, c.status, msText(c.makespan))
                   .arg(c.bubbleRatio * 100, 0, 'f', 1)
                   .arg(c.ops)
                   .arg(c.complete ? QString() : tr(", incomplete"));
    else
      lines << tr("run %1 %2: cannot compare: %3").arg(c.runId).arg(c.label, c.error);
  }
  if (runs.size() == 2 && runs[0].ok && runs[1].ok && runs[0].makespan > 0) {
    const double d = runs[1].makespan - runs[0].makespan;
    QString diff = tr("run %1 − run %2: makespan %3 (%4 %), bubble %5 points")
                       .arg(runs[1].runId)
                       .arg(runs[0].runId)
                       .arg(msText(d))
                       .arg(d / runs[0].makespan * 100, 0, 'f', 1)
                       .arg((runs[1].bubbleRatio - runs[0].bubbleRatio) * 100, 0, 'f', 1);
    if (!runs[0].complete || !runs[1].complete)
      diff += tr(" (an incomplete run's makespan is not its whole)");
    lines << diff;
    if (!perKind.isEmpty())
      lines << tr("op time, run %1 over run %2: %3")
                   .arg(runs[1].runId)
                   .arg(runs[0].runId)
                   .arg(perKind.join(QStringLiteral(", ")));
  }
  runCompare_->setText(lines.join(QLatin1Char('\n')));
}

}  // namespace ps::ui
