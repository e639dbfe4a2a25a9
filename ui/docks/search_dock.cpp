#include "docks/search_dock.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPalette>
#include <QPen>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "document/schedule_document.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/partition_search.h"

namespace ps::ui {

using namespace ps::core;

namespace {

constexpr double kGiB = double(1LL << 30);

QString gib(std::int64_t bytes) {
  return QString::number(static_cast<double>(bytes) / kGiB, 'f', 2);
}

QString partitionText(const std::vector<int>& v) {
  QStringList parts;
  for (int x : v) parts << QString::number(x);
  return parts.join(QLatin1Char(','));
}

QString policyText(const std::vector<ActivationPolicy>& p) {
  int r = 0, off = 0;
  for (auto x : p) {
    r += x == ActivationPolicy::Recompute;
    off += x == ActivationPolicy::Offload;
  }
  if (!r && !off) return QObject::tr("keep");
  QStringList out;
  if (r) out << QObject::tr("recompute %1/%2").arg(r).arg(p.size());
  if (off) out << QObject::tr("offload %1/%2").arg(off).arg(p.size());
  return out.join(QStringLiteral(", "));
}

QString layoutText(const CandidateSummary& c) {
  return QStringLiteral("%1 x%2")
      .arg(QString::fromStdString(std::string(placementKindName(c.placement))))
      .arg(c.chunks);
}

// The schedule behind a candidate the search did not keep, built again from its recipe (never
// from its display name), and only when it simulates to the makespan the table shows.
std::shared_ptr<const Schedule> rebuilt(const CandidateSummary& c, const CostProfile& profile);

// True when simulating `s` under `profile` gives the summary's makespan: a rebuilt candidate
// is only offered when it is the one the table describes.
bool reproduces(const Schedule& s, const CostProfile& profile, const CandidateSummary& c) {
  auto model = makeSimulationModel(s, profile, s.partition);
  if (!model) return false;
  auto t = simulate(s, *model);
  if (!t || !t->complete) return false;
  return std::abs(t->metrics.makespan - c.makespan) <= 1e-9 * std::max(1.0, c.makespan);
}

QString layersText(std::size_t n) {
  return n == 1 ? QObject::tr("1 layer") : QObject::tr("%1 layers").arg(n);
}

QString candidatesText(std::size_t n) {
  return n == 1 ? QObject::tr("1 candidate") : QObject::tr("%1 candidates").arg(n);
}

// The knobs and split of a candidate, without what the other columns already say:
// "I/W, pending W 4, warm-up +2, group 4 · bisection split".
QString knobsText(const CandidateSummary& c) {
  const CandidateRecipe& r = c.recipe;
  if (r.source == CandidateSource::Builtin) return QString::fromStdString(c.name);
  QString out = QString::fromStdString(recipeKnobsText(r));
  if (!r.splitName.empty()) out += QStringLiteral(" · %1 split").arg(QString::fromStdString(r.splitName));
  if (r.source == CandidateSource::ListScheduler && r.list.recomputeOnDemand)
    out += QObject::tr(" · recompute on demand");
  if (!r.moves.empty()) out += QObject::tr(" · %n local move(s)", nullptr, static_cast<int>(r.moves.size()));
  return out;
}

QPushButton* button(const QString& text, const QString& tip) {
  auto* b = new QPushButton(text);
  b->setToolTip(tip);
  return b;
}

std::shared_ptr<const Schedule> rebuilt(const CandidateSummary& c, const CostProfile& profile) {
  auto s = rebuildCandidate(profile, c.recipe);
  if (!s || !reproduces(*s, profile, c)) return nullptr;
  return std::make_shared<const Schedule>(std::move(s).value());
}

}  // namespace

bool parseGibibytes(const QString& text, std::optional<std::int64_t>& out) {
  QString t = text.trimmed();
  if (t.endsWith(QStringLiteral("GiB"), Qt::CaseInsensitive)) t.chop(3);
  t = t.trimmed();
  if (t.isEmpty()) {
    out.reset();
    return true;
  }
  bool ok = false;
  const double v = t.toDouble(&ok);
  if (!ok || !(v >= 0) || v > 1e9) return false;
  out = static_cast<std::int64_t>(std::llround(v * kGiB));
  return true;
}

// What the worker thread hands to the GUI thread. Progress is coalesced: the worker posts one
// delivery at a time and the GUI takes everything accumulated since.
struct SearchDock::Shared {
  std::atomic<bool> cancel{false};
  std::atomic<bool> posted{false};
  std::mutex mutex;
  std::optional<SearchProgress> latest;
  std::vector<QPointF> improvements;  // (elapsed s, best makespan ms)
  double workerBest = 0;
  std::optional<Result<SearchResult>> outcome;
};

SearchDock::SearchDock(ScheduleDocument* doc, QWidget* parent)
    : QDockWidget(tr("Search"), parent), doc_(doc) {
  setObjectName(QStringLiteral("dock.search"));
  setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable |
              QDockWidget::DockWidgetFloatable);

