#pragma once
// The document behind the designer: a Schedule, its cost profile and the last analysis
// (validation + simulation), with a QUndoStack on which every edit is one command.
#include <QObject>
#include <QString>
#include <QUndoStack>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "document/metrics_text.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::ui {

// Everything derived from one schedule: what the views draw. Immutable once made.
struct Analysis {
  ps::core::Schedule schedule;
  ps::core::ValidationReport validation;
  ps::core::Timeline timeline;              // simulated with the cost model (ms)
  std::optional<ps::core::Timeline> slots;  // unit slots (one step = 1), when asked for
  ps::core::Diagnostics diagnostics;        // validation + simulation + model problems
  // K > 1 iterations asked for (docs/gui.md, "Iterations"): the core's run of K iterations
  // back to back with the boundary, timeline and unrolled schedule included. Unset for K = 1
  // or when the K iterations could not be simulated (then a warning says why).
  std::optional<ps::core::IterationResult> iterations;
  bool valid() const { return !ps::core::hasErrors(diagnostics); }
  double makespan() const { return timeline.metrics.makespan; }
};

// A default cost profile for `stages` stages when a schedule names none: one layer per
// stage, F 1 ms, I 1 ms, W 0.8 ms, 512 MiB activations, 256 MiB weights, 16 GiB devices.
ps::core::CostProfile defaultCostProfile(int stages);
// The default as a model split over the stages: a uniform model as large as `devices` of the
// stages above (per micro-batch F devices x 1 ms, ...), each of the `stages` stages taking an
// equal share. Chunking (interleaved, V-shape) then cuts the same model finer instead of making
// it bigger, so previews of 1F1B and interleaved 1F1B on the same devices are comparable.
ps::core::CostProfile defaultCostProfile(int stages, int devices);
// The default for a schedule: defaultCostProfile(stages, devices) of its pipeline.
ps::core::CostProfile defaultCostProfile(const ps::core::Schedule& s);

// Where bundled resources live (examples, schedules, profiles): $PIPESTUDIO_RESOURCES, else
// ../share/pipestudio from the executable's directory (installed, and the build tree's mirror).
QString resourcesDir();

struct LoadedFile {
  ps::core::Schedule schedule;
  ps::core::CostProfile profile;
  ps::core::Diagnostics notes;  // e.g. a named profile that could not be read
  QString text;                 // the file as read (a .pipe program is kept as written)
};
// A file the user names, read whole through core's reader: a folder, a device or a file past the
// input limit (PIPESTUDIO_MAX_INPUT_BYTES, docs/limits.md) is refused with the reason before a byte
// is read, as the command line refuses it.
ps::core::Result<std::string> readTextFile(const QString& path);
// Whether .pipe text uses the programmable form (loops, templates, `device *` blocks: they
// have braces, which the explicit form never has), comments aside.
bool isPipeProgram(const QString& text);
// Reads a .pipe (DSL) or .csv (PyTorch) file; a profile named in the header is looked up
// next to the file and in resources/profiles.
ps::core::Result<LoadedFile> readScheduleFile(const QString& path);
// Writes by extension: .csv -> PyTorch CSV (the form that keeps every action, csvFormatFor),
// anything else -> DSL, its profile named relative to the file where it can be.
ps::core::Status writeScheduleFile(const QString& path, const ps::core::Schedule& s);
// The CSV form that keeps every action of `s`: compute_comms when it holds SEND/RECV or
// UNSHARD/RESHARD, else compute_only.
ps::core::CsvFormat csvFormatFor(const ps::core::Schedule& s);

class ScheduleDocument : public QObject {
  Q_OBJECT
 public:
  explicit ScheduleDocument(QObject* parent = nullptr);
  ~ScheduleDocument() override;

  // Replaces everything (open, new): clears undo history and sets the "last saved" baseline.
  // `source`: the text the schedule was read from (kept to write a .pipe program back as it
  // was while the schedule is unedited).
  void load(ps::core::Schedule s, ps::core::CostProfile profile, const QString& path = {},
            const QString& source = {});
  QString sourceText() const { return source_; }
  // Opened from a .pipe program (not the explicit form).
  bool isProgram() const { return isPipeProgram(source_); }
  // The schedule differs from the one opened (an edit not undone).
  bool editedSinceLoad() const { return !loaded_ || !(loaded_->schedule == schedule()); }

  const ps::core::Schedule& schedule() const { return analysis_->schedule; }
  const ps::core::CostProfile& profile() const { return profile_; }
  const Analysis& analysis() const { return *analysis_; }
  std::shared_ptr<const Analysis> analysisPtr() const { return analysis_; }
  const ps::core::TimelineMetrics& savedMetrics() const { return saved_; }
  // Whether the saved baseline's simulation finished (and how far it got when not).
  const SimulationProgress& savedProgress() const { return savedProgress_; }
  // Whether the saved baseline was simulated with the cost model the document has now (its
  // figures compare only then), and the name of the profile it was simulated with.
  bool savedWithCurrentModel() const;
  QString savedModelName() const { return savedModelName_; }
  QUndoStack* undoStack() { return &undo_; }
  QString filePath() const { return path_; }
  bool isModified() const { return !undo_.isClean(); }
  // The schedule is now on disk at `path`: it becomes the "last saved" baseline.
  void markSaved(const QString& path);
  QString lastEffect() const { return lastEffect_; }

