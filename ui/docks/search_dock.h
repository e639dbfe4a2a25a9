#pragma once
// The Search dock (docs/gui.md, "Search dock"): runs core's searchSchedule on a worker thread
// for the document's cost profile or a profile file, shows progress, a live chart of the best
// makespan over elapsed time and a table of the best distinct candidates, and opens a chosen
// candidate as the design (one undo step). Errors are shown in the dock, never thrown.
#include <QDockWidget>
#include <QElapsedTimer>
#include <QPointF>
#include <QString>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/planning/search.h"

class QChartView;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QLineSeries;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QComboBox;
class QTableWidget;
class QThread;
class QTimer;
class QValueAxis;

namespace ps::ui {

class ScheduleDocument;

// "0.25 GiB" style input for the memory limit: empty = unset; false when it is not a
// non-negative number of GiB.
bool parseGibibytes(const QString& text, std::optional<std::int64_t>& out);

class SearchDock : public QDockWidget {
  Q_OBJECT
 public:
  enum Column {
    ColRank,
    ColMakespan,
    ColBubble,
    ColPeak,
    ColKind,
    ColLayout,
    ColPartition,
    ColMemory,
    ColName,
    Columns
  };

  explicit SearchDock(ScheduleDocument* doc, QWidget* parent = nullptr);
  // Cancels a running search and waits for its thread.
  ~SearchDock() override;

  // Profile source: the open document's (follows its edits) or a JSON file. A file that cannot
  // be read or parsed leaves the source unchanged and shows why; returns false.
  void useDocumentProfile();
  bool setProfileFile(const QString& path);
  bool usesDocumentProfile() const { return !fileProfile_.has_value(); }
  QString profileLabel() const;

  // Inputs, for tests and scripted screenshots.
  QSpinBox* devicesBox() const { return devices_; }
  QSpinBox* microbatchesBox() const { return microbatches_; }
  QLineEdit* memoryEdit() const { return memory_; }
  QDoubleSpinBox* timeLimitBox() const { return timeLimit_; }
  QSpinBox* seedBox() const { return seed_; }
  QSpinBox* maxChunksBox() const { return maxChunks_; }
  // Objective: item data "steady-state" (overlap boundary) or "makespan".
  QComboBox* objectiveBox() const { return objective_; }

  // Starts a search with the current inputs; false (reason in errorText()) when it cannot.
  bool start();
  // Asks the running search to stop; the best found so far is shown when it returns.
  void cancel();
  bool isRunning() const { return running_; }

  // Opens the candidate in table row `row` as the design; false (reason in errorText()).
  bool openAsDesign(int row);
  bool openSelectedAsDesign();

  QString errorText() const { return error_; }
  QString infoText() const { return info_; }  // the last message that is not an error
  QString statusText() const;
  QTableWidget* table() const { return table_; }
  QLineSeries* bestSeries() const { return series_; }
  QProgressBar* progressBar() const { return progress_; }
  QPushButton* startButton() const { return startButton_; }
  QPushButton* cancelButton() const { return cancelButton_; }
  QPushButton* openButton() const { return openButton_; }
  QChartView* chartView() const { return chartView_; }
  // The last finished search (null before one finished, or when it failed).
  const ps::core::SearchResult* result() const { return result_ ? &*result_ : nullptr; }
  // Shows a finished search's result, searched on `profile`, as if this dock had run it (a
  // result computed elsewhere, tests).
  void showResult(ps::core::SearchResult result, ps::core::CostProfile profile);
  // The schedule behind a table row (null when it cannot be rebuilt).
  std::shared_ptr<const ps::core::Schedule> candidateSchedule(int row) const;
  // The cost profile the last search used.
  const ps::core::CostProfile& searchedProfile() const { return searchedProfile_; }

 Q_SIGNALS:
  void searchStarted();
  void searchFinished(bool ok);
  void designOpened(const QString& description);

 private:
  struct Shared;  // between the GUI and the worker thread

  void chooseProfileFile();
  void documentChanged();
  // A new document: the last search's candidates were for the old one; they go.
  void documentLoaded();
  void clearResults();
  void refreshMemoryPlaceholder();
  // Invoked by name from the search's thread (queued): no functor for Qt to allocate there.
  Q_INVOKABLE void deliverProgress(quint64 generation);
  Q_INVOKABLE void finished(quint64 generation);
  void showError(const QString& text);
  void showInfo(const QString& text);
  void addBestPoint(double seconds, double makespan);
  void fillTable();
  void updateButtons();
  void updateProgressBar();
  void joinWorker();

  ScheduleDocument* doc_;
  std::optional<ps::core::CostProfile> fileProfile_;
  QString fileProfilePath_;
  ps::core::CostProfile searchedProfile_;

  QLabel* profileName_ = nullptr;
  QPushButton* useDocButton_ = nullptr;
  QPushButton* fileButton_ = nullptr;
  QSpinBox* devices_ = nullptr;
  QSpinBox* microbatches_ = nullptr;
  QLineEdit* memory_ = nullptr;
  QDoubleSpinBox* timeLimit_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QSpinBox* maxChunks_ = nullptr;
  QComboBox* objective_ = nullptr;
  QPushButton* startButton_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  QPushButton* openButton_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* message_ = nullptr;
  QChartView* chartView_ = nullptr;
  QLineSeries* series_ = nullptr;
  QValueAxis* axisX_ = nullptr;
  QValueAxis* axisY_ = nullptr;
  QTableWidget* table_ = nullptr;

  QThread* worker_ = nullptr;
  QTimer* tick_ = nullptr;
  QElapsedTimer clock_;
  std::size_t evaluated_ = 0;
  QString phase_;
  std::shared_ptr<Shared> shared_;
  quint64 generation_ = 0;
  bool running_ = false;
  double timeLimitSeconds_ = 0;
  int docDevices_ = -1, docMicrobatches_ = -1;
  double lastBest_ = 0;
  double yMin_ = 0, yMax_ = 0, xMax_ = 0;
  std::optional<ps::core::SearchResult> result_;
  std::vector<std::shared_ptr<const ps::core::Schedule>> rowSchedules_;
  QString error_;
  QString info_;
  // The undo index right after "Open as Design" (-1: none): the hint "Undo restores…" holds
  // only while the stack is there.
  int openedAt_ = -1;
};

}  // namespace ps::ui
