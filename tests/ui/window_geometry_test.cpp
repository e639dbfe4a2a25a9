// The main window opens inside the screen (docs/gui.md, "Window"): the pure fit, and a window
// whose default or restored size is larger than the screen (offscreen: the platform's screen).
#include "shell/window_geometry.h"

#include <QScreen>
#include <QSettings>
#include <QtTest>

#include "shell/main_window.h"
#include "ui_fixtures.h"

using namespace ps::ui;

class WindowGeometryTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(true); }

  void fitShrinksAndMovesInside() {
    const QRect screen(0, 0, 1024, 700);
    const QMargins frame(1, 24, 1, 1);
    // 1440 x 900 asked for on a 1024 x 700 screen: the frame takes the whole available area.
    const QRect fit = fitWindowToScreen(QRect(100, 80, 1440, 900), frame, screen);
    QCOMPARE(fit, QRect(1, 24, 1022, 675));
    QVERIFY(screen.contains(fit.marginsAdded(frame)));
    // A window that fits stays where it is; one hanging off the right edge moves in.
    QCOMPARE(fitWindowToScreen(QRect(50, 60, 800, 500), frame, screen), QRect(50, 60, 800, 500));
    QCOMPARE(fitWindowToScreen(QRect(600, 60, 800, 500), frame, screen), QRect(223, 60, 800, 500));
    // A panel at the top: the available area starts below it.
    const QRect below(0, 30, 1024, 670);
    QVERIFY(below.contains(fitWindowToScreen(QRect(0, 0, 1000, 600), frame, below).marginsAdded(frame)));
  }

  void defaultAndRestoredSizesOpenInsideTheScreen() {
    const QRect avail = QGuiApplication::primaryScreen()->availableGeometry();
    // The default size (1440 x 900) is larger than the offscreen screen.
    QVERIFY(avail.width() < 1440 || avail.height() < 900);
    auto fits = [&](const MainWindow& w) { return avail.contains(w.frameGeometry()); };
    auto size = [](const MainWindow& w) {
      const QRect f = w.frameGeometry();
      return QStringLiteral("frame %1,%2 %3x%4").arg(f.x()).arg(f.y()).arg(f.width()).arg(f.height());
    };
    {
      MainWindow w;
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      QVERIFY2(fits(w), qPrintable(size(w)));
      QTest::qWait(350);  // and stays so once framed
      QVERIFY2(fits(w), qPrintable(size(w)));
      // A layout saved on a large screen: 1600 x 1000 at (200, 100).
      w.setMinimumSize(0, 0);
      w.setGeometry(200, 100, 1600, 1000);
      QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"))
          .setValue(QStringLiteral("window/geometry"), w.saveGeometry());
      w.document()->undoStack()->setClean();
    }
    {
      MainWindow restored;
      restored.show();
      QVERIFY(QTest::qWaitForWindowExposed(&restored));
      QVERIFY2(fits(restored), qPrintable(size(restored)));
      restored.document()->undoStack()->setClean();
    }
    // A size chosen before showing is left alone.
    MainWindow chosen;
    chosen.resize(QSize(1300, 850));
    chosen.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chosen));
    QTest::qWait(350);
    QCOMPARE(chosen.size(), QSize(1300, 850));
    chosen.document()->undoStack()->setClean();
  }
};

QTEST_MAIN(WindowGeometryTest)
#include "window_geometry_test.moc"
