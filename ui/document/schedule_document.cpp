#include "document/schedule_document.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QUndoCommand>
#include <algorithm>

#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/input_limits.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/io/schedule_file.h"
#include "pipestudio/core/planning/schedule_edits.h"

namespace ps::ui {

using namespace ps::core;

std::uint64_t opKey(const Op& op) {
  return (static_cast<std::uint64_t>(static_cast<std::uint16_t>(op.kind)) << 48) ^
         (static_cast<std::uint64_t>(static_cast<std::uint16_t>(op.stage)) << 32) ^
         static_cast<std::uint32_t>(op.microbatch);
}

CostProfile defaultCostProfile(int stages) {
  return defaultCostProfile(stages, stages);
}

CostProfile defaultCostProfile(const Schedule& s) {
  return defaultCostProfile(s.pipeline.blocks(), s.pipeline.devices);
}

CostProfile defaultCostProfile(int stages, int devices) {
  CostProfile p;
  p.name = "default";
  stages = std::max(1, stages);
  devices = std::max(1, devices);
  // Each stage holds devices/stages of one 1 ms block; a stage's output (what crosses a link)
  // does not shrink with it.
  const double share = static_cast<double>(devices) / stages;
  for (int s = 0; s < stages; ++s) {
    LayerCost l;
    l.name = stages == devices ? "stage" + std::to_string(s) : "layer" + std::to_string(s);
    l.forwardMs = 1.0 * share;
    l.backwardInputMs = 1.0 * share;
    l.backwardWeightMs = 0.8 * share;
    l.activationBytes = static_cast<std::int64_t>(static_cast<double>(512LL << 20) * share);
    l.weightBytes = static_cast<std::int64_t>(static_cast<double>(256LL << 20) * share);
    l.outputBytes = 8LL << 20;
    p.layers.push_back(l);
  }
  p.deviceMemoryBytes = 16LL << 30;
  p.link.latencyMs = 0.02;
  p.link.bandwidthBytesPerMs = 25e6;  // 25 GB/s
  p.hostBandwidthBytesPerMs = 12e6;   // 12 GB/s
  return p;
}

QString resourcesDir() {
  const QByteArray env = qgetenv("PIPESTUDIO_RESOURCES");
  if (!env.isEmpty() && QFileInfo(QString::fromLocal8Bit(env)).isDir()) return QString::fromLocal8Bit(env);
  // Relative to the executable only (/usr/bin -> /usr/share/pipestudio): the build tree mirrors
  // that layout, so no path of the build machine is compiled in (packaging/layout.cmake).
  return QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/" PIPESTUDIO_DATA_RELDIR));
}

Result<std::string> readTextFile(const QString& path) {
  return readUserFile(QFile::encodeName(path).toStdString(), path.toStdString());
}

bool isPipeProgram(const QString& text) {
  for (const QString& line : text.split(QLatin1Char('\n'))) {
    const int hash = line.indexOf(QLatin1Char('#'));
    if ((hash < 0 ? line : line.left(hash)).contains(QLatin1Char('{'))) return true;
  }
  return false;
}

Result<LoadedFile> readScheduleFile(const QString& path) {
  auto text = readTextFile(path);
  PS_TRY(text);
  LoadedFile out;
  out.text = QString::fromStdString(*text);
  ScheduleLoadOptions o;
  o.path = path.toStdString();
  auto s = loadSchedule(*text, o);
  PS_TRY(s);
  out.schedule = std::move(s).value();
  out.profile = defaultCostProfile(out.schedule);
  if (out.schedule.profile && !out.schedule.profile->empty()) {
    const QString name = QString::fromStdString(*out.schedule.profile);
    const QString c = QString::fromStdString(
        resolveProfileReference(*out.schedule.profile, path.toStdString(), resourcesDir().toStdString()));
    if (QFileInfo(c).isFile()) {
      auto json = readTextFile(c);
      if (!json) {
        out.notes.push_back(json.error());
      } else if (auto p = parseCostProfile(*json, c.toStdString())) {
        out.profile = std::move(p).value();
      } else {
        for (auto d : p.errors()) {
          d.severity = Severity::Warning;
          out.notes.push_back(d);
        }
      }
    } else {
      out.notes.push_back(makeWarning("profile.missing", "cost profile '" + name.toStdString() +
                                                             "' not found; using the default profile"));
    }
  }
  return out;
}

CsvFormat csvFormatFor(const Schedule& s) {
  for (const auto& dev : s.devices)
    for (const auto& st : dev) {
      const OpKind k = st.first.kind;
      if (k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB ||
          k == OpKind::Unshard || k == OpKind::Reshard)
        return CsvFormat::ComputeComms;
    }
  return CsvFormat::ComputeOnly;
}

Status writeScheduleFile(const QString& path, const Schedule& s) {
  const bool csv = path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive);
  std::string text;
  if (csv) {
    auto csv = writePytorchCsv(s, csvFormatFor(s));
    PS_TRY(csv);
    text = std::move(*csv);
  } else if (s.profile && QFileInfo(QString::fromStdString(*s.profile)).isAbsolute()) {
    // The .pipe names its profile relative to itself where it can.
    Schedule relative = s;
    relative.profile = profileReferenceFor(*s.profile, path.toStdString());
    text = printDsl(relative);
  } else {
    text = printDsl(s);
  }
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
    return makeError("io.write", "cannot write " + path.toStdString() + ": " + f.errorString().toStdString());
  if (f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()))
    return makeError("io.write", "cannot write " + path.toStdString() + ": " + f.errorString().toStdString());
  return okStatus();
}

