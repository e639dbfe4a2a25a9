// Run > Profile Model…: the command line (local and ssh), a real local profile of a tiny model
// through the dialog of a main window (the document's profile replaced as one undoable edit,
// the profile stored in the open session as "profiled", Save As), a failing CLI (clear
// message, document unchanged), and cancel (the process really ends).
#include "remote/profile_dialog.h"

#include <unistd.h>

#include <QComboBox>
#include <QFile>
#include <QMenuBar>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QtTest>

#include "docks/session_dock.h"
#include "document/schedule_document.h"
#include "pipestudio/sessions/session_store.h"
#include "run_test_util.h"
#include "shell/main_window.h"

using namespace ps::ui;

namespace {

ProfileRequest tinyRequest(const QString& cli) {
  ProfileRequest r;
  r.target.localCli = cli;
  r.target.model = QStringLiteral("mlp");
  r.target.modelParameters = QStringLiteral("layers=2,hidden=16");
  r.target.device = QStringLiteral("cpu");
  r.workers = 1;
  r.repetitions = 2;
  r.warmup = 0;
  return r;
}

}  // namespace

class ProfileDialogTest : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

  QString writePipe() {
    QString pipe = home_.filePath(QStringLiteral("tiny-%1.pipe").arg(::getpid()));
    QFile f(pipe);
    if (f.open(QIODevice::WriteOnly)) f.write(runtest::kTinyPipe);
    return pipe;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(home_.isValid());
    qputenv("XDG_CONFIG_HOME", home_.path().toUtf8());  // the dialog's QSettings: a scratch place
  }

  void localCommandLineIsTheCliWithProfileArguments() {
    ProfileRequest r = tinyRequest(QStringLiteral("/opt/ps/pipestudio-cli"));
    r.target.microbatchSize = 4;
    r.workers = 3;
    const ProcessCommand c = buildProfileCommand(r);
    QCOMPARE(c.program, QStringLiteral("/opt/ps/pipestudio-cli"));
    QCOMPARE(c.arguments,
             (QStringList{"profile", "--model", "mlp:layers=2,hidden=16", "--microbatch-size", "4",
                          "--workers", "3", "--repetitions", "2", "--warmup", "0", "-o", "-"}));
    r.target.microbatchSize = 0;  // the CLI's default: no flag
    QVERIFY(!buildProfileCommand(r).arguments.contains(QStringLiteral("--microbatch-size")));
  }

  void optimizerChoiceTimesTheStepsAndRoundTrips() {
    ProfileRequest r = tinyRequest(QStringLiteral("/opt/ps/pipestudio-cli"));
    QVERIFY(!buildProfileCommand(r).arguments.contains(QStringLiteral("--optimizer")));
    r.optimizer = QStringLiteral("adamw");
    const QStringList a = buildProfileCommand(r).arguments;
    QCOMPARE(a.mid(a.indexOf(QStringLiteral("--optimizer")), 2), (QStringList{"--optimizer", "adamw"}));
    QCOMPARE(a.mid(a.size() - 2), (QStringList{"-o", "-"}));
    // The dialog: the combo sets it, the preview shows it, setRequest restores it.
    ProfileDialog d;
    auto* combo = d.findChild<QComboBox*>(QStringLiteral("optimizer"));
    QVERIFY(combo);
    d.setRequest(tinyRequest(QStringLiteral("/opt/ps/pipestudio-cli")));
    QCOMPARE(d.request().optimizer, QString());
    combo->setCurrentIndex(combo->findData(QStringLiteral("sgd")));
    QCOMPARE(d.request().optimizer, QStringLiteral("sgd"));
    QVERIFY2(d.commandPreview().contains(QStringLiteral("--optimizer sgd")), qPrintable(d.commandPreview()));
    d.setRequest(r);
    QCOMPARE(combo->currentData().toString(), QStringLiteral("adamw"));
  }

  void sshCommandLineQuotesTheRemoteCommand() {
    ProfileRequest r = tinyRequest(QStringLiteral("/local/cli"));
    RemoteHost h;
    h.host = QStringLiteral("gpu1.example.org");
    h.user = QStringLiteral("ana");
    h.port = 2222;
    h.identityFile = QStringLiteral("/k/id");
    h.cliPath = QStringLiteral("/opt/pipe studio/pipestudio-cli");
    r.target.remote = h;
    r.target.connectTimeoutSeconds = 7;
    const ProcessCommand c = buildProfileCommand(r);
    QCOMPARE(c.program, QStringLiteral("ssh"));
    QCOMPARE(c.arguments.mid(0, 12),
             (QStringList{"-o", "BatchMode=yes", "-o", "ConnectTimeout=7", "-p", "2222", "-i", "/k/id", "-o",
                          "IdentitiesOnly=yes", "--", "ana@gpu1.example.org"}));
    QCOMPARE(c.arguments.size(), 13);
    // The remote command: sh -c with a watcher script that runs exactly this CLI command.
    const QString remote = c.arguments.last();
    QVERIFY(remote.startsWith(QStringLiteral("sh -c '")));
    QProcess sh;  // what the remote login shell makes of it: sh, -c, one script
    sh.start(QStringLiteral("sh"),
             {QStringLiteral("-c"), QStringLiteral("for w in ") + remote.mid(6) +
                                        QStringLiteral("; do printf '%s\\n' \"$w\"; done")});
    QVERIFY(sh.waitForFinished(5000));
    const QString script = QString::fromUtf8(sh.readAllStandardOutput()).trimmed();
    QVERIFY2(script.contains(
                 QStringLiteral("'/opt/pipe studio/pipestudio-cli' profile --model mlp:layers=2,hidden=16 "
                                "--workers 1 --repetitions 2 --warmup 0 -o - </dev/null")),
             qPrintable(script));
  }

  // The remote side of a profile, run here by sh as sshd would: the CLI's output and exit
  // status come through; the end of stdin (Cancel, a dropped connection) kills the CLI.
  void remoteScriptPassesOutputAndStopsTheCliAtEndOfInput() {
    QTemporaryDir bin;
    const QString pidFile = bin.filePath(QStringLiteral("pid"));
    const QString ok = runtest::writeScript(bin.path(), QStringLiteral("ok-cli"),
                                            QStringLiteral("echo \"$*\"\necho oops >&2\nexit 3\n"));
    const QString slow = runtest::writeScript(bin.path(), QStringLiteral("slow-cli"),
                                              QStringLiteral("echo $$ > '%1'\nexec sleep 60\n").arg(pidFile));
    ProfileRequest r = tinyRequest(QStringLiteral("/local/cli"));
    RemoteHost h;
    h.host = QStringLiteral("gpu1");
    h.cliPath = ok;
    r.target.remote = h;
    auto remoteShell = [](const ProfileRequest& req) {
      return QStringList{QStringLiteral("-c"), buildProfileCommand(req).arguments.last()};
    };
    QProcess p;
    p.start(QStringLiteral("sh"), remoteShell(r));
    QVERIFY(p.waitForStarted(5000));
    QVERIFY(p.waitForFinished(10000));  // ends by itself with stdin still open
    QCOMPARE(p.exitCode(), 3);
    QVERIFY(p.readAllStandardOutput().startsWith("profile --model mlp:layers=2,hidden=16"));
    QCOMPARE(p.readAllStandardError().trimmed(), QByteArray("oops"));

    r.target.remote->cliPath = slow;
    QProcess q;
    q.start(QStringLiteral("sh"), remoteShell(r));
    QVERIFY(q.waitForStarted(5000));
    QTRY_VERIFY_WITH_TIMEOUT(QFile(pidFile).size() > 0, 5000);
    QFile f(pidFile);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const qint64 cliPid = f.readAll().trimmed().toLongLong();
    QVERIFY(cliPid > 0);
    QVERIFY(!runtest::processGone(cliPid));
    q.closeWriteChannel();
    QVERIFY(q.waitForFinished(10000));
    QTRY_VERIFY_WITH_TIMEOUT(runtest::processGone(cliPid), 5000);
  }

  void failureMessagesNameTheCause() {
    ProfileRequest r = tinyRequest(QStringLiteral("/x/cli"));
    QVERIFY(describeProfileFailure(r, 2, QStringLiteral("unknown model 'mlq'"))
                .contains(QStringLiteral("bad model spec")));
    QVERIFY(describeProfileFailure(r, 127, {}).contains(QStringLiteral("not found")));
    RemoteHost h;
    h.host = QStringLiteral("gpu1");
    r.target.remote = h;
    const QString ssh = describeProfileFailure(
        r, 255, QStringLiteral("ssh: connect to host gpu1 port 22: Connection refused"));
    QVERIFY2(ssh.contains(QStringLiteral("cannot reach gpu1")), qPrintable(ssh));
  }

  void runMenuOpensTheDialogWithTheSharedHostList() {
    RemoteHost h;
    h.name = QStringLiteral("gpu-%1").arg(::getpid());
    h.host = QStringLiteral("gpu1.example.org");
    {
      QSettings s(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));  // the Run dialog's list
      saveRemoteHosts(s, {h});
    }
    MainWindow w;
    QVERIFY(w.openFile(writePipe(), true));
    QAction* action = nullptr;
    for (QAction* menu : w.menuBar()->actions())
      if (menu->menu() && menu->text() == QStringLiteral("&Run"))
        for (QAction* a : menu->menu()->actions())
          if (a->text() == QStringLiteral("&Profile Model…")) action = a;
    if (!action) QFAIL("no Run > Profile Model… action");
    action->trigger();
    auto* d = w.findChild<ProfileDialog*>(QStringLiteral("profileDialog"));
    QVERIFY(d);
    QVERIFY(d->isVisible());
    auto* target = d->findChild<QComboBox*>(QStringLiteral("target"));
    QVERIFY(target);
    QCOMPARE(target->count(), 2);  // this machine + the saved host
    QVERIFY(target->itemText(1).startsWith(h.name));
    target->setCurrentIndex(1);
    QVERIFY(d->request().target.remote.has_value());
    QCOMPARE(buildProfileCommand(d->request()).program, QStringLiteral("ssh"));
    QVERIFY(d->commandPreview().startsWith(QStringLiteral("ssh ")));
    QSettings s(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
    saveRemoteHosts(s, {});
  }

  void dialogProfilesATinyModelIntoTheDocumentAndSession() {
    MainWindow w;
    QVERIFY(w.openFile(writePipe(), true));
    ScheduleDocument* doc = w.document();
    const ps::core::CostProfile before = doc->profile();
    const int undoBefore = doc->undoStack()->count();
    const QString session = home_.filePath(QStringLiteral("profiles-%1.session").arg(::getpid()));
    QVERIFY(ps::sessions::SessionStore::open(session.toStdString()));  // creates it
    QVERIFY2(w.sessionDock()->openSession(session), qPrintable(w.sessionDock()->errorText()));
    const int profilesBefore = w.sessionDock()->profilesModel()->rowCount();

    ProfileDialog* d = ProfileDialog::showFor(&w);
    QCOMPARE(ProfileDialog::showFor(&w), d);  // one dialog per window
    QCOMPARE(d->request().workers, 2);        // the schedule's device count
    ProfileRequest r = tinyRequest(QStringLiteral(PIPESTUDIO_CLI));
    d->setRequest(r);
    QCOMPARE(d->request().workers, 1);
    QVERIFY(d->commandPreview().contains(QStringLiteral("profile --model mlp:layers=2,hidden=16")));
    QSignalSpy applied(d, &ProfileDialog::profileApplied);
    QSignalSpy finished(d->controller(), &ProfileController::finished);
    d->profileButton()->click();
    QVERIFY(d->controller()->isActive());
    QVERIFY(!d->profileButton()->isEnabled());
    QVERIFY(d->cancelButton()->isEnabled());
    QCOMPARE(d->progressBar()->maximum(), 0);  // busy
    QVERIFY(finished.wait(120000));
    QVERIFY2(applied.count() == 1, qPrintable(d->statusText() + "\n" + d->logText()));

    // One layer per model layer (mlp: `layers` Linear+GELU blocks), measured times.
    const ps::core::CostProfile& p = doc->profile();
    QCOMPARE(p.layers.size(), size_t{2});
    for (const auto& l : p.layers) {
      QVERIFY2(l.forwardMs > 0, l.name.c_str());
      QVERIFY2(l.backwardInputMs > 0, l.name.c_str());
      QVERIFY(l.weightBytes > 0);
    }
    QCOMPARE(doc->undoStack()->count(), undoBefore + 1);
    QVERIFY2(d->statusText().startsWith(
                 QStringLiteral("Profiled mlp:layers=2,hidden=16 on this machine: 2 layers")),
             qPrintable(d->statusText()));
    QVERIFY(d->logText().contains(QString::fromStdString(p.layers[1].name)));  // the layer table
    QVERIFY(d->saveButton()->isEnabled());
    QVERIFY(d->profileButton()->isEnabled());
    if (const QByteArray shot = qgetenv("PS_PROFILE_DIALOG_SHOT");
        !shot.isEmpty()) {  // docs/gui.md's picture
      for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();
      QVERIFY(d->grab().save(QString::fromLocal8Bit(shot)));
    }
    QVERIFY(!d->cancelButton()->isEnabled());

    // Stored in the session as profiled.
    QVERIFY(d->lastStoredProfile() > 0);
    {
      auto store =
          ps::sessions::SessionStore::open(session.toStdString(), {ps::sessions::OpenMode::ReadOnly});
      QVERIFY(store);
      auto list = store->listProfiles();
      QVERIFY(list);
      bool found = false;
      for (const auto& info : *list)
        if (info.id == d->lastStoredProfile()) {
          found = true;
          QCOMPARE(info.source, ps::sessions::ProfileSource::Profiled);
        }
      QVERIFY(found);
    }
    // The window follows the dialog: its status line and its Session dock show the profile.
    QVERIFY2(w.statusBar()->currentMessage().startsWith(
                 QStringLiteral("Profiled mlp:layers=2,hidden=16 on this machine")),
             qPrintable(w.statusBar()->currentMessage()));
    QCOMPARE(w.sessionDock()->profilesModel()->rowCount(), profilesBefore + 1);

    // Save As writes the JSON, which loads back to the same layers.
    const QString json = home_.filePath(QStringLiteral("p-%1.json").arg(::getpid()));
    QVERIFY(d->saveJson(json));
    QFile f(json);
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto back = ps::core::parseCostProfile(f.readAll().toStdString());
    QVERIFY(back);
    QCOMPARE(back->layers.size(), size_t{2});

    // Undo restores the previous profile exactly.
    doc->undoStack()->undo();
    QCOMPARE(doc->profile().layers.size(), before.layers.size());
    for (size_t i = 0; i < before.layers.size(); ++i) {
      QCOMPARE(doc->profile().layers[i].name, before.layers[i].name);
      QCOMPARE(doc->profile().layers[i].forwardMs, before.layers[i].forwardMs);
    }
    w.sessionDock()->closeSession();
    QFile::remove(session);
  }

  void failingCliShowsStderrAndLeavesTheDocument() {
    MainWindow w;
    QVERIFY(w.openFile(writePipe(), true));
    QTemporaryDir bin;
    const QString fake = runtest::writeScript(bin.path(), QStringLiteral("pipestudio-cli"),
                                              QStringLiteral("echo \"unknown model 'mlq'\" >&2\nexit 2\n"));
    const int undoBefore = w.document()->undoStack()->count();
    const size_t layersBefore = w.document()->profile().layers.size();
    ProfileDialog* d = ProfileDialog::showFor(&w);
    ProfileRequest r = tinyRequest(fake);
    r.target.modelParameters.clear();
    r.target.model = QStringLiteral("mlp");
    d->setRequest(r);
    QSignalSpy finished(d->controller(), &ProfileController::finished);
    d->startProfile();
    QVERIFY(finished.wait(20000));
    QVERIFY2(d->statusText().contains(QStringLiteral("Profiling failed")), qPrintable(d->statusText()));
    QVERIFY2(d->statusText().contains(QStringLiteral("unknown model 'mlq'")), qPrintable(d->statusText()));
    QVERIFY(d->logText().contains(QStringLiteral("unknown model 'mlq'")));
    QCOMPARE(w.document()->undoStack()->count(), undoBefore);
    QCOMPARE(w.document()->profile().layers.size(), layersBefore);
    QVERIFY(!d->saveButton()->isEnabled());

    // A missing binary is named as such.
    d->setLocalCli(bin.filePath(QStringLiteral("no-such-cli")));
    d->startProfile();
    QVERIFY(finished.wait(20000));
    QVERIFY2(d->statusText().contains(QStringLiteral("not found")), qPrintable(d->statusText()));
    QCOMPARE(w.document()->undoStack()->count(), undoBefore);
  }

  void cancelEndsTheProcess() {
    QTemporaryDir bin;
    const QString fake =
        runtest::writeScript(bin.path(), QStringLiteral("pipestudio-cli"), QStringLiteral("exec sleep 60\n"));
    QTemporaryDir dir;
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    ScheduleDocument doc;
    ProfileDialog d(nullptr, &s);
    d.setDocument(&doc);
    d.setRequest(tinyRequest(fake));
    QSignalSpy finished(d.controller(), &ProfileController::finished);
    d.startProfile();
    QTRY_VERIFY_WITH_TIMEOUT(d.controller()->processId() > 0, 5000);
    const qint64 pid = d.controller()->processId();
    QVERIFY(!runtest::processGone(pid));
    d.cancelButton()->click();
    QVERIFY(finished.wait(10000));
    QCOMPARE(d.controller()->lastOutcome()->status, ps::core::RunState::Cancelled);
    QTRY_VERIFY_WITH_TIMEOUT(runtest::processGone(pid), 5000);
    QVERIFY(d.statusText().contains(QStringLiteral("Cancelled")));
    QVERIFY(d.profileButton()->isEnabled());
  }
};

QTEST_MAIN(ProfileDialogTest)
#include "profile_dialog_test.moc"