  // Inputs: a compact strip over the chart and the table, so the table gets the width.
  auto* inputs = new QWidget;
  profileName_ = new QLabel;
  profileName_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  profileName_->setMinimumWidth(120);
  useDocButton_ = button(tr("&Document's"), tr("Search with the open document's cost profile"));
  fileButton_ = button(tr("&File…"), tr("Search with a cost profile JSON file"));
  devices_ = new QSpinBox;
  devices_->setRange(1, 1024);
  devices_->setValue(4);
  microbatches_ = new QSpinBox;
  microbatches_->setRange(1, 100000);
  microbatches_->setValue(8);
  memory_ = new QLineEdit;
  memory_->setToolTip(tr("Device memory limit in GiB; empty = the profile's device memory"));
  memory_->setMinimumWidth(110);
  timeLimit_ = new QDoubleSpinBox;
  timeLimit_->setRange(0.1, 3600);
  timeLimit_->setDecimals(1);
  timeLimit_->setValue(10);
  timeLimit_->setSuffix(tr(" s"));
  timeLimit_->setToolTip(tr("Wall-clock limit; the best found so far is kept when it runs out"));
  seed_ = new QSpinBox;
  seed_->setRange(0, 1 << 30);
  seed_->setValue(1);
  seed_->setToolTip(tr("Same seed, same inputs: same candidates (unless the time limit cuts the search)"));
  maxChunks_ = new QSpinBox;
  maxChunks_->setRange(1, 8);
  maxChunks_->setValue(SearchOptions{}.maxChunks);
  maxChunks_->setToolTip(tr("Stages per device explored: 1 up to this"));
  objective_ = new QComboBox;
  objective_->addItem(tr("Makespan (one iteration)"), QStringLiteral("makespan"));
  objective_->addItem(tr("Steady state (overlap boundary)"), QStringLiteral("steady-state"));
  objective_->setToolTip(
      tr("What the search minimises. Makespan: one iteration from first start to last end. "
         "Steady state: the iteration time of a long run, each device starting its next "
         "iteration after its own optimizer step. Ties go to the lower peak memory, then the "
         "lower bubble ratio."));

