// A hung run in the GUI (issue 27, item 4; docs/gui.md, "A run that hung"): the run's failure
// carries the engine's post-mortem (the wait cycle and each rank's stuck step, as
// `pipestudio-cli run --timeout` streams and stores it). Whether it arrives as run events (a
// GUI-launched run) or as a failed run stored in a session, the GUI opens the step-through where
// the ranks stopped, marks each device's stuck step with what it waits for, and names the cycle
// in the State and Diagnostics docks.
#include <QApplication>
#include <QDockWidget>
#include <QHelpEvent>
#include <QTemporaryDir>
#include <QToolTip>
#include <QtTest>

#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "docks/session_dock.h"
#include "panels/diagnostics_panel.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_controller.h"
#include "remote/run_dialog.h"
#include "run_test_util.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

using ps::test::oneFOneB;
using ps::test::op;

// 1F1B on 2 ranks, 2 micro-batches; device 0 runs F0 F1 B0 B1, device 1 runs F0 B0 F1 B1.
// Rank 0 ran F0@s0 (0-2 ms) and F1@s0 (2-4 ms), but what F0 sent never arrived: rank 1 waits in
// its step 0 (1F0) for 0F0, rank 0 in its step 2 (0B0) for 1B0, a cycle. The events as the CLI's
// launcher writes them when --timeout fires: the ops measured, every rank's `stuck` state, the
// error naming the cycle (its related ops the stuck steps), the early `finished`.
std::string hungRunEvents(const Schedule& plan) {
  std::string out;
  auto put = [&](const std::string& line) { out += line + "\n"; };
  RunStartedInfo s;
  s.protocolVersion = kRunEventProtocolVersion;
  s.schedule = "1f1b";
  s.devices = 2;
  s.stages = 2;
  s.microbatches = 2;
  s.iterations = 1;
  s.worldSize = 2;
  put(run_event::started(s));
  Timeline partial;
  partial.devices = 2;
  for (auto [step, o, a, b] :
       {std::tuple{0, op(OpKind::F, 0, 0), 0.0, 2.0}, {1, op(OpKind::F, 0, 1), 2.0, 4.0}}) {
    TimelineOp t{0, step, o, false, a, b};
    partial.ops.push_back(t);
    put(run_event::op(0, t, plan.opName(o), "F"));
  }
  std::vector<StuckDevice> states(2);
  states[0] = {0, StuckDevice::State::Waiting, 2, "0B0", 1, "1B0", 1, 3.0, {}};
  states[1] = {1, StuckDevice::State::Waiting, 0, "1F0", 0, "0F0", 0, 3.0, {}};
  const HangReport h = describeHang(states, 1, "rank");
  for (const auto& st : states) put(run_event::stuck(st));
  RunErrorEvent e{"engine.timeout", "rank 1 timed out after 3 s in 1F0; " + hangClause(h), 1, -1};
  e.related = h.stuck;
  put(run_event::error(e));
  partial.metrics = computeMetrics(partial);
  put(run_event::endedEarly(RunState::Failed, partial));
  return out;
}

Timeline readEvents(const std::string& events) {
  RunEventReader reader("test run");
  reader.feed(events);
  reader.end();
  return reader.timeline();
}

std::string cycleText() {
  const auto h = findHang(readEvents(hungRunEvents(oneFOneB(2, 2))).diagnostics);
  return h ? h->text : std::string();
}

}  // namespace

class HangGuiTest : public QObject {
  Q_OBJECT