// ---- undo commands -------------------------------------------------------------------------

namespace {

class MoveStepCommand : public QUndoCommand {
 public:
  MoveStepCommand(ScheduleDocument* doc, int device, int from, int to, const QString& text)
      : QUndoCommand(text), doc_(doc), device_(device), from_(from), to_(to) {}
  void redo() override { apply(from_, to_); }
  void undo() override { apply(to_, from_); }

 private:
  void apply(int a, int b) {
    auto s = ps::core::moveStep(doc_->schedule(), device_, a, b);
    if (s) doc_->applyScheduleInternal(*s);
  }
  ScheduleDocument* doc_;
  int device_, from_, to_;
};

// An undo step that sets a part of the document (its schedule, its profile, or both) to
// `after` and back to `before` through `apply`.
template <class State>
class SwapCommand : public QUndoCommand {
 public:
  using Apply = void (*)(ScheduleDocument*, const State&);
  SwapCommand(ScheduleDocument* doc, State before, State after, const QString& text, Apply apply)
      : QUndoCommand(text), doc_(doc), before_(std::move(before)), after_(std::move(after)), apply_(apply) {}
  void redo() override { apply_(doc_, after_); }
  void undo() override { apply_(doc_, before_); }

 private:
  ScheduleDocument* doc_;
  State before_, after_;
  Apply apply_;
};

using Design = std::pair<Schedule, CostProfile>;

QUndoCommand* replaceScheduleCommand(ScheduleDocument* doc, Schedule after, const QString& text) {
  return new SwapCommand<Schedule>(
      doc, doc->schedule(), std::move(after), text,
      [](ScheduleDocument* d, const Schedule& s) { d->applyScheduleInternal(s); });
}

bool fail(QString* error, const Diagnostics& ds) {
  if (error && !ds.empty()) *error = QString::fromStdString(ds.front().message);
  return false;
}

}  // namespace

// ---- document ------------------------------------------------------------------------------

ScheduleDocument::ScheduleDocument(QObject* parent) : QObject(parent) {
  auto a = std::make_shared<Analysis>();
  a->schedule.pipeline = Pipeline::make(1, 1, 1, PlacementKind::Linear).value();
  a->schedule.devices.resize(1);
  a->timeline.devices = 1;
  analysis_ = a;
  profile_ = defaultCostProfile(1);
}

ScheduleDocument::~ScheduleDocument() {
  // Commands refer to this document: drop them before it goes.
  undo_.clear();
}

void ScheduleDocument::load(Schedule s, CostProfile profile, const QString& path, const QString& source) {
  undo_.clear();
  profile_ = std::move(profile);
  path_ = path;
  source_ = source;
  auto a = std::make_shared<Analysis>();
  a->schedule = std::move(s);
  analysis_ = a;
  rebuildModel();
  reanalyze(analysis_->schedule, false);
  takeBaseline();
  loaded_ = analysis_;
  lastEffect_.clear();
  undo_.setClean();
  Q_EMIT changed();
  Q_EMIT loaded();
}

