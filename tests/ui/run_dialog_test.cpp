// The Run dialog's pure parts: the command line (local and ssh, shell quoting of paths with
// spaces and quotes), the stdin framing, the version check and the ssh failure messages; and
// the dialog itself (offscreen): widgets -> request, host list kept in settings, preview.
#include "remote/run_dialog.h"

#include <unistd.h>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QtTest>
#include <memory>

#include "docks/session_dock.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_controller.h"
#include "run_test_util.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"

using namespace ps::ui;

namespace {

RemoteHost gpuHost() {
  RemoteHost h;
  h.name = QStringLiteral("gpu1");
  h.host = QStringLiteral("gpu1.example.org");
  h.user = QStringLiteral("ana");
  h.port = 2222;
  h.identityFile = QStringLiteral("/home/ana/my keys/id_ed25519");
  h.cliPath = QStringLiteral("/opt/pipe studio/bin/pipestudio-cli");
  return h;
}

// What /bin/sh makes of a command string: its words, one per line (printf).
QStringList shellWords(const QString& command) {
  QProcess p;
  p.start(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("printf '%s\\n' ") + command});
  p.waitForFinished(5000);
  QString out = QString::fromUtf8(p.readAllStandardOutput());
  out.chop(1);
  return out.split(QLatin1Char('\n'));
}

}  // namespace

