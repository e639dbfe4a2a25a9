// pipestudio: the schedule designer.
//   pipestudio [FILE.pipe|FILE.csv]
//   pipestudio --screenshot OUT.png [--size 1600x1000] [FILE]   (renders offscreen and exits)
//   pipestudio --screenshot OUT.png --dialog run [FILE]                (the Run dialog instead)
//   pipestudio --screenshot OUT.png --dialog profile [FILE]            (the Profile Model dialog)
//   pipestudio [--trace TRACE.json ...] [--align absolute|scaled] [FILE]  (measured overlay)
//   pipestudio [--iterations K] [--boundary sync|overlap] [FILE]           (K iterations)
//   pipestudio [--playhead MS | --step N] [--break OP@dD ...] ...          (step-through)
#include <QApplication>
#include <QCommandLineParser>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QIcon>
#include <QImage>
#include <QPixmap>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTimer>
#include <cstdio>
#include <cstring>

#include "shell/main_window.h"
#include "docks/search_dock.h"
#include "remote/profile_dialog.h"
#include "remote/run_dialog.h"
#include "docks/session_dock.h"
#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "document/schedule_document.h"
#include "timeline/timeline_view.h"

namespace {

// --break, --step and --playhead (docs/gui.md, "Step-through"); false on a malformed value.
bool applyStepOptions(const QCommandLineParser& parser, const QCommandLineOption& playhead,
                      const QCommandLineOption& stepN, const QCommandLineOption& breakAt, ps::ui::MainWindow& w) {
  ps::ui::StepperController* sc = w.stepperController();
  const auto selected = w.timeline()->selectedOp();
  for (const QString& b : parser.values(breakAt)) {
    const QString name = b.section(QLatin1Char(':'), 0, 0);
    if (!w.selectOpByName(name)) {
      std::fprintf(stderr, "pipestudio: --break: no op %s in this schedule\n", qPrintable(name));
      return false;
    }
    auto ref = w.timeline()->selection();
    bool ok = true;
    const int device = b.contains(QLatin1Char(':')) ? b.section(QLatin1Char(':'), 1).toInt(&ok) : ref->device;
    if (!ok) {
      std::fprintf(stderr, "pipestudio: --break wants OP or OP:DEVICE, e.g. B3@s1:1\n");
      return false;
    }
    sc->toggleBreakpoint(device, *w.timeline()->selectedOp());
    w.timeline()->selectOp(selected, false);
  }
  if (parser.isSet(stepN)) {
    bool ok = false;
    const qlonglong n = parser.value(stepN).toLongLong(&ok);
    if (!ok || n < 0) {
      std::fprintf(stderr, "pipestudio: --step wants an event count, e.g. 12\n");
      return false;
    }
    sc->seekPosition(static_cast<size_t>(n));
    w.showStateDock();
  }
  if (parser.isSet(playhead)) {
    bool ok = false;
    const double ms = parser.value(playhead).toDouble(&ok);
    if (!ok) {
      std::fprintf(stderr, "pipestudio: --playhead wants milliseconds, e.g. 12.5\n");
      return false;
    }
    sc->seekTime(ms);
    w.showStateDock();
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The screenshot mode needs no display: pick the offscreen platform before Qt starts.
  bool screenshot = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0) screenshot = true;
  if (screenshot && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");

  QApplication app(argc, argv);
  Q_INIT_RESOURCE(pipestudio);  // the icons live in the ps_ui static library
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/pipestudio.svg")));
  QApplication::setApplicationName(QStringLiteral("PipeStudio"));
  QApplication::setOrganizationName(QStringLiteral("PipeStudio"));
  QApplication::setApplicationVersion(QStringLiteral(PIPESTUDIO_VERSION));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Design, check and simulate pipeline-parallel schedules."));
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption shot(QStringLiteral("screenshot"),
                          QStringLiteral("Render the main window to OUT.png and exit."),
                          QStringLiteral("OUT.png"));
  QCommandLineOption size(QStringLiteral("size"),
                          QStringLiteral("Window size for --screenshot (default 1600x1000)."),
                          QStringLiteral("WxH"), QStringLiteral("1600x1000"));
  QCommandLineOption select(QStringLiteral("select"),
                            QStringLiteral("Select an op, e.g. B3@s1 (shows its dependency arrows)."),
                            QStringLiteral("OP"));
  QCommandLineOption iterations(QStringLiteral("iterations"),
                                QStringLiteral("Show K training iterations back to back (1..16, default 1)."),
                                QStringLiteral("K"), QStringLiteral("1"));
  QCommandLineOption boundary(QStringLiteral("boundary"),
                              QStringLiteral("Iteration boundary with --iterations: sync or overlap (default)."),
                              QStringLiteral("sync|overlap"), QStringLiteral("overlap"));
  QCommandLineOption layout(QStringLiteral("layout"),
                            QStringLiteral("Timeline layout: time (default) or slots."),
                            QStringLiteral("time|slots"), QStringLiteral("time"));
  QCommandLineOption palette(QStringLiteral("palette"),
                             QStringLiteral("Colour scheme: system (default), light or dark."),
                             QStringLiteral("system|light|dark"), QStringLiteral("system"));
  parser.addOption(shot);
  parser.addOption(size);
  parser.addOption(select);
  parser.addOption(layout);
  parser.addOption(iterations);
  parser.addOption(boundary);
  parser.addOption(palette);
  QCommandLineOption session(QStringLiteral("session"),
                             QStringLiteral("A session file to show in the Session dock (default: the bundled example, read-only)."),
                             QStringLiteral("FILE"));
  parser.addOption(session);
  QCommandLineOption trace(QStringLiteral("trace"),
                           QStringLiteral("A measured Chrome trace to lay over the plan (repeat: one file per rank)."),
                           QStringLiteral("TRACE.json"));
  QCommandLineOption align(QStringLiteral("align"),
                           QStringLiteral("Measured overlay alignment: absolute (default) or scaled to the planned makespan."),
                           QStringLiteral("absolute|scaled"), QStringLiteral("absolute"));
  QCommandLineOption run(QStringLiteral("run"),
                         QStringLiteral("Open run ID of session DB (read-only) and lay its timeline over its schedule."),
                         QStringLiteral("DB:ID"));
  parser.addOption(trace);
  parser.addOption(run);
  parser.addOption(align);
  QCommandLineOption playhead(QStringLiteral("playhead"),
                              QStringLiteral("Step-through: put the playhead at MS (of the stepped timeline) and show the State dock."),
                              QStringLiteral("MS"));
  QCommandLineOption stepN(QStringLiteral("step"),
                           QStringLiteral("Step-through: put the playhead after event N (0 = before the first)."),
                           QStringLiteral("N"));
  QCommandLineOption breakAt(QStringLiteral("break"),
                             QStringLiteral("Step-through: a breakpoint when a device starts OP (e.g. B3@s1, or B3@s1:2 for device 2); repeatable."),
                             QStringLiteral("OP[:DEVICE]"));
  parser.addOption(playhead);
  parser.addOption(stepN);
  parser.addOption(breakAt);
  QCommandLineOption dockOpt(QStringLiteral("dock"),
                             QStringLiteral("Raise a dock at start: search (runs a search with the document's sizes first)."),
                             QStringLiteral("search"));
  QCommandLineOption searchProfile(QStringLiteral("search-profile"),
                                   QStringLiteral("Cost profile JSON for --dock search (default: the document's)."),
                                   QStringLiteral("P.json"));
  QCommandLineOption searchTime(QStringLiteral("search-time"),
                                QStringLiteral("Time limit in seconds for --dock search (default 10)."),
                                QStringLiteral("S"), QStringLiteral("10"));
  QCommandLineOption searchOpen(QStringLiteral("search-open"),
                                QStringLiteral("With --dock search: open the best candidate as the design (undoable)."));
  parser.addOption(searchOpen);
  parser.addOption(dockOpt);
  parser.addOption(searchProfile);
  parser.addOption(searchTime);
  QCommandLineOption dialog(QStringLiteral("dialog"),
                            QStringLiteral("With --screenshot: render this dialog instead of the main window (run, profile)."),
                            QStringLiteral("run"));
  parser.addOption(dialog);
  parser.addPositionalArgument(QStringLiteral("file"),
                               QStringLiteral("A .pipe or PyTorch .csv schedule to open."),
                               QStringLiteral("[FILE]"));
  parser.process(app);

  QSize windowSize(1600, 1000);
  const auto m = QRegularExpression(QStringLiteral("^(\\d+)x(\\d+)$")).match(parser.value(size));
  if (!m.hasMatch()) {
    std::fprintf(stderr, "pipestudio: --size wants WxH, e.g. 1600x1000\n");
    return 2;
  }
  windowSize = QSize(m.captured(1).toInt(), m.captured(2).toInt());

  if (parser.value(palette) == QStringLiteral("dark") || parser.value(palette) == QStringLiteral("light")) {
    QApplication::setStyle(QStringLiteral("Fusion"));
    QApplication::setPalette(parser.value(palette) == QStringLiteral("dark") ? ps::ui::darkPalette()
                                                                             : ps::ui::lightPalette());
  }

  // Screenshots neither read nor write the user's window layout and recent files.
  if (parser.isSet(shot)) QStandardPaths::setTestModeEnabled(true);

  ps::ui::MainWindow w;
  const QStringList files = parser.positionalArguments();
  bool opened = true;
  if (!files.isEmpty()) opened = w.openFile(files.front(), parser.isSet(shot));
  if (files.isEmpty() || (!opened && !parser.isSet(shot))) w.openDefault();  // something to look at

  const QString exampleSession = ps::ui::resourcesDir() + QStringLiteral("/examples/example.session");
  if (parser.isSet(session)) {
    if (!w.openSession(parser.value(session)))
      std::fprintf(stderr, "pipestudio: %s\n", qPrintable(w.statusText()));
  } else if (!parser.isSet(shot) && QFileInfo(exampleSession).isFile()) {
    w.openSession(exampleSession, true);
  }
  if (parser.value(align) == QStringLiteral("scaled")) w.setOverlayScaled(true);
  if (parser.isSet(run)) {
    const QString v = parser.value(run);
    const int colon = v.lastIndexOf(QLatin1Char(':'));
    bool ok = false;
    const qint64 id = colon > 0 ? v.mid(colon + 1).toLongLong(&ok) : 0;
    if (!ok) {
      std::fprintf(stderr, "pipestudio: --run wants DB:ID, e.g. runs.session:3\n");
      return 2;
    }
    if (!w.openSession(v.left(colon), true) || (w.sessionDock()->openRun(id), !w.timeline()->hasOverlay())) {
      std::fprintf(stderr, "pipestudio: %s\n", qPrintable(w.statusText()));
      if (parser.isSet(shot)) return 1;
    }
  }
  if (parser.isSet(trace) && !w.openTraces(parser.values(trace), parser.isSet(shot))) {
    std::fprintf(stderr, "pipestudio: %s\n", qPrintable(w.statusText()));
    if (parser.isSet(shot)) return 1;
  }
  if (parser.isSet(dockOpt)) {
    if (parser.value(dockOpt) != QStringLiteral("search")) {
      std::fprintf(stderr, "pipestudio: --dock takes: search\n");
      return 2;
    }
    // Search dock (docs/gui.md): a finished search to look at.
    ps::ui::SearchDock* sd = w.searchDock();
    w.resize(windowSize);
    w.showSearchDock();
    w.resizeDocks({sd}, {windowSize.height() * 2 / 5}, Qt::Vertical);
    bool secondsOk = false;
    const double seconds = parser.value(searchTime).toDouble(&secondsOk);
    if (!secondsOk || seconds <= 0) {
      std::fprintf(stderr, "pipestudio: --search-time wants seconds, e.g. 10\n");
      return 2;
    }
    sd->timeLimitBox()->setValue(seconds);
    if (parser.isSet(searchProfile) && !sd->setProfileFile(parser.value(searchProfile))) {
      std::fprintf(stderr, "pipestudio: %s\n", qPrintable(sd->errorText()));
      if (parser.isSet(shot)) return 1;
    }
    if (sd->start() && parser.isSet(shot)) {
      while (sd->isRunning()) QApplication::processEvents(QEventLoop::WaitForMoreEvents, 100);
    }
    if (parser.isSet(searchOpen) && !sd->isRunning() && sd->result()) sd->openAsDesign(0);
    if (!sd->errorText().isEmpty()) std::fprintf(stderr, "pipestudio: %s\n", qPrintable(sd->errorText()));
  }
  if (parser.isSet(iterations) || parser.isSet(boundary)) {
    bool ok = false;
    const int k = parser.value(iterations).toInt(&ok);
    const auto b = ps::core::iterationBoundaryFromName(parser.value(boundary).toStdString());
    if (!ok || k < 1 || k > 16 || !b) {
      std::fprintf(stderr, "pipestudio: --iterations wants 1..16 and --boundary sync or overlap\n");
      return 2;
    }
    w.document()->setIterations(k, *b);
  }
  if (parser.value(layout) == QStringLiteral("slots")) w.setSlotLayout(true);
  if (parser.isSet(select) && !w.selectOpByName(parser.value(select)))
    std::fprintf(stderr, "pipestudio: no op %s in this schedule\n", qPrintable(parser.value(select)));

  if (!applyStepOptions(parser, playhead, stepN, breakAt, w)) return 2;

  if (parser.isSet(shot)) {
    if (!opened) {
      std::fprintf(stderr, "pipestudio: cannot open %s\n", qPrintable(files.front()));
      return 1;
    }
    w.resize(windowSize);
    w.show();
    w.timeline()->zoomToFit();
    for (int i = 0; i < 5; ++i) QApplication::processEvents();
    w.resize(windowSize);  // again once laid out: the first layout may have widened it
    for (int i = 0; i < 5; ++i) QApplication::processEvents();
    w.timeline()->zoomToFit();  // again: a small window narrows its docks once shown
    QApplication::processEvents();
    if (parser.isSet(select)) w.selectOpByName(parser.value(select));  // after the final layout
    QApplication::processEvents();
    const QString out = parser.value(shot);
    QWidget* target = &w;
    if (parser.value(dialog) == QStringLiteral("run")) {
      target = ps::ui::RunDialog::showFor(&w);
      for (int i = 0; i < 5; ++i) QApplication::processEvents();
    } else if (parser.value(dialog) == QStringLiteral("profile")) {
      target = ps::ui::ProfileDialog::showFor(&w);
      for (int i = 0; i < 5; ++i) QApplication::processEvents();
    }
    if (!target->grab().save(out)) {
      std::fprintf(stderr, "pipestudio: cannot write %s\n", qPrintable(out));
      return 1;
    }
    return 0;
  }
  w.show();
  return QApplication::exec();
}