  startButton_ = button(tr("&Start"), tr("Search with these inputs"));
  cancelButton_ = button(tr("Ca&ncel"), tr("Stop the search and keep the best found so far"));
  openButton_ = button(tr("&Open as Design"),
                       tr("Replace the document's schedule with the selected candidate (undoable)"));
  progress_ = new QProgressBar;
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  progress_->setFormat(tr("idle"));
  progress_->setMinimumWidth(120);
  message_ = new QLabel;
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* grid = new QGridLayout(inputs);
  grid->setContentsMargins(6, 4, 6, 2);
  grid->setHorizontalSpacing(6);
  grid->setVerticalSpacing(4);
  auto label = [](const QString& t) {
    auto* l = new QLabel(t);
    l->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return l;
  };
  // Row 0: profile; rows 1-2: sizes and limits, three to a row so the dock stays narrow
  // enough to share the window's side with the other docks; row 3: actions and progress;
  // row 4: message.
  grid->addWidget(label(tr("Profile")), 0, 0);
  grid->addWidget(profileName_, 0, 1, 1, 3);
  grid->addWidget(useDocButton_, 0, 4);
  grid->addWidget(fileButton_, 0, 5);
  const std::pair<QString, QWidget*> labelled[] = {
      {tr("Devices"), devices_},     {tr("Micro-batches"), microbatches_},
      {tr("Memory (GiB)"), memory_}, {tr("Time limit"), timeLimit_},
      {tr("Seed"), seed_},           {tr("Max chunks"), maxChunks_}};
  for (int i = 0; i < 6; ++i) {
    grid->addWidget(label(labelled[i].first), 1 + i / 3, 2 * (i % 3));
    grid->addWidget(labelled[i].second, 1 + i / 3, 2 * (i % 3) + 1);
  }
  grid->addWidget(label(tr("Objective")), 3, 0);
  grid->addWidget(objective_, 3, 1, 1, 3);
  auto* actions = new QHBoxLayout;
  actions->setContentsMargins(0, 0, 0, 0);
  actions->addWidget(startButton_);
  actions->addWidget(cancelButton_);
  actions->addWidget(progress_, 1);
  actions->addWidget(openButton_);
  grid->addLayout(actions, 4, 0, 1, 6);
  grid->addWidget(message_, 5, 0, 1, 6);
  for (int c : {1, 3, 5}) grid->setColumnStretch(c, 1);

  // Chart of the best makespan over elapsed time.
  auto* chart = new QChart;
  chart->setMargins(QMargins(2, 2, 2, 2));
  chart->setBackgroundRoundness(0);
  chart->legend()->hide();
  series_ = new QLineSeries;
  series_->setName(tr("best makespan"));
  series_->setPen(QPen(QColor(0x2f, 0x6f, 0xde), 2));
  series_->setPointsVisible(false);
  chart->addSeries(series_);
  axisX_ = new QValueAxis;
  axisX_->setTitleText(tr("elapsed (s)"));
  axisX_->setLabelFormat(QStringLiteral("%g"));
  axisX_->setRange(0, 10);
  axisY_ = new QValueAxis;
  // A short title that fits the chart's height; plain numbers, never "1.2e+04".
  axisY_->setTitleText(tr("best (ms)"));
  axisY_->setLabelFormat(QStringLiteral("%.0f"));
  axisY_->setRange(0, 1);
  chart->addAxis(axisX_, Qt::AlignBottom);
  chart->addAxis(axisY_, Qt::AlignLeft);
  series_->attachAxis(axisX_);
  series_->attachAxis(axisY_);
  chartView_ = new QChartView(chart);
  chartView_->setRenderHint(QPainter::Antialiasing);
  chartView_->setMinimumSize(260, 180);
  chartView_->setToolTip(tr("The best makespan found so far, in ms, against the seconds the search has run"));
  {
    const QPalette pal = palette();
    chart->setBackgroundBrush(pal.color(QPalette::Base));
    QColor grid = pal.color(QPalette::Text);
    grid.setAlphaF(0.12f);
    for (QAbstractAxis* ax : chart->axes()) {
      ax->setLabelsColor(pal.color(QPalette::Text));
      ax->setTitleBrush(pal.color(QPalette::Text));
      ax->setGridLineColor(grid);
      ax->setLinePenColor(grid);
    }
  }

  // Best distinct candidates.
  table_ = new QTableWidget(0, Columns);
  table_->setHorizontalHeaderLabels({tr("#"), tr("Makespan ms"), tr("Bubble"), tr("Peak GiB"), tr("Kind"),
                                     tr("Layout"), tr("Layers / stage"), tr("Activations"),
                                     tr("Knobs · split")});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->setMinimumWidth(240);

  auto* split = new QSplitter(Qt::Horizontal);
  split->setChildrenCollapsible(false);
  split->addWidget(chartView_);
  split->addWidget(table_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 3);
  split->setSizes({300, 900});
  auto* content = new QWidget;
  auto* lay = new QVBoxLayout(content);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(2);
  lay->addWidget(inputs);
  lay->addWidget(split, 1);
  setWidget(content);