class RunDialogTest : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private Q_SLOTS:
  void initTestCase() {
    // The dialog of a main window keeps its choices in the user's settings: use a scratch place.
    QVERIFY(home_.isValid());
    qputenv("XDG_CONFIG_HOME", home_.path().toUtf8());
  }

  // A run ending while the open session is read-only: the question says so (not "no session
  // is open") and offers a copy of it, which is the user's to write.
  void storingWithAReadOnlySessionOffersACopy() {
    QTemporaryDir dir;
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    RunDialog d(nullptr, &s);
    const QString original = dir.filePath(QStringLiteral("example.session"));
    {
      auto store = ps::sessions::SessionStore::open(original.toStdString());
      QVERIFY(store);
      QVERIFY(store->addSchedule("pipeline", "devices 1\ndevice 0: F0 B0\n"));
    }
    std::unique_ptr<QMessageBox> readOnly(d.makeStorePrompt(original));
    QVERIFY2(readOnly->text().contains(QStringLiteral("example.session, is read-only")),
             qPrintable(readOnly->text()));
    QVERIFY(!readOnly->text().contains(QStringLiteral("No session is open")));
    auto* saveAs = readOnly->findChild<QPushButton*>(QStringLiteral("saveSessionAs"));
    QVERIFY(saveAs);
    QCOMPARE(saveAs->text(), QStringLiteral("Save Session &As…"));
    QCOMPARE(readOnly->defaultButton(), saveAs);
    std::unique_ptr<QMessageBox> none(d.makeStorePrompt(QString()));
    QVERIFY(none->text().startsWith(QStringLiteral("No session is open")));
    QVERIFY(!none->findChild<QPushButton*>(QStringLiteral("saveSessionAs")));
    // Every button has a mnemonic.
    for (auto* b : readOnly->findChildren<QPushButton*>())
      QVERIFY2(b->text().contains(QLatin1Char('&')), qPrintable(b->text()));

    // The copy of a file the user cannot write can be written.
    QFile::setPermissions(original, QFileDevice::ReadOwner | QFileDevice::ReadGroup);
    const QString copy = dir.filePath(QStringLiteral("mine.session"));
    QString error;
    QVERIFY2(RunDialog::copySession(original, copy, &error), qPrintable(error));
    QVERIFY(QFileInfo(copy).isWritable());
    ps::sessions::OpenOptions rw;
    rw.mode = ps::sessions::OpenMode::ReadWrite;
    auto store = ps::sessions::SessionStore::open(copy.toStdString(), rw);
    QVERIFY(store);
    QVERIFY(!store->readOnly());
    QVERIFY(store->addSchedule("another", "devices 1\ndevice 0: F0 B0\n"));
    QVERIFY(!RunDialog::copySession(copy, copy, &error));
  }

  // A pipe cuts stderr anywhere: a line split over two reads is one line of the log, and a
  // last line without its newline is logged when the child ends.
  void stderrLinesSurviveTheirChunks() {
    QTemporaryDir dir;
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    RunDialog d(nullptr, &s);
    d.appendStream(QStringLiteral("  data: batch.pt: samp"));
    d.appendStream(QStringLiteral("les 0..5 of 12\n  iteration: med"));
    QVERIFY2(d.logText().contains(QStringLiteral("data: batch.pt: samples 0..5 of 12")),
             qPrintable(d.logText()));
    QVERIFY(!d.logText().contains(QStringLiteral("iteration")));
    d.flushStream();
    QVERIFY2(d.logText().endsWith(QStringLiteral("iteration: med")), qPrintable(d.logText()));
  }

  void shellQuoteSurvivesTheShell() {
    const QStringList words{QStringLiteral("plain"),
                            QStringLiteral("with space"),
                            QStringLiteral("it's"),
                            QStringLiteral("$HOME"),
                            QStringLiteral("a;b|c`d`"),
                            QStringLiteral("\"q\""),
                            QStringLiteral("gpt:layers=2,hidden=8"),
                            QStringLiteral("")};
    QStringList quoted;
    for (const QString& w : words) quoted << shellQuote(w);
    QCOMPARE(shellWords(quoted.join(QLatin1Char(' '))), words);
    // Safe words stay readable.
    QCOMPARE(shellQuote(QStringLiteral("gpt:layers=2,hidden=8")), QStringLiteral("gpt:layers=2,hidden=8"));
    QCOMPARE(shellQuote(QStringLiteral("it's")), QStringLiteral("'it'\\''s'"));
  }

  void localCommandRunsTheCliDirectly() {
    RunRequest r = runtest::modelRequest(QStringLiteral("mlp"), QStringLiteral("layers=4,hidden=64"),
                                         {.device = QStringLiteral("cpu"),
                                          .processes = 2,
                                          .iterations = 5,
                                          .warmup = 1,
                                          .checkGradients = true,
                                          .timeoutSeconds = 30});
    r.localCli = QStringLiteral("/build dir/app/pipestudio-cli");
    const ProcessCommand c = buildRunCommand(r);
    QCOMPARE(c.program, r.localCli);  // no shell: spaces need no quoting
    QCOMPARE(c.arguments,
             QStringList({"run", "-", "--model", "mlp:layers=4,hidden=64", "--device", "cpu", "--nproc", "2",
                          "--iterations", "5", "--warmup", "1", "--check-gradients", "--timeout", "30",
                          "--events", "jsonl", "--cancel-on-eof"}));
    QCOMPARE(c.display().left(33), QStringLiteral("'/build dir/app/pipestudio-cli' r"));
    const ProcessCommand v = buildVersionCommand(r);
    QCOMPARE(v.program, r.localCli);
    QCOMPARE(v.arguments, QStringList{QStringLiteral("--version")});
  }

  void singleProcessAndDefaultsAddNoFlags() {
    RunRequest r;
    r.localCli = QStringLiteral("cli");
    r.modelParameters = QString();
    r.iterations = 1;
    const QStringList a = cliRunArguments(r);
    QVERIFY(!a.contains(QStringLiteral("--nproc")));
    QVERIFY(!a.contains(QStringLiteral("--warmup")));
    QVERIFY(!a.contains(QStringLiteral("--check-gradients")));
    QVERIFY(!a.contains(QStringLiteral("--microbatch-size")));
    QCOMPARE(a.at(3), QStringLiteral("gpt"));
  }

  void torchscriptSpec() {
    RunRequest r;
    r.model = QStringLiteral("torchscript");
    r.torchscriptFile = QStringLiteral("/models/my net.pt");
    QCOMPARE(r.modelSpec(), QStringLiteral("torchscript:path=/models/my net.pt"));
  }

  void sshCommandQuotesTheRemoteCommand() {
    RunRequest r;
    r.remote = gpuHost();
    r.remote->sshOptions = {QStringLiteral("UserKnownHostsFile=/tmp/k h")};
    r.model = QStringLiteral("torchscript");
    r.torchscriptFile = QStringLiteral("/data/it's a model.pt");
    r.device = QStringLiteral("cuda");
    r.connectTimeoutSeconds = 7;
    const ProcessCommand c = buildRunCommand(r);
    QCOMPARE(c.program, QStringLiteral("ssh"));
    const QStringList expectedPrefix{"-o", "BatchMode=yes",
                                     "-o", "ConnectTimeout=7",
                                     "-p", "2222",
                                     "-i", "/home/ana/my keys/id_ed25519",
                                     "-o", "IdentitiesOnly=yes",
                                     "-o", "UserKnownHostsFile=/tmp/k h",
                                     "--", "ana@gpu1.example.org"};
    QCOMPARE(c.arguments.mid(0, expectedPrefix.size()), expectedPrefix);
    QCOMPARE(c.arguments.size(), expectedPrefix.size() + 1);  // one remote command string
    // The remote shell splits it back into exactly the CLI's words.
    QStringList expected{r.remote->cliPath};
    expected << cliRunArguments(r);
    QCOMPARE(shellWords(c.arguments.last()), expected);
    QVERIFY(
        c.arguments.last().startsWith(QStringLiteral("'/opt/pipe studio/bin/pipestudio-cli' run - --model")));
  }

  void sshWithoutUserOrKeyAndHomeRelativeCli() {
    RunRequest r;
    RemoteHost h;
    h.host = QStringLiteral("10.0.0.5");
    h.cliPath = QStringLiteral("~/bin/pipestudio-cli");
    r.remote = h;
    const ProcessCommand v = buildVersionCommand(r);
    QVERIFY(!v.arguments.contains(QStringLiteral("-i")));
    QCOMPARE(v.arguments.at(v.arguments.size() - 3), QStringLiteral("--"));
    QCOMPARE(v.arguments.at(v.arguments.size() - 2), QStringLiteral("10.0.0.5"));
    // ~ stays expandable on the remote side.
    QCOMPARE(v.arguments.last(), QStringLiteral("\"$HOME\"/bin/pipestudio-cli --version"));
  }

  void stdinEndsWithTheMarker() {
    QCOMPARE(scheduleStdin(QStringLiteral("devices 1\ndevice 0: F0 B0")),
             QByteArray("devices 1\ndevice 0: F0 B0\n#%end-of-schedule\n"));
    QCOMPARE(scheduleStdin(QStringLiteral("a\n")), QByteArray("a\n#%end-of-schedule\n"));
  }

  void versionCheck() {
    RunRequest local;
    local.localCli = QStringLiteral("/x/pipestudio-cli");
    const QString ours = QString::fromStdString(ps::core::cliVersionLine(PIPESTUDIO_VERSION)) + "\n";
    QVERIFY(checkCliVersion(local, 0, ours, {}).isEmpty());
    // Another protocol: refused, both versions named.
    QString why =
        checkCliVersion(local, 0, QStringLiteral("pipestudio-cli 9.9.9 (run-event protocol 2)\n"), {});
    QVERIFY2(why.contains(QStringLiteral("9.9.9")) && why.contains(QStringLiteral("run-event protocol 2")),
             qPrintable(why));
    QVERIFY2(why.contains(QStringLiteral(PIPESTUDIO_VERSION)) &&
                 why.contains(QStringLiteral("run-event protocol 1")),
             qPrintable(why));
    // An older CLI without a protocol is refused too.
    why = checkCliVersion(local, 0, QStringLiteral("pipestudio-cli 0.0.1\n"), {});
    QVERIFY2(why.contains(QStringLiteral("no run-event protocol")), qPrintable(why));
    // Missing binary (the remote shell's 127).
    RunRequest remote;
    remote.remote = gpuHost();
    why = checkCliVersion(
        remote, 127, {},
        QStringLiteral("bash: /opt/pipe studio/bin/pipestudio-cli: No such file or directory\n"));
    QVERIFY2(why.startsWith(
                 QStringLiteral("pipestudio-cli not found on gpu1 at '/opt/pipe studio/bin/pipestudio-cli'")),
             qPrintable(why));
    // Something else answering.
    why = checkCliVersion(local, 0, QStringLiteral("Python 3.11\n"), {});
    QVERIFY2(why.contains(QStringLiteral("does not look like pipestudio-cli")), qPrintable(why));
  }

  void sshFailuresAreNamed() {
    RunRequest r;
    r.remote = gpuHost();
    QString why =
        describeSshFailure(r, 255, QStringLiteral("ana@gpu1.example.org: Permission denied (publickey).\n"));
    QVERIFY2(why.startsWith(QStringLiteral("authentication refused by ana@gpu1.example.org on port 2222")),
             qPrintable(why));
    QVERIFY(why.contains(QStringLiteral("Permission denied (publickey)")));
    why = describeSshFailure(
        r, 255, QStringLiteral("ssh: connect to host gpu1.example.org port 2222: Connection refused\n"));
    QVERIFY2(why.startsWith(QStringLiteral("cannot reach gpu1.example.org on port 2222")), qPrintable(why));
    why = describeSshFailure(r, 255, QStringLiteral("Host key verification failed.\n"));
    QVERIFY2(why.contains(QStringLiteral("host key")), qPrintable(why));
    QVERIFY(describeSshFailure(r, 1, QStringLiteral("Permission denied")).isEmpty());  // not ssh's exit
    RunRequest local;
    QVERIFY(describeSshFailure(local, 255, QStringLiteral("Permission denied")).isEmpty());
  }

  void hostsRoundTripThroughSettings() {
    QTemporaryDir dir;
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    RemoteHost a = gpuHost();
    a.sshOptions = {QStringLiteral("StrictHostKeyChecking=accept-new")};
    RemoteHost b;
    b.host = QStringLiteral("b");
    saveRemoteHosts(s, {a, b});
    QList<RemoteHost> back = loadRemoteHosts(s);
    QCOMPARE(back.size(), 2);
    QVERIFY(back[0] == a);
    QVERIFY(back[1] == b);
    saveRemoteHosts(s, {b});  // shrinking the list leaves no stale entries
    QCOMPARE(loadRemoteHosts(s).size(), 1);
  }

  void dialogBuildsTheRequestFromItsWidgets() {
    QTemporaryDir dir;
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    RunDialog d(nullptr, &s);
    d.setLocalCli(QStringLiteral("/usr/local/bin/pipestudio-cli"));
    d.setSchedule(QStringLiteral("tiny"), QStringLiteral("devices 2\n"), 2);
    d.addHost(gpuHost());
    RunRequest r = runtest::modelRequest(QStringLiteral("mlp"), QStringLiteral("layers=2,hidden=8"),
                                         {.device = QStringLiteral("cuda"),
                                          .processes = 2,
                                          .iterations = 4,
                                          .warmup = 2,
                                          .checkGradients = true,
                                          .timeoutSeconds = 90});
    r.remote = gpuHost();
    d.setRequest(r);
    const RunRequest got = d.request();
    QVERIFY(got.remote && *got.remote == gpuHost());
    QCOMPARE(got.modelSpec(), QStringLiteral("mlp:layers=2,hidden=8"));
    QCOMPARE(got.device, QStringLiteral("cuda"));
    QCOMPARE(got.processes, 2);  // one per device of the schedule
    QCOMPARE(got.iterations, 4);
    QCOMPARE(got.warmup, 2);
    QVERIFY(got.checkGradients);
    QCOMPARE(got.timeoutSeconds, 90.0);
    QVERIFY2(d.commandPreview().startsWith(QStringLiteral("ssh -o BatchMode=yes")),
             qPrintable(d.commandPreview()));
    QVERIFY(d.commandPreview().contains(QStringLiteral("ana@gpu1.example.org")));
    // The host list went to the settings; a new dialog sees it.
    RunDialog again(nullptr, &s);
    QCOMPARE(again.hosts().size(), 1);
    QCOMPARE(again.hosts().front().name, QStringLiteral("gpu1"));
  }

  // Training step and data file: the widgets set --optimizer/--lr/--inputs, each optimizer
  // brings its own default learning rate, the choices are kept; a real run through the dialog
  // steps every device (one OPTIMIZER op each) on the file's batch.
  void trainingStepAndDataFileReachTheRun() {
    QTemporaryDir dir;
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    const QString batch = QStringLiteral(PIPESTUDIO_TEST_DATA_DIR) + QStringLiteral("/inputs/mlp_inputs.pt");
    {
      RunDialog d(nullptr, &s);
      d.setLocalCli(QStringLiteral(PIPESTUDIO_CLI));
      d.setSchedule(QStringLiteral("tiny"), QString::fromUtf8(runtest::kTinyPipe), 2);
      auto* optimizer = d.findChild<QComboBox*>(QStringLiteral("optimizer"));
      auto* lr = d.findChild<QDoubleSpinBox*>(QStringLiteral("learningRate"));
      auto* inputs = d.findChild<QLineEdit*>(QStringLiteral("inputsFile"));
      if (!optimizer || !lr || !inputs)
        QFAIL("the run dialog lacks its optimizer, learning rate or inputs field");
      QVERIFY(!lr->isEnabled());
      QVERIFY(!d.commandPreview().contains(QStringLiteral("--optimizer")));
      optimizer->setCurrentIndex(optimizer->findData(QStringLiteral("adamw")));
      QVERIFY(lr->isEnabled());
      QCOMPARE(lr->value(), 0.001);
      optimizer->setCurrentIndex(optimizer->findData(QStringLiteral("sgd")));
      QCOMPARE(lr->value(), 0.01);
      lr->setValue(0.05);
      inputs->setText(batch);
      const QStringList a = cliRunArguments(d.request());
      QCOMPARE(a.mid(a.indexOf(QStringLiteral("--optimizer")), 4),
               (QStringList{"--optimizer", "sgd", "--lr", "0.05"}));
      QCOMPARE(a.mid(a.indexOf(QStringLiteral("--inputs")), 2), (QStringList{"--inputs", batch}));
      QVERIFY2(d.commandPreview().contains(QStringLiteral("--optimizer sgd --lr 0.05")),
               qPrintable(d.commandPreview()));
      RunRequest r = d.request();
      r.model = QStringLiteral("mlp");
      r.modelParameters = QStringLiteral("layers=2,hidden=16");
      r.iterations = 2;
      r.warmup = 0;
      d.setRequest(r);
      d.setSessionChooser([] { return QString(); });  // do not store
      QSignalSpy done(d.controller(), &RunController::runFinished);
      d.runButton()->click();
      QVERIFY(done.wait(120000));
      QVERIFY2(d.statusText().startsWith(QStringLiteral("finished")),
               qPrintable(d.statusText() + d.logText()));
      QVERIFY2(d.logText().contains(QStringLiteral("loss per iteration (sgd, lr 0.05)")),
               qPrintable(d.logText()));
      QVERIFY2(
          d.logText().contains(QStringLiteral("data: ") + batch + QStringLiteral(": samples 0..5 of 12")),
          qPrintable(d.logText()));
      QVERIFY2(d.logText().contains(QStringLiteral("14 ops")), qPrintable(d.logText()));  // 12 + 2 OPTIMIZER
    }
    RunDialog again(nullptr, &s);  // the choices were kept
    const RunRequest kept = again.request();
    QCOMPARE(kept.optimizer, QStringLiteral("sgd"));
    QCOMPARE(kept.learningRate, 0.05);
    QCOMPARE(kept.inputsFile, batch);
  }

  // Run > Run Schedule… end to end on this machine: the dialog runs the window's schedule,
  // the live timeline goes onto the overlay, the run lands in the session the user chose and
  // the Session dock shows it.
  void dialogRunsTheDocumentAndStoresIt() {
    const QString pipe = home_.filePath(QStringLiteral("tiny.pipe"));
    {
      QFile f(pipe);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(runtest::kTinyPipe);
    }
    MainWindow w;
    QVERIFY(w.openFile(pipe, true));
    w.resize(1400, 900);
    RunDialog* d = RunDialog::showFor(&w);
    QVERIFY(d);
    QCOMPARE(RunDialog::showFor(&w), d);  // one dialog per window
    QString session = home_.filePath(QStringLiteral("runs-%1.session").arg(::getpid()));
    int asked = 0;
    d->setSessionChooser([&]() -> QString {
      ++asked;
      return session;
    });
    d->setLocalCli(QStringLiteral(PIPESTUDIO_CLI));
    RunRequest r = d->request();
    r.remote.reset();
    r.model = QStringLiteral("mlp");
    r.modelParameters = QStringLiteral("layers=2,hidden=8");
    r.iterations = 2;
    r.warmup = 0;
    r.processes = 1;
    d->setRequest(r);
    QSignalSpy stored(d, &RunDialog::runStored);
    d->runButton()->click();
    QVERIFY(!d->runButton()->isEnabled());
    QVERIFY(d->cancelButton()->isEnabled());
    QVERIFY(stored.wait(120000));
    QCOMPARE(asked, 1);
    QCOMPARE(stored.first().at(0).toString(), session);
    QVERIFY2(d->statusText().startsWith(QStringLiteral("finished on this machine")),
             qPrintable(d->statusText()));
    QVERIFY2(d->statusText().contains(QStringLiteral("stored as run")), qPrintable(d->statusText()));
    QCOMPARE(d->progressBar()->value(), d->progressBar()->maximum());
    QVERIFY(d->runButton()->isEnabled());
    QVERIFY(!d->cancelButton()->isEnabled());
    QVERIFY(w.measuredOverlay()->active());
    QVERIFY(w.sessionDock()->hasSession());
    QCOMPARE(w.sessionDock()->sessionPath(), session);
    QVERIFY(w.sessionDock()->runsModel()->rowCount() >= 1);
    auto store = ps::sessions::SessionStore::open(session.toStdString());
    QVERIFY(store);
    auto run = store->run(stored.first().at(1).toLongLong());
    QVERIFY(run);
    QCOMPARE(run->summary.status, ps::core::RunState::Succeeded);
    QCOMPARE(run->summary.opCount, 12);
    if (qEnvironmentVariableIsSet("PS_RUN_DIALOG_SHOT")) {
      d->grab().save(qEnvironmentVariable("PS_RUN_DIALOG_SHOT"));
      w.grab().save(qEnvironmentVariable("PS_RUN_DIALOG_SHOT") + QStringLiteral(".window.png"));
    }
  }
};

QTEST_MAIN(RunDialogTest)
#include "run_dialog_test.moc"
