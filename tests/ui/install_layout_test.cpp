// Where the GUI finds its bundled data and documentation: relative to its own executable, as
// installed (/usr/bin -> /usr/share/pipestudio, /usr/share/doc/pipestudio), never at a path of
// the machine it was built on. The build tree mirrors that layout (packaging/layout.cmake).
#include <QtTest>

#include "document/schedule_document.h"
#include "shell/main_window.h"

using namespace ps::ui;

class InstallLayoutTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void dataLiesBesideTheExecutable();
  void documentationLiesBesideTheExecutable();
  void environmentOverridesTheData();
};

void InstallLayoutTest::dataLiesBesideTheExecutable() {
  qunsetenv("PIPESTUDIO_RESOURCES");
  const QString expected =
      QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/../share/pipestudio"));
  QCOMPARE(resourcesDir(), expected);
  QVERIFY(QFileInfo(expected + QStringLiteral("/examples/example.pipe")).isFile());
  QVERIFY(QFileInfo(expected + QStringLiteral("/profiles/llama2-7b.json")).isFile());
}

void InstallLayoutTest::documentationLiesBesideTheExecutable() {
  const QString expected =
      QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/../share/doc/pipestudio"));
  QCOMPARE(MainWindow::documentationDir(), expected);
  QVERIFY(QFileInfo(expected + QStringLiteral("/gui.md")).isFile());
}

void InstallLayoutTest::environmentOverridesTheData() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  qputenv("PIPESTUDIO_RESOURCES", dir.path().toLocal8Bit());
  QCOMPARE(resourcesDir(), dir.path());
  qunsetenv("PIPESTUDIO_RESOURCES");
}

QTEST_MAIN(InstallLayoutTest)
#include "install_layout_test.moc"