  // What every way in must show: step mode at the hang, the stuck steps marked with what they
  // wait for, the cycle named in the State and Diagnostics docks.
  static void checkOpenedAtTheHang(MainWindow& w) {
    StepperController* sc = w.stepperController();
    QVERIFY(sc->engaged());
    QVERIFY(sc->stepsMeasured());
    const Stepper* s = sc->stepper();
    QVERIFY(s);
    QVERIFY(!s->timeline().complete);
    QCOMPARE(sc->position(), s->stopPosition());
    QCOMPARE(sc->time(), 4.0);  // F1@s0's end: the last progress any rank made
    QVERIFY(w.timeline()->playhead().has_value());
    QVERIFY(sc->hang().has_value());
    const QString cycle = QString::fromStdString(cycleText());
    QVERIFY(cycle.startsWith(QStringLiteral("rank 1 waits in 1F0 for 0F0 on rank 0")));

    // Each device's stuck step, the timed-out rank's first, with what it waits for.
    const auto& marks = w.timeline()->stepMarks();
    QCOMPARE(marks.stuck.size(), size_t{2});
    QCOMPARE(marks.stuck[0].device, 1);
    QCOMPARE(marks.stuck[0].op, op(OpKind::F, 1, 0));
    // The rank's own words (its `stuck` state), then what the measured timeline lacks there:
    // rank 1's input ran on rank 0 (what it sent never arrived), rank 0's never ran.
    QCOMPARE(marks.stuck[0].note,
             QStringLiteral("rank 1: waits in 1F0 for 0F0 on rank 0 (3.00 s) · in F0@s1"));
    QCOMPARE(marks.stuck[1].device, 0);
    QCOMPARE(marks.stuck[1].op, op(OpKind::B, 0, 0));
    QCOMPARE(marks.stuck[1].note, QStringLiteral("rank 0: waits in 0B0 for 1B0 on rank 1 (3.00 s) · B0@s0 "
                                                 "waits for B0@s1 on device 1 (never-ran)"));
    QCOMPARE(marks.hang, QStringLiteral("wait cycle: ") + cycle);
    QVERIFY(w.timeline()->selectedOp().has_value());
    QCOMPARE(*w.timeline()->selectedOp(), op(OpKind::F, 1, 0));

    // The State dock: hung here, the cycle, both devices stuck.
    auto* dock = w.findChild<QDockWidget*>(QStringLiteral("dock.state"));
    QVERIFY(dock && !dock->isHidden());
    StatePanel* sp = w.statePanel();
    QVERIFY2(sp->headerText().contains(QStringLiteral("Hung here:</b> rank 1 timed out after 3 s in 1F0")),
             qPrintable(sp->headerText()));
    QVERIFY2(sp->headerText().contains(QStringLiteral("Wait cycle:</b> ") + cycle.toHtmlEscaped()),
             qPrintable(sp->headerText()));
    QVERIFY2(sp->deviceItem(0)->text(1).startsWith(QStringLiteral("stuck (hung)")),
             qPrintable(sp->deviceItem(0)->text(1)));
    QVERIFY(sp->deviceItem(1)->text(1).startsWith(QStringLiteral("stuck (hung)")));
    QVERIFY2(StatePanel::rows(sp->deviceItem(1))
                 .contains(QStringLiteral("engine: rank 1: waits in 1F0 for 0F0 on rank 0 (3.00 s)")),
             qPrintable(StatePanel::rows(sp->deviceItem(1)).join('\n')));
    // The Diagnostics dock heads with the hang and the cycle.
    const QString head = w.diagnostics()->fullText(0);
    QVERIFY2(head.contains(QStringLiteral("The run hung at 4.00 ms")), qPrintable(head));
    QVERIFY2(head.contains(QStringLiteral("2 device(s) stuck")), qPrintable(head));
    QVERIFY2(head.contains(QStringLiteral("wait cycle: ") + cycle), qPrintable(head));
    QStringList rows;
    for (int i = 1; i < w.diagnostics()->topLevelItemCount(); ++i) rows << w.diagnostics()->fullText(i);
    QVERIFY2(rows.join('\n').contains(QStringLiteral("rank 1 timed out after 3 s in 1F0")),
             qPrintable(rows.join('\n')));
    QVERIFY2(rows.join('\n').contains(QStringLiteral("rank 0: waits in 0B0 for 1B0 on rank 1")),
             qPrintable(rows.join('\n')));

    // Stepping back before the stop is history, not the hang: no stuck marks there.
    sc->seekTime(1);
    QVERIFY(w.timeline()->stepMarks().stuck.empty());
    QVERIFY(!sp->headerText().contains(QStringLiteral("Hung here")));
    sc->goToEnd();
    QCOMPARE(w.timeline()->stepMarks().stuck.size(), size_t{2});
  }

 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(); }

  void aStreamedHangOpensAtTheStopWithTheStuckStepsMarked() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1400, 900));
    // What the Run dialog does with the stream of a run that ended (run_dialog.cpp).
    const Timeline t = readEvents(hungRunEvents(oneFOneB(2, 2)));
    QVERIFY(!t.complete);
    w.setMeasuredOverlay(t, QStringLiteral("run on local"));
    QVERIFY2(w.statusText().contains(QStringLiteral("The run hung: the playhead is where the ranks stopped")),
             qPrintable(w.statusText()));
    checkOpenedAtTheHang(w);

    // The tooltip of a stuck block names what it waits for and the cycle.
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TimelineView* view = w.timeline();
    view->ensureVisible({0, 2});
    const auto centre = view->blockCenter({0, 2});
    QVERIFY(centre.has_value());
    QHelpEvent help(QEvent::ToolTip, *centre, view->viewport()->mapToGlobal(*centre));
    QApplication::sendEvent(view->viewport(), &help);
    const QString tip = QToolTip::text();
    QVERIFY2(tip.contains(QStringLiteral("Stuck here when the run hung:")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("rank 0: waits in 0B0 for 1B0 on rank 1")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("wait cycle: rank 1 waits in 1F0")), qPrintable(tip));
    QToolTip::hideText();

    // A run that failed for another reason keeps the plain "blocked" story: no stuck marks.
    Timeline other = t;
    other.diagnostics = {makeError("engine.op-failed", "B0@s1 failed on device 1: CUDA out of memory")};
    w.setMeasuredOverlay(other, QStringLiteral("other run"));
    QVERIFY(!w.stepperController()->hang().has_value());
    QVERIFY(w.timeline()->stepMarks().stuck.empty());
    QVERIFY(!w.statePanel()->headerText().contains(QStringLiteral("Wait cycle")));
    // Leaving step mode forgets the hang.
    w.setMeasuredOverlay(t, QStringLiteral("run on local"));
    QVERIFY(w.stepperController()->hang().has_value());
    w.clearMeasuredOverlay();
    QVERIFY(!w.stepperController()->hang().has_value());
    QVERIFY(w.timeline()->stepMarks().stuck.empty());
  }

  void aRunStartedFromTheGuiThatHangsOpensAtTheHang() {
    // A fake CLI (our protocol) that streams the hung run's events as the launcher writes them
    // at --timeout, then exits 1: the Run dialog's controller reads them like a real run's.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const Schedule plan = oneFOneB(2, 2);
    QFile events(dir.filePath(QStringLiteral("events.jsonl")));
    QVERIFY(events.open(QIODevice::WriteOnly));
    events.write(QByteArray::fromStdString(hungRunEvents(plan)));
    events.close();
    const QString cli = runtest::writeScript(
        dir.path(), QStringLiteral("hanging-cli"),
        QStringLiteral("if [ \"$1\" = --version ]; then echo '%1'; exit 0; fi\n"
                       "while IFS= read -r line; do [ \"$line\" = '#%end-of-schedule' ] && break; done\n"
                       "cat '%2'\n"
                       "echo 'pipestudio-cli run: failed: rank 1 timed out after 3 s in 1F0' >&2\n"
                       "exit 1\n")
            .arg(QString::fromStdString(cliVersionLine("0.0.0")), events.fileName()));

    MainWindow w;
    ps::test::load(w, plan, defaultCostProfile(2), QSize(1400, 900));
    // A writable session is open: the dialog files the ended run there (no question asked).
    const QString session = dir.filePath(QStringLiteral("runs.session"));
    QVERIFY(ps::sessions::SessionStore::open(session.toStdString()).ok());
    QVERIFY(w.openSession(session));
    RunDialog* dialog = RunDialog::showFor(&w);
    RunController* c = dialog->controller();
    QSignalSpy done(c, &RunController::runFinished);
    RunRequest r = runtest::modelRequest(QStringLiteral("mlp"), QStringLiteral("layers=2,hidden=8"),
                                         {.processes = 2, .timeoutSeconds = 3});
    r.localCli = cli;
    QVERIFY(c->start(r, QString::fromStdString(printDsl(plan)), QStringLiteral("1f1b")));
    const RunOutcome o = runtest::waitForOutcome(*c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    // The last update of the overlay follows the end.
    QTRY_VERIFY_WITH_TIMEOUT(w.stepperController()->hang().has_value(), 5000);
    checkOpenedAtTheHang(w);
    dialog->close();

    // The GUI filed it (storeRunInSession, with the stream's per-device notes): opened from the
    // Session dock later, it opens the same.
    w.clearMeasuredOverlay();
    QVERIFY(!w.stepperController()->hang().has_value());
    auto store = ps::sessions::SessionStore::open(session.toStdString());
    QVERIFY(store.ok());
    auto runs = store->listRuns();
    QVERIFY(runs.ok());
    // The failed measured run (beside it, the prediction the dialog files with it).
    std::optional<qint64> measured;
    for (const auto& run : *runs)
      if (run.status == RunState::Failed) measured = run.id;
    QVERIFY(measured.has_value());
    w.sessionDock()->openRun(*measured);
    checkOpenedAtTheHang(w);
  }

  void aHungRunStoredInASessionOpensTheSame() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath(QStringLiteral("hang.psession")).toStdString();
    const Schedule plan = oneFOneB(2, 2);
    // As the CLI records it (run_session.cpp): the partial timeline, its error the hang's.
    ps::sessions::MeasuredRunRecording rec;
    rec.scheduleName = plan.name.empty() ? "1f1b" : plan.name;
    rec.pipeText = printDsl(plan);
    rec.measured = readEvents(hungRunEvents(plan));
    rec.measured.source = TimelineSource::Measured;
    rec.devices = 2;
    rec.target = "gloo";
    rec.status = RunState::Failed;
    rec.error = rec.measured.diagnostics.front().message;
    auto stored = ps::sessions::recordMeasuredRun(path, rec);
    QVERIFY2(stored.ok(), stored.ok() ? "" : stored.error().message.c_str());

    MainWindow w;
    ps::test::load(w, plan, defaultCostProfile(2), QSize(1400, 900));
    // What `pipestudio --run DB:ID` does.
    QVERIFY(w.openSession(QString::fromStdString(path), true));
    w.sessionDock()->openRun(stored->measuredRunId);
    QVERIFY(w.measuredOverlay()->active());
    QVERIFY2(w.statusText().contains(QStringLiteral("· hung: wait cycle: rank 1 waits in 1F0")),
             qPrintable(w.statusText()));
    checkOpenedAtTheHang(w);
  }
};

QTEST_MAIN(HangGuiTest)
#include "hang_gui_test.moc"