void ScheduleDocument::takeBaseline() {
  saved_ = analysis_->timeline.metrics;
  savedProgress_ = simulationProgress(*analysis_);
  savedProfileJson_ = costProfileToJson(profile_);
  savedModelName_ = QString::fromStdString(profile_.name);
}

bool ScheduleDocument::savedWithCurrentModel() const {
  return costProfileToJson(profile_) == savedProfileJson_;
}

void ScheduleDocument::markSaved(const QString& path) {
  path_ = path;
  takeBaseline();
  undo_.setClean();
  Q_EMIT changed();
}

void ScheduleDocument::setSlotsWanted(bool on) {
  if (slotsWanted_ == on) return;
  slotsWanted_ = on;
  reanalyze(analysis_->schedule, false);
  Q_EMIT changed();
}

void ScheduleDocument::setIterations(int k, IterationBoundary boundary) {
  k = std::clamp(k, 1, 16);
  if (k == iterations_ && boundary == boundary_) return;
  iterations_ = k;
  boundary_ = boundary;
  reanalyze(analysis_->schedule, false);
  Q_EMIT changed();
}

void ScheduleDocument::rebuildModel() {
  const Schedule& s = analysis_->schedule;
  modelDiagnostics_.clear();
  auto m = makeSimulationModel(s, profile_, s.partition);
  if (m) {
    model_ = std::move(m).value();
    modelOk_ = true;
    return;
  }
  // The profile does not fit this pipeline: keep going with the default one, say why.
  for (auto d : m.errors()) {
    d.severity = Severity::Warning;
    d.message += " (simulating with the default profile)";
    modelDiagnostics_.push_back(d);
  }
  auto fallback = makeSimulationModel(s, defaultCostProfile(s));
  modelOk_ = static_cast<bool>(fallback);
  if (fallback) model_ = std::move(fallback).value();
}

Analysis ScheduleDocument::analyze(const Schedule& s) const {
  Analysis a;
  a.schedule = s;
  a.validation = validateSchedule(s);
  a.diagnostics = a.validation.diagnostics;
  a.diagnostics.insert(a.diagnostics.end(), modelDiagnostics_.begin(), modelDiagnostics_.end());
  a.timeline.devices = s.pipeline.devices;
  if (modelOk_) {
    auto t = simulate(s, model_);
    if (t) {
      a.timeline = std::move(t).value();
      for (const auto& d : a.timeline.diagnostics) {
        // The validator already reports a deadlock with its cycle; keep other findings.
        const bool dup = std::any_of(a.diagnostics.begin(), a.diagnostics.end(), [&](const Diagnostic& e) {
          return e.code == d.code && e.message == d.message;
        });
        if (!dup) a.diagnostics.push_back(d);
      }
    } else {
      a.diagnostics.insert(a.diagnostics.end(), t.errors().begin(), t.errors().end());
      a.timeline.complete = false;  // no timeline: nothing finished
    }
    if (iterations_ > 1 && a.valid()) {
      // The core runs the K iterations; the views only draw its timeline.
      IterationOptions io;
      io.iterations = iterations_;
      io.boundary = boundary_;
      auto r = simulateIterations(s, model_, io);
      if (r) {
        a.iterations = std::move(r).value();
      } else {
        for (auto d : r.errors()) {
          d.severity = Severity::Warning;
          d.message = "cannot show " + std::to_string(iterations_) + " iterations: " + d.message;
          a.diagnostics.push_back(d);
        }
      }
    } else if (iterations_ > 1) {
      a.diagnostics.push_back(makeWarning(
          "iterations.not_shown",
          "showing one iteration, not " + std::to_string(iterations_) + ": the schedule has errors"));
    }
    if (slotsWanted_) {
      // PyTorch's visualiser layout: every action takes one slot, links are free.
      SimulationModel unit;
      unit.profile = model_.profile;
      unit.profile.link = LinkCost{};
      unit.profile.fixedCommMs = 0.0;
      unit.profile.overlapFactor = 0.5;
      unit.profile.hostBandwidthBytesPerMs = 1;
      unit.profile.deviceMemoryBytes = 0;
      unit.stages = model_.stages;
      for (auto& st : unit.stages) {
        st.F = st.B = st.I = st.W = st.R = 1;
        st.activationBytes = 1;
        st.inputBytes = 1;
        st.outputBytes = 0;
      }
      SimulationOptions o;
      o.recordMemory = false;
      o.recordTransfers = false;
      auto u = simulate(s, unit, o);
      if (u) a.slots = std::move(u).value();
    }
  } else {
    a.timeline.complete = s.opCount() == 0;  // no cost model, nothing simulated
  }
  return a;
}