  tick_ = new QTimer(this);
  tick_->setInterval(100);
  connect(tick_, &QTimer::timeout, this, &SearchDock::updateProgressBar);
  connect(useDocButton_, &QPushButton::clicked, this, &SearchDock::useDocumentProfile);
  connect(fileButton_, &QPushButton::clicked, this, &SearchDock::chooseProfileFile);
  connect(startButton_, &QPushButton::clicked, this, [this] { start(); });
  connect(cancelButton_, &QPushButton::clicked, this, &SearchDock::cancel);
  connect(openButton_, &QPushButton::clicked, this, [this] { openSelectedAsDesign(); });
  connect(table_, &QTableWidget::itemSelectionChanged, this, &SearchDock::updateButtons);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) { openAsDesign(row); });
  connect(doc_, &ScheduleDocument::changed, this, &SearchDock::documentChanged);
  connect(doc_, &ScheduleDocument::loaded, this, &SearchDock::documentLoaded);
  connect(doc_->undoStack(), &QUndoStack::indexChanged, this, [this](int index) {
    if (openedAt_ < 0 || index == openedAt_) return;
    // Undone (or another edit on top): the hint about undoing the opened candidate is stale.
    const bool undone = index < openedAt_;
    openedAt_ = -1;
    showInfo(undone ? tr("Undone: the design from before the candidate is back") : QString());
  });
  documentChanged();
  updateButtons();
}

void SearchDock::documentLoaded() {
  openedAt_ = -1;
  if (!result_ && !running_ && table_->rowCount() == 0) return;
  // The candidates were searched for the previous document (its sizes and profile): offering
  // them now would replace the new document with one of them.
  if (running_) {
    generation_++;  // its results are not delivered
    if (shared_) shared_->cancel.store(true);
    joinWorker();
    running_ = false;
    tick_->stop();
  }
  clearResults();
  showInfo(tr("A new document is open: the previous search's candidates were cleared. Start a new search."));
  updateButtons();
}

void SearchDock::clearResults() {
  result_.reset();
  rowSchedules_.clear();
  table_->setRowCount(0);
  series_->clear();
  lastBest_ = 0;
  yMin_ = yMax_ = xMax_ = 0;
  axisX_->setRange(0, 10);
  axisY_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setFormat(tr("idle"));
}

SearchDock::~SearchDock() {
  joinWorker();
}

void SearchDock::joinWorker() {
  if (!worker_) return;
  if (shared_) shared_->cancel.store(true);
  worker_->wait();
  delete worker_;
  worker_ = nullptr;
}

QString SearchDock::profileLabel() const {
  return profileName_->text();
}

QString SearchDock::statusText() const {
  return message_->text();
}

void SearchDock::documentChanged() {
  // The document's sizes are a good first guess; they follow a newly opened document but
  // leave what the user typed alone while the document keeps its shape.
  const auto& pl = doc_->schedule().pipeline;
  if ((pl.devices != docDevices_ || pl.microbatches != docMicrobatches_) && !running_) {
    docDevices_ = pl.devices;
    docMicrobatches_ = pl.microbatches;
    devices_->setValue(std::max(1, pl.devices));
    microbatches_->setValue(std::max(1, pl.microbatches));
  }
  if (!fileProfile_) {
    const CostProfile& p = doc_->profile();
    const QString name = p.name.empty() ? tr("unnamed") : QString::fromStdString(p.name);
    profileName_->setText(tr("document: %1 (%2)").arg(name, layersText(p.layers.size())));
    profileName_->setToolTip(
        tr("The open document's cost profile; it follows edits in the Pipeline and costs dock"));
  }
  refreshMemoryPlaceholder();
}

void SearchDock::refreshMemoryPlaceholder() {
  const CostProfile& p = fileProfile_ ? *fileProfile_ : doc_->profile();
  memory_->setPlaceholderText(p.deviceMemoryBytes > 0 ? tr("profile's: %1").arg(gib(p.deviceMemoryBytes))
                                                      : tr("profile's: unlimited"));
}

void SearchDock::useDocumentProfile() {
  fileProfile_.reset();
  fileProfilePath_.clear();
  showInfo(QString());
  documentChanged();
}