  // Unit slot layout (PyTorch visualiser) alongside simulated time.
  void setSlotsWanted(bool on);
  bool slotsWanted() const { return slotsWanted_; }

  // How many iterations the designer shows (1..16) and their boundary; a view setting, not
  // part of the schedule or the undo history.
  void setIterations(int k, ps::core::IterationBoundary boundary);
  int iterations() const { return iterations_; }
  ps::core::IterationBoundary iterationBoundary() const { return boundary_; }

  // Validates and simulates a candidate schedule with the current cost model (used for the
  // live preview while dragging). Does not change the document.
  Analysis analyze(const ps::core::Schedule& s) const;

  // Edits: each pushes one undo command; false (and `error` set) when the edit does not apply.
  bool moveStep(int device, int from, int to, QString* error = nullptr);
  // One place earlier (delta < 0) or later among the device's compute ops, its own SEND/RECV
  // carried along (core's moveAmongCompute): what the arrow keys and Edit › Move Op do.
  bool moveOp(int device, int step, int delta, QString* error = nullptr);
  bool splitBackward(ps::core::OpRef at, QString* error = nullptr);
  bool mergeInputWeight(ps::core::OpRef at, QString* error = nullptr);
  bool toggleRecompute(int stage, QString* error = nullptr);
  bool addOffloadReload(ps::core::OpRef at, QString* error = nullptr);
  void setProfile(const ps::core::CostProfile& p, const QString& description);
  void replaceSchedule(const ps::core::Schedule& s, const QString& description);
  // Replaces schedule and cost profile together as one undo step (e.g. a search result with
  // its own partition, placement and profile); undo restores both exactly.
  void replaceDesign(const ps::core::Schedule& s, const ps::core::CostProfile& p, const QString& description);

  // The cost model's time for an op (what the simulator would charge), for ops a stalled
  // simulation never reached.
  double modelDuration(const ps::core::Op& op) const;

  // Where an op sits in the current schedule.
  std::optional<ps::core::OpRef> find(const ps::core::Op& op) const;
  // What an op waits for and what waits for it (ops present in the schedule).
  std::vector<ps::core::Op> dependencies(const ps::core::Op& op) const;
  std::vector<ps::core::Op> dependents(const ps::core::Op& op) const;

  // Called by the undo commands.
  void applyScheduleInternal(const ps::core::Schedule& s);
  void applyProfileInternal(ps::core::CostProfile p);
  void applyDesignInternal(const ps::core::Schedule& s, ps::core::CostProfile p);

 Q_SIGNALS:
  void changed();  // schedule, profile or analysis changed
  // Another document replaced this one (open, new): results about the old one no longer apply.
  // Emitted by load() after changed().
  void loaded();
  void effectChanged(const QString& effect);

 private:
  // One undo step from a core edit: its schedule, or its error into `error` (false).
  bool pushScheduleEdit(ps::core::Result<ps::core::Schedule> edited, QString* error,
                        const std::function<QString()>& text);
  void rebuildModel();
  void takeBaseline();  // the "Saved" figures: now
  void reanalyze(const ps::core::Schedule& s, bool reportEffect);
  void rebuildIndex();
  // The dependency graph of the current schedule, built on first use after each analysis
  // so selecting an op costs O(its edges), not a pass over the schedule per candidate.
  const ps::core::DependencyGraph& graph() const;

  ps::core::CostProfile profile_;
  ps::core::SimulationModel model_;
  ps::core::Diagnostics modelDiagnostics_;
  bool modelOk_ = false;
  std::shared_ptr<const Analysis> analysis_;
  ps::core::TimelineMetrics saved_;
  SimulationProgress savedProgress_;
  std::string savedProfileJson_;
  QString savedModelName_;
  QUndoStack undo_;
  QString path_;
  QString source_;
  std::shared_ptr<const Analysis> loaded_;  // as opened
  QString lastEffect_;
  bool slotsWanted_ = false;
  int iterations_ = 1;
  ps::core::IterationBoundary boundary_ = ps::core::IterationBoundary::Overlap;
  std::unordered_map<std::uint64_t, ps::core::OpRef> index_;
  mutable std::unique_ptr<ps::core::DependencyGraph> graph_;
  mutable std::shared_ptr<const Analysis> graphFor_;  // the analysis graph_ was built for
};

std::uint64_t opKey(const ps::core::Op& op);

}  // namespace ps::ui