void ScheduleDocument::reanalyze(const Schedule& s, bool reportEffect) {
  const QString before = makespanText(*analysis_);
  const bool wasValid = analysis_->valid();
  auto a = std::make_shared<Analysis>(analyze(s));
  if (reportEffect) {
    // A stalled side reads "not available (stalled at …)", never as a shorter makespan.
    QString e = QStringLiteral("makespan %1 → %2").arg(before, makespanText(*a));
    if (wasValid && !a->valid())
      e += QStringLiteral(" · now invalid");
    else if (!wasValid && a->valid())
      e += QStringLiteral(" · valid again");
    lastEffect_ = e;
  }
  analysis_ = std::move(a);
  rebuildIndex();
  if (reportEffect) Q_EMIT effectChanged(lastEffect_);
}

void ScheduleDocument::rebuildIndex() {
  index_.clear();
  const Schedule& s = analysis_->schedule;
  index_.reserve(s.opCount());
  for (int d = 0; d < static_cast<int>(s.devices.size()); ++d) {
    const auto& row = s.devices[static_cast<size_t>(d)];
    for (int i = 0; i < static_cast<int>(row.size()); ++i) {
      index_.emplace(opKey(row[static_cast<size_t>(i)].first), OpRef{d, i});
      if (row[static_cast<size_t>(i)].second)
        index_.emplace(opKey(*row[static_cast<size_t>(i)].second), OpRef{d, i});
    }
  }
}

void ScheduleDocument::applyScheduleInternal(const Schedule& s) {
  const bool pipelineChanged =
      !(s.pipeline == analysis_->schedule.pipeline) || s.partition != analysis_->schedule.partition;
  auto tmp = std::make_shared<Analysis>(*analysis_);
  tmp->schedule = s;
  if (pipelineChanged) {
    analysis_ = tmp;
    rebuildModel();
  }
  reanalyze(s, true);
  Q_EMIT changed();
}

void ScheduleDocument::applyProfileInternal(CostProfile p) {
  profile_ = std::move(p);
  rebuildModel();
  reanalyze(analysis_->schedule, true);
  Q_EMIT changed();
}

void ScheduleDocument::applyDesignInternal(const Schedule& s, CostProfile p) {
  profile_ = std::move(p);
  auto tmp = std::make_shared<Analysis>(*analysis_);
  tmp->schedule = s;
  analysis_ = tmp;
  rebuildModel();
  reanalyze(s, true);
  Q_EMIT changed();
}

bool ScheduleDocument::moveStep(int device, int from, int to, QString* error) {
  if (from == to) return fail(error, {makeError("edit.move", "the op is already there")});
  auto s = ps::core::moveStep(schedule(), device, from, to);
  if (!s) return fail(error, s.errors());
  const Op& op = schedule().devices[static_cast<size_t>(device)][static_cast<size_t>(from)].first;
  undo_.push(new MoveStepCommand(
      this, device, from, to,
      tr("Move %1 %2")
          .arg(QString::fromStdString(schedule().opName(op)), to < from ? tr("earlier") : tr("later"))));
  return true;
}

bool ScheduleDocument::moveOp(int device, int step, int delta, QString* error) {
  const Op* op = opAt(schedule(), OpRef{device, step});
  if (!op) return fail(error, {makeError("edit.move", "no op there")});
  const QString name = QString::fromStdString(schedule().opName(*op));
  return pushScheduleEdit(ps::core::moveAmongCompute(schedule(), device, step, delta), error, [&] {
    return tr("Move %1 %2").arg(name, delta < 0 ? tr("earlier") : tr("later"));
  });
}