bool SearchDock::setProfileFile(const QString& path) {
  auto read = readTextFile(path);
  if (!read) {
    showError(tr("Cannot read %1: %2").arg(path, QString::fromStdString(read.error().message)));
    return false;
  }
  const std::string text = std::move(*read);
  auto p = parseCostProfile(text, QFileInfo(path).fileName().toStdString());
  if (!p) {
    showError(tr("Not a cost profile: %1")
                  .arg(QString::fromStdString(formatDiagnostics(p.errors(), &text)).trimmed()));
    return false;
  }
  CostProfile prof = std::move(p).value();
  if (prof.name.empty()) prof.name = QFileInfo(path).completeBaseName().toStdString();
  if (prof.layers.empty()) {
    showError(tr("%1 has no layers").arg(QFileInfo(path).fileName()));
    return false;
  }
  fileProfile_ = std::move(prof);
  fileProfilePath_ = QFileInfo(path).absoluteFilePath();
  profileName_->setText(
      tr("file: %1 (%2)").arg(QFileInfo(path).fileName(), layersText(fileProfile_->layers.size())));
  profileName_->setToolTip(fileProfilePath_);
  showInfo(tr("Profile %1 loaded").arg(QString::fromStdString(fileProfile_->name)));
  refreshMemoryPlaceholder();
  return true;
}

void SearchDock::chooseProfileFile() {
  const QString dir = fileProfilePath_.isEmpty() ? resourcesDir() + QStringLiteral("/profiles")
                                                 : QFileInfo(fileProfilePath_).path();
  const QString path = QFileDialog::getOpenFileName(this, tr("Cost profile for the search"), dir,
                                                    tr("Cost profiles (*.json);;All files (*)"));
  if (!path.isEmpty()) setProfileFile(path);
}

void SearchDock::showError(const QString& text) {
  error_ = text;
  message_->setStyleSheet(QStringLiteral("color: #d32f2f;"));
  message_->setText(text);
}

void SearchDock::showInfo(const QString& text) {
  error_.clear();
  info_ = text;
  message_->setStyleSheet(QString());
  message_->setText(text);
}

bool SearchDock::start() {
  if (running_) {
    showError(tr("A search is already running"));
    return false;
  }
  joinWorker();
  SearchOptions o;
  o.devices = devices_->value();
  o.microbatches = microbatches_->value();
  if (!parseGibibytes(memory_->text(), o.memoryLimitBytes)) {
    showError(tr("Memory limit: '%1' is not a number of GiB").arg(memory_->text()));
    return false;
  }
  o.timeLimitSeconds = timeLimit_->value();
  o.seed = static_cast<std::uint64_t>(seed_->value());
  o.maxChunks = maxChunks_->value();
  if (auto obj = searchObjectiveFromName(objective_->currentData().toString().toStdString()))
    o.objective = *obj;
  {
    const bool steady = o.objective == SearchObjective::SteadyState;
    axisY_->setTitleText(steady ? tr("best steady (ms)") : tr("best (ms)"));
    chartView_->setToolTip(steady ? tr("The best steady-state iteration time found so far, in ms, "
                                       "against the seconds the search has run")
                                  : tr("The best makespan found so far, in ms, against the seconds the "
                                       "search has run"));
    table_->horizontalHeaderItem(ColMakespan)->setText(steady ? tr("Steady ms") : tr("Makespan ms"));
  }
  o.keepTop = 12;
  searchedProfile_ = fileProfile_ ? *fileProfile_ : doc_->profile();
  if (searchedProfile_.layers.empty()) {
    showError(tr("The cost profile has no layers"));
    return false;
  }

  shared_ = std::make_shared<Shared>();
  ++generation_;
  const quint64 gen = generation_;
  auto sh = shared_;
  o.cancel = &sh->cancel;
  o.progress = [this, sh, gen](const SearchProgress& p) {
    {
      std::lock_guard<std::mutex> lock(sh->mutex);
      sh->latest = p;
      if (p.bestObjective > 0 && p.bestObjective != sh->workerBest) {
        sh->improvements.emplace_back(p.elapsedSeconds, p.bestObjective);
        sh->workerBest = p.bestObjective;
      }
    }
    if (!sh->posted.exchange(true))
      QMetaObject::invokeMethod(this, "deliverProgress", Qt::QueuedConnection, Q_ARG(quint64, gen));
  };

  result_.reset();
  rowSchedules_.clear();
  table_->setRowCount(0);
  series_->clear();
  lastBest_ = 0;
  yMin_ = yMax_ = 0;
  xMax_ = o.timeLimitSeconds;
  axisX_->setRange(0, xMax_);
  axisX_->applyNiceNumbers();
  axisY_->setRange(0, 1);
  evaluated_ = 0;
  phase_.clear();
  timeLimitSeconds_ = o.timeLimitSeconds;
  running_ = true;
  clock_.start();
  tick_->start();
  showInfo(tr("Searching %1 devices × %2 micro-batches…").arg(o.devices).arg(o.microbatches));
  updateProgressBar();
  updateButtons();

  const CostProfile profile = searchedProfile_;
  worker_ = QThread::create([this, sh, gen, profile, o] {
    Result<SearchResult> r = makeError("search.failed", "the search did not run");
    try {
      r = searchSchedule(profile, o);
    } catch (const std::exception& e) {
      // Nothing from the search may take the designer down.
      r = makeError("search.failed", std::string("the search failed: ") + e.what());
    }
    {
      std::lock_guard<std::mutex> lock(sh->mutex);
      sh->outcome.emplace(std::move(r));
    }
    QMetaObject::invokeMethod(this, "finished", Qt::QueuedConnection, Q_ARG(quint64, gen));
  });
  worker_->setObjectName(QStringLiteral("schedule search"));
  worker_->start(QThread::LowPriority);
  Q_EMIT searchStarted();
  return true;
}

