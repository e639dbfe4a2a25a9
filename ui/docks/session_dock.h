#pragma once
// The Session dock: what a session file (docs/sessions.md) holds, in three tabs. Schedule
// versions (double-click opens one in the designer; select two and Compare simulates both),
// runs (double-click loads the run's timeline) and cost profiles. Store errors are shown in
// the dock's message line, never thrown; a file from a newer PipeStudio is shown read-only
// with the store's explanation.
#include <QAbstractItemView>
#include <QDockWidget>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/timeline.h"
#include "widgets/metatypes.h"

class QLabel;
class QPushButton;
class QStandardItemModel;
class QTabWidget;
class QTreeView;

namespace ps::sessions {
class SessionStore;
}

namespace ps::ui {

class SessionController;

// One schedule version simulated for Compare.
struct VersionComparison {
  qint64 versionId = 0;
  QString name;
  QString profileName;  // where its costs came from
  bool ok = false;
  QString error;  // why it could not be simulated
  double makespan = 0;
  double bubbleRatio = 0;
};

// One stored run, for Compare on the Runs tab.
struct RunComparison {
  qint64 runId = 0;
  QString label;
  QString status;
  QString source;  // measured, simulated, imported
  bool ok = false;
  QString error;  // why it could not be read
  double makespan = 0;
  double bubbleRatio = 0;
  qint64 ops = 0;
  bool complete = true;
  std::optional<qint64> scheduleId;
};

class SessionDock : public QDockWidget {
  Q_OBJECT
 public:
  // Columns of the three models.
  enum ScheduleColumn { ScheduleId, ScheduleName, ScheduleCreated, ScheduleParent, ScheduleColumns };
  enum RunColumn {
    RunId,
    RunLabel,
    RunSchedule,
    RunStatusColumn,
    RunDuration,
    RunMakespan,
    RunBubble,
    RunColumns
  };
  enum ProfileColumn { ProfileId, ProfileName, ProfileSourceColumn, ProfileCreated, ProfileColumns };

  // The dock shows `session` (the shell's); without one it keeps its own.
  explicit SessionDock(QWidget* parent = nullptr);
  explicit SessionDock(SessionController* session, QWidget* parent = nullptr);
  ~SessionDock() override;
  SessionController* session() const { return session_; }

  // Opens a session file; false (with the reason in errorText()) when it cannot be read.
  // readOnly: never write to it (e.g. the bundled example).
  bool openSession(const QString& path, bool readOnly = false);
  void closeSession();
  bool hasSession() const;
  bool isReadOnly() const;
  QString sessionPath() const;

  // Costs used by Compare for a version that has no profile recorded with its runs (the
  // designer passes its current cost model). When it does not fit the version's stage count,
  // the designer's default profile for that many stages is used.
  void setFallbackProfile(const ps::core::CostProfile& profile) { fallback_ = profile; }

  // Stores `pipeText` as a new version of `name`, derived from the version last opened from
  // the dock (if any), and selects it. False with errorText() set on failure or read-only.
  bool saveVersion(const QString& name, const QString& pipeText);
  std::optional<qint64> currentVersion() const { return current_; }

  // The profile recorded with the version's newest run that has one (its name in `name`).
  std::optional<ps::core::CostProfile> profileForVersion(qint64 id, QString* name = nullptr) const;

  // Simulates the given versions (Compare with the selection calls this).
  std::vector<VersionComparison> compareVersions(const std::vector<qint64>& ids) const;
  // Reads the given runs' figures (Compare on the Runs tab). For two runs of one schedule
  // version `perKind` gets, per op kind, the second run's total duration over the first's.
  std::vector<RunComparison> compareRuns(const std::vector<qint64>& ids,
                                         QStringList* perKind = nullptr) const;

  QStandardItemModel* schedulesModel() const { return schedules_.model; }
  QStandardItemModel* runsModel() const { return runs_.model; }
  QStandardItemModel* profilesModel() const { return profiles_.model; }
  QTreeView* schedulesView() const { return schedules_.view; }
  QTreeView* runsView() const { return runs_.view; }
  QTabWidget* tabs() const { return tabs_; }
  QString errorText() const;       // the message line when it shows an error, else empty
  QString messageText() const;     // the message line, whatever it shows
  QString compareText() const;     // the last comparison, as shown
  QString runCompareText() const;  // the last comparison of runs, as shown
  QPushButton* runCompareButton() const { return runCompareButton_; }
  const std::vector<VersionComparison>& lastComparison() const { return comparison_; }

 public Q_SLOTS:
  void refresh();
  void compareSelected();
  void compareSelectedRuns();
  void openScheduleVersion(qint64 id);
  void openRun(qint64 id);

 Q_SIGNALS:
  // A schedule version to show in the designer.
  void openScheduleRequested(const QString& pipeText, const QString& name, qint64 versionId);
  // A stored run's timeline; pipeText/name: its schedule version (empty when it has none).
  void openRunRequested(qint64 runId, const ps::core::Timeline& timeline, const QString& pipeText,
                        const QString& name);
  void sessionChanged();  // opened, closed or refreshed

 private:
  void showError(const QString& text);
  // True when `r` holds a value; else shows "<what>: <its errors>" and returns false.
  template <typename T>
  bool shown(const ps::core::Result<T>& r, const QString& what) {
    if (r) return true;
    showError(what + QStringLiteral(": ") +
              QString::fromStdString(ps::core::formatDiagnostics(r.errors())).trimmed());
    return false;
  }
  void showMessage(const QString& text);
  void clearModels();
  // The controller opened another file or closed it: its lists, or none.
  void sessionReplaced();
  ps::sessions::SessionStore* store() const;

  SessionController* session_ = nullptr;
  std::optional<qint64> current_;
  std::optional<ps::core::CostProfile> fallback_;
  std::vector<VersionComparison> comparison_;

  QTabWidget* tabs_ = nullptr;
  // One tab's list: its rows and the view that shows them.
  struct Listing {
    QStandardItemModel* model = nullptr;
    QTreeView* view = nullptr;
  };
  static Listing makeListing(QObject* owner, const QStringList& headers,
                             QAbstractItemView::SelectionMode selection);
  Listing schedules_, runs_, profiles_;
  QLabel* message_ = nullptr;
  QLabel* compare_ = nullptr;
  QPushButton* compareButton_ = nullptr;
  QLabel* runCompare_ = nullptr;
  QPushButton* runCompareButton_ = nullptr;
  bool messageIsError_ = false;
};

}  // namespace ps::ui