bool ScheduleDocument::pushScheduleEdit(Result<Schedule> edited, QString* error,
                                        const std::function<QString()>& text) {
  if (!edited) return fail(error, edited.errors());
  undo_.push(replaceScheduleCommand(this, std::move(edited).value(), text()));
  return true;
}

bool ScheduleDocument::splitBackward(OpRef at, QString* error) {
  return pushScheduleEdit(ps::core::splitBackward(schedule(), at), error, [&] {
    return tr("Split %1 into I + W").arg(QString::fromStdString(schedule().opName(*opAt(schedule(), at))));
  });
}

bool ScheduleDocument::mergeInputWeight(OpRef at, QString* error) {
  return pushScheduleEdit(ps::core::mergeInputWeight(schedule(), at), error, [&] {
    const Op* op = opAt(schedule(), at);
    return tr("Merge I + W of micro-batch %1, stage %2 into B").arg(op->microbatch).arg(op->stage);
  });
}

bool ScheduleDocument::toggleRecompute(int stage, QString* error) {
  const bool had = stageRecomputes(schedule(), stage);
  return pushScheduleEdit(ps::core::toggleRecompute(schedule(), stage), error, [&] {
    return had ? tr("Stop recomputing stage %1").arg(stage) : tr("Recompute stage %1").arg(stage);
  });
}

bool ScheduleDocument::addOffloadReload(OpRef at, QString* error) {
  return pushScheduleEdit(ps::core::addOffloadReload(schedule(), at), error, [&] {
    const Op* op = opAt(schedule(), at);
    return tr("Offload micro-batch %1 of stage %2").arg(op->microbatch).arg(op->stage);
  });
}

void ScheduleDocument::setProfile(const CostProfile& p, const QString& description) {
  undo_.push(new SwapCommand<CostProfile>(
      this, profile_, p, description,
      [](ScheduleDocument* d, const CostProfile& c) { d->applyProfileInternal(c); }));
}

void ScheduleDocument::replaceSchedule(const Schedule& s, const QString& description) {
  undo_.push(replaceScheduleCommand(this, s, description));
}

void ScheduleDocument::replaceDesign(const Schedule& s, const CostProfile& p, const QString& description) {
  undo_.push(new SwapCommand<Design>(
      this, Design{schedule(), profile_}, Design{s, p}, description,
      [](ScheduleDocument* d, const Design& x) { d->applyDesignInternal(x.first, x.second); }));
}

double ScheduleDocument::modelDuration(const Op& op) const {
  if (op.stage < 0 || op.stage >= static_cast<int>(model_.stages.size())) return 1.0;
  const StageCost& c = model_.stages[static_cast<size_t>(op.stage)];
  switch (op.kind) {
    case OpKind::F:
      return c.F;
    case OpKind::B:
      return c.B;
    case OpKind::I:
      return c.I;
    case OpKind::W:
      return c.W;
    case OpKind::R:
      return c.R;
    default:
      return std::max(0.1, c.F / 4);
  }
}

std::optional<OpRef> ScheduleDocument::find(const Op& op) const {
  auto it = index_.find(opKey(op));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

const DependencyGraph& ScheduleDocument::graph() const {
  if (!graph_ || graphFor_ != analysis_) {
    graph_ = std::make_unique<DependencyGraph>(analysis_->schedule);
    graphFor_ = analysis_;
  }
  return *graph_;
}

std::vector<Op> ScheduleDocument::dependencies(const Op& op) const {
  const DependencyGraph& g = graph();
  const int id = g.find(op);
  if (id < 0) return dependenciesOf(schedule(), op);
  std::vector<Op> out;
  for (int dep : g.dependencies(id)) out.push_back(g.op(dep));
  return out;
}

std::vector<Op> ScheduleDocument::dependents(const Op& op) const {
  const DependencyGraph& g = graph();
  const int id = g.find(op);
  std::vector<Op> out;
  if (id < 0) return out;
  for (int next : g.dependents(id)) out.push_back(g.op(next));
  return out;
}

}  // namespace ps::ui