void SearchDock::cancel() {
  if (!running_ || !shared_) return;
  shared_->cancel.store(true);
  showInfo(tr("Cancelling…"));
  cancelButton_->setEnabled(false);
}

void SearchDock::deliverProgress(quint64 generation) {
  if (generation != generation_ || !shared_) return;
  std::optional<SearchProgress> latest;
  std::vector<QPointF> pts;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->posted.store(false);
    latest = shared_->latest;
    pts.swap(shared_->improvements);
  }
  for (const QPointF& p : pts) addBestPoint(p.x(), p.y());
  if (latest) {
    evaluated_ = latest->evaluated;
    phase_ = QString::fromStdString(latest->phase);
  }
  updateProgressBar();
}

void SearchDock::addBestPoint(double seconds, double makespan) {
  // A step line: the best holds until the next improvement.
  if (lastBest_ > 0) series_->append(seconds, lastBest_);
  series_->append(seconds, makespan);
  lastBest_ = makespan;
  if (yMax_ <= 0) {
    yMin_ = yMax_ = makespan;
  } else {
    yMin_ = std::min(yMin_, makespan);
    yMax_ = std::max(yMax_, makespan);
  }
  const double pad = std::max((yMax_ - yMin_) * 0.08, yMax_ * 0.01);
  axisY_->setRange(std::max(0.0, yMin_ - pad), yMax_ + pad);
  axisY_->applyNiceNumbers();
  {
    // Fixed-point labels with as many decimals as the tick spacing needs ("487", "6.35").
    const double tick = (axisY_->max() - axisY_->min()) / std::max(1, axisY_->tickCount() - 1);
    const int decimals = tick >= 1 ? 0 : tick >= 0.1 ? 1 : tick >= 0.01 ? 2 : 3;
    axisY_->setLabelFormat(QStringLiteral("%.") + QString::number(decimals) + QStringLiteral("f"));
  }
  if (seconds > xMax_) {
    xMax_ = seconds;
    axisX_->setRange(0, xMax_);
    axisX_->applyNiceNumbers();
  }
}

void SearchDock::updateProgressBar() {
  if (!running_) return;
  const double t = clock_.elapsed() / 1000.0;
  const double frac = timeLimitSeconds_ > 0 ? std::min(1.0, t / timeLimitSeconds_) : 0;
  progress_->setValue(static_cast<int>(frac * 1000));
  QString text = candidatesText(evaluated_);
  text += tr(" · %1 / %2 s").arg(t, 0, 'f', 1).arg(timeLimitSeconds_, 0, 'f', 1);
  if (!phase_.isEmpty()) text += QStringLiteral(" · ") + phase_;
  progress_->setFormat(text);
}

