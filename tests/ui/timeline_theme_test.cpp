// The timeline's Theme and paint passes (offscreen): the theme follows the palette (light and
// dark, on a palette change), the light variant keeps the op kinds' colours, each pass paints
// on its own, and the blocks pass paints every block in its Theme colour.
#include <QApplication>
#include <QPainter>
#include <QtTest>

#include "drag_util.h"
#include "timeline/op_style.h"
#include "timeline/theme.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;
using ps::test::measuredCopy;
using ps::test::oneFOneB;
using Pass = TimelineView::Pass;

namespace {

// The viewport as one pass (or all of them) paints it, over the theme's background.
QImage paintPasses(const TimelineView& v, unsigned passes) {
  const QSize size = v.viewport()->size();
  QImage img(size, QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::transparent);
  QPainter p(&img);
  p.setFont(v.font());
  v.paintTimeline(p, QRect(QPoint(0, 0), size), v.axis(), 0, passes);
  return img;
}

// A view of 1F1B on 3 devices, shown at a fixed size.
struct Fixture {
  ScheduleDocument doc;
  std::unique_ptr<TimelineView> view;
  explicit Fixture(const QPalette& pal) {
    Schedule s = oneFOneB(3, 4);
    doc.load(s, defaultCostProfile(s));
    view = std::make_unique<TimelineView>(&doc);
    view->setPalette(pal);
    view->resize(1000, 420);
    view->show();
    (void)QTest::qWaitForWindowExposed(view.get());
    view->zoomToFit();
  }
};

}  // namespace

class TimelineThemeTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(); }

  void lightVariantKeepsTheOpKindColours() {
    const Theme& t = Theme::lightVariant();
    QVERIFY(!t.dark);
    QCOMPARE(t.kindColor(OpKind::F), QColor(0x3b, 0x7d, 0xd8));
    QCOMPARE(t.kindColor(OpKind::B), QColor(0xf0, 0x8c, 0x2e));
    QCOMPARE(t.kindColor(OpKind::I), QColor(0x1a, 0xa3, 0x9a));
    QCOMPARE(t.kindColor(OpKind::W), QColor(0x4c, 0xaf, 0x50));
    QCOMPARE(t.kindColor(OpKind::RecvB), QColor(0xa1, 0x88, 0x7f));
    QCOMPARE(t.kindColor(OpKind::ReduceGrad), QColor(0xc0, 0xa0, 0x20));
    QCOMPARE(t.kindColor(static_cast<OpKind>(kFirstUserKind + 1)), QColor(0x00, 0x97, 0xa7));
    QCOMPARE(t.overlapColor(), QColor(0x8e, 0x44, 0xad));
    QCOMPARE(t.band, QColor(0xf4, 0xf6, 0xf9));
    QCOMPARE(t.playhead, QColor(0xd8, 0x1b, 0x60));
    QCOMPARE(t.deviationColor(DeviationBand::Good), QColor(0x43, 0xa0, 0x47));
    // op_style's functions are the theme's.
    for (int k = 0; k < static_cast<int>(OpKind::kBuiltinCount); ++k) {
      const auto kind = static_cast<OpKind>(k);
      QCOMPARE(kindColor(kind), t.kindColor(kind));
      QCOMPARE(blockColor(kind, 1, false), t.blockColor(kind, 1, false));
    }
    QCOMPARE(textColorOn(QColor(0xff, 0xff, 0xff)), QColor(0x1e, 0x1e, 0x1e));
    QCOMPARE(TimelineView::deviationColor(DeviationBand::Bad), t.deviationColor(DeviationBand::Bad));
  }

  void variantFollowsTheWindowColour() {
    QVERIFY(!Theme::forPalette(lightPalette()).dark);
    QVERIFY(Theme::forPalette(darkPalette()).dark);
    const Theme dark = Theme::forPalette(darkPalette());
    QCOMPARE(dark.base, darkPalette().color(QPalette::Base));
    QCOMPARE(dark.text, darkPalette().color(QPalette::Text));
    QVERIFY(dark.band != Theme::lightVariant().band);
    QVERIFY(dark.arrowIn != Theme::lightVariant().arrowIn);
  }

  void themeFollowsAPaletteChange() {
    Fixture f(lightPalette());
    TimelineView& v = *f.view;
    QVERIFY(!v.theme().dark);
    QCOMPARE(v.theme().base, QColor(0xff, 0xff, 0xff));
    v.setPalette(darkPalette());
    QVERIFY(v.theme().dark);
    QCOMPARE(v.theme().base, darkPalette().color(QPalette::Base));
    // And the painting follows: the ruler's background is the dark base.
    const QImage dark = paintPasses(v, TimelineView::passBit(Pass::Ruler));
    QCOMPARE(dark.pixelColor(5, 3), darkPalette().color(QPalette::Base));
    v.setPalette(lightPalette());
    QVERIFY(!v.theme().dark);
    QCOMPARE(paintPasses(v, TimelineView::passBit(Pass::Ruler)).pixelColor(5, 3), QColor(0xff, 0xff, 0xff));
  }

  void themeFollowsTheApplicationPalette() {
    const QPalette before = QApplication::palette();
    QApplication::setPalette(lightPalette());
    ScheduleDocument doc;
    Schedule s = oneFOneB(2, 2);
    doc.load(s, defaultCostProfile(s));
    TimelineView v(&doc);  // no palette of its own: the application's applies
    QVERIFY(!v.theme().dark);
    QApplication::setPalette(darkPalette());
    QCoreApplication::processEvents();
    QVERIFY(v.theme().dark);
    QApplication::setPalette(before);
  }

  void blocksPaintInTheirThemeColours() {
    for (const QPalette& pal : {lightPalette(), darkPalette()}) {
      Fixture f(pal);
      TimelineView& v = *f.view;
      const QImage img = paintPasses(v, TimelineView::passBit(Pass::Blocks));
      const BlockIndex& bi = v.blocks();
      int checked = 0;
      for (int d = 0; d < bi.devices(); ++d)
        for (const Block& b : bi.row(d)) {
          const auto c = v.blockCenter(OpRef{d, b.step});
          QVERIFY(c.has_value());
          // Near the top edge, clear of the label in the middle.
          const QPoint at(c->x(), c->y() - static_cast<int>(v.rows().rowHeight / 2) + 3);
          QCOMPARE(img.pixelColor(at).rgb(),
                   v.theme().blockColor(b.op.kind, b.chunk, b.second.has_value()).rgb());
          ++checked;
        }
      QVERIFY(checked > 10);
      // The bands pass paints the row behind the blocks: device 2 idles at the start of 1F1B.
      const QImage bands = paintPasses(v, TimelineView::passBit(Pass::Bands));
      const int y = static_cast<int>(v.rows().rowCenter(2));
      QCOMPARE(bands.pixelColor(static_cast<int>(v.rows().labelWidth) + 2, y).rgb(), v.theme().band.rgb());
    }
  }

  void everyPassPaintsOnItsOwn() {
    Fixture f(lightPalette());
    TimelineView& v = *f.view;
    const QImage blank = paintPasses(v, 0);
    auto paints = [&](Pass p) { return paintPasses(v, TimelineView::passBit(p)) != blank; };
    // Nothing to show yet for the passes that draw state.
    QVERIFY(!paints(Pass::Overlay));
    QVERIFY(!paints(Pass::Arrows));
    QVERIFY(!paints(Pass::Playhead));
    QVERIFY(!paints(Pass::StepMarks));
    for (Pass p : {Pass::Bands, Pass::Blocks, Pass::Labels, Pass::Ruler})
      QVERIFY2(paints(p), qPrintable(QString::number(int(p))));

    v.measuredOverlay()->set(measuredCopy(f.doc.analysis().timeline, 1.5));
    QVERIFY(paints(Pass::Overlay));
    v.selectRef(OpRef{1, 2}, false);
    QVERIFY(paints(Pass::Arrows));
    v.setPlayhead(3.0);
    QVERIFY(paints(Pass::Playhead));
    TimelineView::StepMarks marks;
    marks.running.push_back({0, f.doc.schedule().devices[0][1].first});
    v.setStepMarks(marks);
    QVERIFY(paints(Pass::StepMarks));
    v.measuredOverlay()->clear();
    v.setPlayhead(std::nullopt);
    v.setStepMarks({});

    // The pointer's time cursor.
    QVERIFY(!paints(Pass::Hover));
    const QPoint inside(static_cast<int>(v.rows().labelWidth) + 200, 100);
    QMouseEvent move(QEvent::MouseMove, inside, v.viewport()->mapToGlobal(inside), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(v.viewport(), &move);
    QVERIFY(paints(Pass::Hover));

    // A deadlock: F1 before F0 on the last device outlines the cycle.
    QVERIFY(!paints(Pass::Outlines));
    const int last = static_cast<int>(f.doc.schedule().devices.size()) - 1;
    QVERIFY(f.doc.moveStep(last, 0, 2));
    QVERIFY(!f.doc.analysis().valid());
    QVERIFY(paints(Pass::Outlines));
    f.doc.undoStack()->undo();

    // K iterations: the iteration ends.
    QVERIFY(!paints(Pass::IterationMarks));
    f.doc.setIterations(2, IterationBoundary::Overlap);
    QVERIFY(!v.iterationMarks().empty());
    QVERIFY(paints(Pass::IterationMarks));
  }

  void dragPassPaintsTheGhost() {
    Fixture f(lightPalette());
    TimelineView& v = *f.view;
    const QImage blank = paintPasses(v, 0);
    QVERIFY(paintPasses(v, TimelineView::passBit(Pass::Drag)) == blank);
    const auto from = v.blockCenter(OpRef{0, 1});
    QVERIFY(from.has_value());
    bool painted = false;
    ps::test::dragBlock(&v, *from, *from + QPoint(60, 0), [&] {
      painted = paintPasses(v, TimelineView::passBit(Pass::Drag)) != blank;
      QTest::keyClick(&v, Qt::Key_Escape);  // cancel: the document stays as it was
    });
    QVERIFY(painted);
  }
};

QTEST_MAIN(TimelineThemeTest)
#include "timeline_theme_test.moc"
