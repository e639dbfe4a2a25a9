// pipestudio: the schedule designer.
//   pipestudio [FILE.pipe|FILE.csv]
//   pipestudio --screenshot OUT.png [--size 1600x1000] [FILE]   (renders offscreen and exits)
//   pipestudio --screenshot OUT.png --dialog run [FILE]                (the Run dialog instead)
//   pipestudio --screenshot OUT.png --dialog profile [FILE]            (the Profile Model dialog)
//   pipestudio [--trace TRACE.json ...] [--align absolute|scaled] [FILE]  (measured overlay)
//   pipestudio [--iterations K] [--boundary sync|overlap] [FILE]           (K iterations)
//   pipestudio [--playhead MS | --step N] [--break OP@dD ...] ...          (step-through)
//   pipestudio --help | --version                                          (no display needed)
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QIcon>
#include <QImage>
#include <QPixmap>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTimer>
#include <cstdio>
#include <cstring>
#include <optional>

#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "docks/search_dock.h"
#include "docks/session_dock.h"
#include "document/schedule_document.h"
#include "remote/profile_dialog.h"
#include "remote/run_dialog.h"
#include "shell/main_window.h"
#include "timeline/theme.h"
#include "timeline/timeline_view.h"

namespace {

// The parsed options, by the names declared in main().
struct Options {
  const QCommandLineParser& parser;
  bool isSet(const char* name) const { return parser.isSet(QString::fromLatin1(name)); }
  QString value(const char* name) const { return parser.value(QString::fromLatin1(name)); }
};

// A malformed option: says what it wants; exit status 2.
int usage(const char* wants) {
  std::fprintf(stderr, "pipestudio: %s\n", wants);
  return 2;
}

// The same from a function that says whether it went well.
bool rejected(const char* wants) {
  usage(wants);
  return false;
}

void complain(const QString& why) {
  std::fprintf(stderr, "pipestudio: %s\n", qPrintable(why));
}

// --break, --step and --playhead (docs/gui.md, "Step-through"); false on a malformed value.
bool applyStepOptions(const Options& opt, ps::ui::MainWindow& w) {
  ps::ui::StepperController* sc = w.stepperController();
  const auto selected = w.timeline()->selectedOp();
  for (const QString& b : opt.parser.values(QStringLiteral("break"))) {
    const QString name = b.section(QLatin1Char(':'), 0, 0);
    if (!w.selectOpByName(name)) {
      complain(QStringLiteral("--break: no op %1 in this schedule").arg(name));
      return false;
    }
    auto ref = w.timeline()->selection();
    bool ok = true;
    const int device = b.contains(QLatin1Char(':')) ? b.section(QLatin1Char(':'), 1).toInt(&ok) : ref->device;
    if (!ok) return rejected("--break wants OP or OP:DEVICE, e.g. B3@s1:1");
    sc->toggleBreakpoint(device, *w.timeline()->selectedOp());
    w.timeline()->selectOp(selected, false);
  }
  if (opt.isSet("step")) {
    bool ok = false;
    const qlonglong n = opt.value("step").toLongLong(&ok);
    if (!ok || n < 0) return rejected("--step wants an event count, e.g. 12");
    sc->seekPosition(static_cast<size_t>(n));
    w.showStateDock();
  }
  if (opt.isSet("playhead")) {
    bool ok = false;
    const double ms = opt.value("playhead").toDouble(&ok);
    if (!ok) return rejected("--playhead wants milliseconds, e.g. 12.5");
    sc->seekTime(ms);
    w.showStateDock();
  }
  return true;
}

// Application name and version, for --version and the settings' location.
void describeApplication() {
  QCoreApplication::setApplicationName(QStringLiteral("PipeStudio"));
  QCoreApplication::setOrganizationName(QStringLiteral("PipeStudio"));
  QCoreApplication::setApplicationVersion(QStringLiteral(PIPESTUDIO_VERSION));
}

// Every option once: name, value name (empty for a switch), default, help.
void declareOptions(QCommandLineParser& parser) {
  parser.setApplicationDescription(QStringLiteral("Design, check and simulate pipeline-parallel schedules."));
  parser.addHelpOption();
  parser.addVersionOption();
  static const char* const kOptions[][4] = {
      {"screenshot", "OUT.png", "", "Render the main window to OUT.png and exit."},
      {"size", "WxH", "1600x1000", "Window size for --screenshot (default 1600x1000)."},
      {"select", "OP", "", "Select an op, e.g. B3@s1 (shows its dependency arrows)."},
      {"layout", "time|slots", "time", "Timeline layout: time (default) or slots."},
      {"iterations", "K", "1", "Show K training iterations back to back (1..16, default 1)."},
      {"boundary", "sync|overlap", "overlap",
       "Iteration boundary with --iterations: sync or overlap (default)."},
      {"palette", "system|light|dark", "system", "Colour scheme: system (default), light or dark."},
      {"session", "FILE", "",
       "A session file to show in the Session dock (default: the bundled example, read-only)."},
      {"trace", "TRACE", "",
       "A measured Chrome trace to lay over the plan (repeat: one file per rank; .json.gz, or a "
       "folder of torchtitan's, Megatron-LM's or tensorboard_trace_handler's traces)."},
      {"trace-step", "N", "", "With a torchtitan folder: its iteration_<N> (default: the newest)."},
      {"run", "DB:ID", "", "Open run ID of session DB (read-only) and lay its timeline over its schedule."},
      {"align", "absolute|scaled", "absolute",
       "Measured overlay alignment: absolute (default) or scaled to the planned makespan."},
      {"playhead", "MS", "",
       "Step-through: put the playhead at MS (of the stepped timeline) and show the State dock."},
      {"step", "N", "", "Step-through: put the playhead after event N (0 = before the first)."},
      {"break", "OP[:DEVICE]", "",
       "Step-through: a breakpoint when a device starts OP (e.g. B3@s1, or B3@s1:2 for device 2); "
       "repeatable."},
      {"search-open", "", "", "With --dock search: open the best candidate as the design (undoable)."},
      {"dock", "search", "",
       "Raise a dock at start: search (runs a search with the document's sizes first)."},
      {"search-profile", "P.json", "", "Cost profile JSON for --dock search (default: the document's)."},
      {"search-time", "S", "10", "Time limit in seconds for --dock search (default 10)."},
      {"dialog", "run", "",
       "With --screenshot: render this dialog instead of the main window (run, profile)."},
  };
  for (const auto& [name, valueName, defaultValue, help] : kOptions)
    parser.addOption(QCommandLineOption(QString::fromLatin1(name), QString::fromUtf8(help),
                                        QString::fromLatin1(valueName), QString::fromLatin1(defaultValue)));
  parser.addPositionalArgument(QStringLiteral("file"),
                               QStringLiteral("A .pipe or PyTorch .csv schedule to open."),
                               QStringLiteral("[FILE]"));
}

// Whether the command line asks for --help or --version (before a "--" that ends the options).
bool wantsHelpOrVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--") == 0) return false;
    for (const char* o : {"-h", "-?", "--help", "--help-all", "-v", "--version"})
      if (std::strcmp(a, o) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // --help and --version answer without a window system (over ssh, for help2man at build time):
  // a QApplication would abort when it finds no display.
  if (wantsHelpOrVersion(argc, argv)) {
    QCoreApplication app(argc, argv);
    describeApplication();
    QCommandLineParser parser;
    declareOptions(parser);
    parser.process(app);  // prints the help or version and exits
    return 0;
  }

  // The screenshot mode needs no display: pick the offscreen platform before Qt starts. It
  // neither reads nor writes anything in the user's home (settings, recent files, caches): Qt
  // and the libraries it loads find their XDG folders in a temporary directory instead.
  bool screenshot = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0) screenshot = true;
  if (screenshot && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  std::optional<QTemporaryDir> scratch;
  if (screenshot) {
    scratch.emplace(QDir::tempPath() + QStringLiteral("/pipestudio-screenshot-XXXXXX"));
    if (!scratch->isValid()) return usage("--screenshot: cannot create a temporary directory");
    for (const char* var : {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"})
      qputenv(var, QFile::encodeName(scratch->filePath(QString::fromLatin1(var))));
  }

  QApplication app(argc, argv);
  Q_INIT_RESOURCE(pipestudio);  // the icons live in the ps_ui static library
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/pipestudio.svg")));
  describeApplication();

  QCommandLineParser parser;
  declareOptions(parser);
  parser.process(app);
  const Options opt{parser};
  const bool shot = opt.isSet("screenshot");

  const auto m = QRegularExpression(QStringLiteral("^(\\d+)x(\\d+)$")).match(opt.value("size"));
  if (!m.hasMatch()) return usage("--size wants WxH, e.g. 1600x1000");
  const QSize windowSize(m.captured(1).toInt(), m.captured(2).toInt());

  if (opt.value("palette") == QStringLiteral("dark") || opt.value("palette") == QStringLiteral("light")) {
    QApplication::setStyle(QStringLiteral("Fusion"));
    QApplication::setPalette(opt.value("palette") == QStringLiteral("dark") ? ps::ui::darkPalette()
                                                                            : ps::ui::lightPalette());
  }

  ps::ui::MainWindow w;
  const QStringList files = parser.positionalArguments();
  bool opened = true;
  if (!files.isEmpty()) opened = w.openFile(files.front(), shot);
  if (files.isEmpty() || (!opened && !shot)) w.openDefault();  // something to look at

  const QString exampleSession = ps::ui::resourcesDir() + QStringLiteral("/examples/example.session");
  if (opt.isSet("session")) {
    if (!w.openSession(opt.value("session"))) complain(w.statusText());
  } else if (!shot && QFileInfo(exampleSession).isFile()) {
    w.openSession(exampleSession, true);
  }
  if (opt.value("align") == QStringLiteral("scaled")) w.setOverlayScaled(true);
  // A run or trace that cannot be shown fails a screenshot; the window opens without it.
  if (opt.isSet("run")) {
    const QString v = opt.value("run");
    const int colon = v.lastIndexOf(QLatin1Char(':'));
    bool ok = false;
    const qint64 id = colon > 0 ? v.mid(colon + 1).toLongLong(&ok) : 0;
    if (!ok) return usage("--run wants DB:ID, e.g. runs.session:3");
    if (!w.openSession(v.left(colon), true) ||
        (w.sessionDock()->openRun(id), !w.measuredOverlay()->active())) {
      complain(w.statusText());
      if (shot) return 1;
    }
  }
  std::optional<long long> traceStep;
  if (opt.isSet("trace-step")) {
    bool ok = false;
    traceStep = opt.value("trace-step").toLongLong(&ok);
    if (!ok || *traceStep < 0) return usage("--trace-step wants the N of an iteration_<N> folder");
  }
  if (opt.isSet("trace") && !w.openTraces(parser.values(QStringLiteral("trace")), shot, traceStep)) {
    complain(w.statusText());
    if (shot) return 1;
  }
  if (opt.isSet("dock")) {
    if (opt.value("dock") != QStringLiteral("search")) return usage("--dock takes: search");
    // Search dock (docs/gui.md): a finished search to look at.
    ps::ui::SearchDock* sd = w.searchDock();
    w.resize(windowSize);
    w.showSearchDock();
    w.resizeDocks({sd}, {windowSize.height() * 2 / 5}, Qt::Vertical);
    bool secondsOk = false;
    const double seconds = opt.value("search-time").toDouble(&secondsOk);
    if (!secondsOk || seconds <= 0) return usage("--search-time wants seconds, e.g. 10");
    sd->timeLimitBox()->setValue(seconds);
    if (opt.isSet("search-profile") && !sd->setProfileFile(opt.value("search-profile"))) {
      complain(sd->errorText());
      if (shot) return 1;
    }
    if (sd->start() && shot) {
      while (sd->isRunning()) QApplication::processEvents(QEventLoop::WaitForMoreEvents, 100);
    }
    if (opt.isSet("search-open") && !sd->isRunning() && sd->result()) sd->openAsDesign(0);
    if (!sd->errorText().isEmpty()) complain(sd->errorText());
  }
  if (opt.isSet("iterations") || opt.isSet("boundary")) {
    bool ok = false;
    const int k = opt.value("iterations").toInt(&ok);
    const auto b = ps::core::iterationBoundaryFromName(opt.value("boundary").toStdString());
    if (!ok || k < 1 || k > 16 || !b) return usage("--iterations wants 1..16 and --boundary sync or overlap");
    w.document()->setIterations(k, *b);
  }
  if (opt.value("layout") == QStringLiteral("slots")) w.setSlotLayout(true);
  if (opt.isSet("select") && !w.selectOpByName(opt.value("select")))
    complain(QStringLiteral("no op %1 in this schedule").arg(opt.value("select")));

  if (!applyStepOptions(opt, w)) return 2;

  if (!shot) {
    w.show();
    return QApplication::exec();
  }
  if (!opened) {
    complain(QStringLiteral("cannot open %1").arg(files.front()));
    return 1;
  }
  auto settle = [] {
    for (int i = 0; i < 5; ++i) QApplication::processEvents();
  };
  w.resize(windowSize);
  w.show();
  w.timeline()->zoomToFit();
  settle();
  w.resize(windowSize);  // again once laid out: the first layout may have widened it
  settle();
  w.timeline()->zoomToFit();  // again: a small window narrows its docks once shown
  QApplication::processEvents();
  if (opt.isSet("select")) w.selectOpByName(opt.value("select"));  // after the final layout
  QApplication::processEvents();
  QWidget* target = &w;
  if (opt.value("dialog") == QStringLiteral("run")) {
    target = ps::ui::RunDialog::showFor(&w);
    settle();
  } else if (opt.value("dialog") == QStringLiteral("profile")) {
    target = ps::ui::ProfileDialog::showFor(&w);
    settle();
  }
  if (!target->grab().save(opt.value("screenshot"))) {
    complain(QStringLiteral("cannot write %1").arg(opt.value("screenshot")));
    return 1;
  }
  return 0;
}