void SearchDock::finished(quint64 generation) {
  if (generation != generation_ || !shared_) return;
  deliverProgress(generation);  // improvements posted just before the end
  std::optional<Result<SearchResult>> outcome;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    outcome.swap(shared_->outcome);
  }
  if (worker_) {
    worker_->wait();
    delete worker_;
    worker_ = nullptr;
  }
  running_ = false;
  tick_->stop();
  const double t = clock_.elapsed() / 1000.0;
  bool ok = outcome && static_cast<bool>(*outcome);
  if (!ok) {
    const QString why = outcome ? QString::fromStdString(formatDiagnostics(outcome->errors())).trimmed()
                                : tr("the search returned nothing");
    showError(why);
    progress_->setValue(0);
    progress_->setFormat(tr("failed"));
  } else {
    result_ = std::move(*outcome).value();
    const SearchResult& r = *result_;
    // Extend the line to the end so the chart shows how long the best stood.
    if (lastBest_ > 0 && r.elapsedSeconds > 0) series_->append(r.elapsedSeconds, lastBest_);
    // The axis ends where the search ended (it may stop well before its time limit).
    xMax_ = std::max(r.elapsedSeconds, 1e-3);
    axisX_->setRange(0, xMax_);
    axisX_->applyNiceNumbers();
    fillTable();
    progress_->setValue(1000);
    const QString how = r.cancelled ? tr("cancelled") : r.timedOut ? tr("time limit reached") : tr("done");
    progress_->setFormat(candidatesText(r.evaluated) +
                         tr(" · %1 s · %2").arg(r.elapsedSeconds, 0, 'f', 1).arg(how));
    double bestBuiltin = 0;
    QString bestBuiltinName;
    for (const auto& b : r.builtins)
      if (b.valid && b.fitsMemory && b.objective > 0 && (bestBuiltin == 0 || b.objective < bestBuiltin)) {
        bestBuiltin = b.objective;
        bestBuiltinName = QString::fromStdString(b.name);
      }
    const bool steady = r.objective == SearchObjective::SteadyState;
    QString msg = (steady ? tr("Best steady-state iteration %1 ms") : tr("Best %1 ms"))
                      .arg(r.bestSummary.objective, 0, 'f', 2);
    if (bestBuiltin > 0)
      msg += tr("; best built-in %1 %2 ms (%3× the best)")
                 .arg(bestBuiltinName)
                 .arg(bestBuiltin, 0, 'f', 2)
                 .arg(bestBuiltin / r.bestSummary.objective, 0, 'f', 2);
    msg += tr("; equal times ordered by peak memory, then bubble");
    for (const auto& n : r.notes) msg += QStringLiteral("; ") + QString::fromStdString(n);
    if (r.cancelled) msg = tr("Cancelled after %1 s. ").arg(t, 0, 'f', 1) + msg;
    showInfo(msg);
    if (table_->rowCount() > 0) table_->selectRow(0);
  }
  updateButtons();
  Q_EMIT searchFinished(ok);
}

void SearchDock::showResult(SearchResult result, CostProfile profile) {
  result_ = std::move(result);
  searchedProfile_ = std::move(profile);
  fillTable();
  updateButtons();
}

void SearchDock::fillTable() {
  table_->setRowCount(0);
  rowSchedules_.clear();
  if (!result_) return;
  const SearchResult& r = *result_;
  const auto& top = r.top;
  const CandidateSummary* best = top.empty() ? nullptr : &top.front();
  table_->setRowCount(static_cast<int>(top.size()));
  for (int i = 0; i < static_cast<int>(top.size()); ++i) {
    const CandidateSummary& c = top[static_cast<size_t>(i)];
    // The schedule behind the row: kept by the search, or rebuilt from the candidate's recipe.
    std::shared_ptr<const Schedule> sched = c.schedule ? c.schedule : rebuilt(c, searchedProfile_);
    rowSchedules_.push_back(sched);

    const QString cells[Columns] = {
        QString::number(i + 1),
        // A candidate whose simulation did not finish has no figures (never a "better" one).
        c.valid ? QString::number(c.objective > 0 ? c.objective : c.makespan, 'f', 2)
                : tr("not available (stalled)"),
        c.valid ? QStringLiteral("%1 %").arg(c.bubbleRatio * 100, 0, 'f', 1) : tr("n/a"),
        c.valid ? gib(c.peakMemoryBytes) : tr("n/a"),
        QString::fromStdString(c.family.empty() ? c.name : c.family), layoutText(c),
        partitionText(c.partition), policyText(c.policies), knobsText(c)};
    // "What differs": the cells that differ from the best candidate are bold.
    const QString bestCells[Columns] = {
        QString(),
        QString(),
        QString(),
        QString(),
        best ? QString::fromStdString(best->family.empty() ? best->name : best->family) : QString(),
        best ? layoutText(*best) : QString(),
        best ? partitionText(best->partition) : QString(),
        best ? policyText(best->policies) : QString(),
        QString()};
    for (int col = 0; col < Columns; ++col) {
      auto* item = new QTableWidgetItem(cells[col]);
      if (col <= ColPeak) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (i > 0 && col >= ColKind && col <= ColMemory && cells[col] != bestCells[col]) {
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      QString tip = QString::fromStdString(c.name);
      if (!sched) {
        // Shown, but greyed: there is no schedule behind it to open.
        tip += tr("\n(this candidate's schedule was not kept by the search; it cannot be opened)");
        item->setForeground(table_->palette().color(QPalette::Disabled, QPalette::Text));
      }
      item->setToolTip(tip);
      if (col == ColMakespan) item->setData(Qt::UserRole, c.objective > 0 ? c.objective : c.makespan);
      table_->setItem(i, col, item);
    }
  }
  table_->resizeColumnsToContents();
  // The long candidate description must not push the useful columns out of view.
  const int nameWidth = table_->columnWidth(ColName);
  if (nameWidth > 420) table_->setColumnWidth(ColName, 420);
}

std::shared_ptr<const Schedule> SearchDock::candidateSchedule(int row) const {
  if (row < 0 || row >= static_cast<int>(rowSchedules_.size())) return nullptr;
  return rowSchedules_[static_cast<size_t>(row)];
}

bool SearchDock::openSelectedAsDesign() {
  const auto rows = table_->selectionModel()->selectedRows();
  if (rows.isEmpty()) {
    showError(tr("Select a candidate first"));
    return false;
  }
  return openAsDesign(rows.front().row());
}

bool SearchDock::openAsDesign(int row) {
  if (!result_ || row < 0 || row >= static_cast<int>(result_->top.size())) {
    showError(tr("No such candidate"));
    return false;
  }
  auto sched = candidateSchedule(row);
  if (!sched) {
    showError(tr("Candidate #%1's schedule was not kept by the search; it cannot be opened").arg(row + 1));
    return false;
  }
  const CandidateSummary& c = result_->top[static_cast<size_t>(row)];
  Schedule s = *sched;
  s.name = "search-" + std::to_string(row + 1);
  // The profile travels with the design; name the file so a saved .pipe finds it again.
  if (!fileProfilePath_.isEmpty() && fileProfile_)
    s.profile = fileProfilePath_.toStdString();
  else
    s.profile = doc_->schedule().profile;
  const QString what = tr("Open search candidate #%1 (%2 ms)").arg(row + 1).arg(c.makespan, 0, 'f', 2);
  doc_->replaceDesign(s, searchedProfile_, what);
  openedAt_ = doc_->undoStack()->index();
  showInfo(what + tr(" — Undo restores the previous design"));
  Q_EMIT designOpened(what);
  return true;
}

void SearchDock::updateButtons() {
  startButton_->setEnabled(!running_);
  cancelButton_->setEnabled(running_);
  useDocButton_->setEnabled(!running_);
  fileButton_->setEnabled(!running_);
  const auto rows = table_->selectionModel() ? table_->selectionModel()->selectedRows() : QModelIndexList{};
  openButton_->setEnabled(!rows.isEmpty() && candidateSchedule(rows.front().row()) != nullptr);
}

}  // namespace ps::ui
