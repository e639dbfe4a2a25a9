// Pure timeline geometry: time <-> x, rows, blocks, hit testing, level of detail, drop targets.
#include "timeline/timeline_geometry.h"

#include <QtTest>

#include "pipestudio/core/planning/schedule_edits.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

// Two devices; device 0 runs F0 F1 B0 B1 at 0-1, 1-2, 3-5, 5-7; device 1 runs F0 B0 at 1-2, 2-4.
Schedule twoDeviceSchedule() {
  Schedule s;
  s.pipeline = Pipeline::make(2, 2, 2, PlacementKind::Linear).value();
  s.devices.resize(2);
  s.devices[0] = {Step{Op{OpKind::F, 0, 0}, {}}, Step{Op{OpKind::F, 0, 1}, {}}, Step{Op{OpKind::B, 0, 0}, {}},
                  Step{Op{OpKind::B, 0, 1}, {}}};
  s.devices[1] = {Step{Op{OpKind::F, 1, 0}, {}}, Step{Op{OpKind::B, 1, 0}, {}}};
  return s;
}

Timeline timelineFor(const Schedule& s) {
  Timeline t;
  t.devices = 2;
  auto add = [&](int d, int step, double a, double b) {
    t.ops.push_back(TimelineOp{d, step, s.devices[size_t(d)][size_t(step)].first, false, a, b});
  };
  add(0, 0, 0, 1);
  add(0, 1, 1, 2);
  add(0, 2, 3, 5);
  add(0, 3, 5, 7);
  add(1, 0, 1, 2);
  add(1, 1, 2, 4);
  return t;
}

std::vector<Block> uniformRow(int n, double width, double gap = 0) {
  std::vector<Block> row;
  for (int i = 0; i < n; ++i) {
    Block b;
    b.step = i;
    b.start = i * (width + gap);
    b.end = b.start + width;
    b.op = Op{OpKind::F, 0, i};
    row.push_back(b);
  }
  return row;
}

}  // namespace

class TimelineGeometryTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void timeAndXRoundTrip() {
    TimeAxis ax(4.0, 100.0);  // 4 px per ms, scrolled 100 px
    QCOMPARE(ax.toX(25.0), 0.0);
    QCOMPARE(ax.toX(50.0), 100.0);
    QCOMPARE(ax.toTime(ax.toX(12.5)), 12.5);
    QCOMPARE(ax.contentWidth(10), 40.0);
  }

  void fitScaleShowsWholeDuration() {
    QCOMPARE(TimeAxis::fitScale(200, 1000), 5.0);
    QCOMPARE(TimeAxis::fitScale(0, 1000), 1.0);  // nothing to show
  }

  void zoomKeepsTimeUnderCursor() {
    TimeAxis ax(2.0, 0);
    const double x = 300;
    const double before = ax.toTime(x);
    ax.zoomAround(x, 3.0, 0.1, 1000);
    QCOMPARE(ax.pixelsPerMs(), 6.0);
    QVERIFY(std::abs(ax.toTime(x) - before) < 1e-9);
    ax.zoomAround(x, 1e6, 0.1, 1000);  // clamped
    QCOMPARE(ax.pixelsPerMs(), 1000.0);
    ax.zoomAround(0, 1e-9, 0.1, 1000);
    QCOMPARE(ax.pixelsPerMs(), 0.1);
    QVERIFY(ax.offsetPx() >= 0);
  }

  void rowLayoutMapsYToDevice() {
    RowLayout l;
    l.rulerHeight = 20;
    l.rowHeight = 30;
    l.rowGap = 10;
    QCOMPARE(l.rowTop(0), 30.0);
    QCOMPARE(l.rowTop(1), 70.0);
    QCOMPARE(l.rowAt(10, 4), -1);  // in the ruler
    QCOMPARE(l.rowAt(45, 4), 0);
    QCOMPARE(l.rowAt(80, 4), 1);
    QCOMPARE(l.rowAt(5000, 4), 3);  // below the last row clamps to it
  }

  void blocksFollowTimelineAndChunks() {
    Schedule s = twoDeviceSchedule();
    BlockIndex bi = BlockIndex::build(s, timelineFor(s));
    QCOMPARE(bi.devices(), 2);
    QCOMPARE(bi.size(), size_t(6));
    QCOMPARE(bi.row(0)[2].start, 3.0);
    QCOMPARE(bi.row(0)[2].op.kind, OpKind::B);
    QCOMPARE(bi.endTime(), 7.0);
    QVERIFY(bi.row(1)[1].reached);
    QCOMPARE(bi.row(1)[0].chunk, 0);
  }

  void unreachedOpsFollowTheLastTimedOne() {
    Schedule s = twoDeviceSchedule();
    Timeline t = timelineFor(s);
    t.ops.erase(t.ops.begin() + 2, t.ops.begin() + 4);  // device 0 stalls after two ops
    BlockIndex bi = BlockIndex::build(s, t, 1.5);
    QVERIFY(!bi.row(0)[2].reached);
    QCOMPARE(bi.row(0)[2].start, 2.0);
    QCOMPARE(bi.row(0)[3].start, 3.5);
    QCOMPARE(bi.row(0)[3].end, 5.0);
  }

  void visibleRangeAndHitTest() {
    Schedule s = twoDeviceSchedule();
    BlockIndex bi = BlockIndex::build(s, timelineFor(s));
    auto [f, l] = bi.visibleRange(0, 2.5, 4.0);  // only B0 (3-5) overlaps
    QCOMPARE(f, size_t(2));
    QCOMPARE(l, size_t(3));
    QCOMPARE(bi.hitTest(0, 4.0).value(), size_t(2));
    QVERIFY(!bi.hitTest(0, 2.5).has_value());              // the idle gap
    QCOMPARE(bi.hitTest(0, 2.7, 0.6).value(), size_t(2));  // nearer B0 (starts at 3)
    QCOMPARE(bi.hitTest(0, 2.2, 0.6).value(), size_t(1));  // nearer F1's end
    QVERIFY(!bi.hitTest(1, 6.0).has_value());
  }

  void copyLaneOverlapsComputeAndStaysVisible() {
    // OFFLOAD of F0 runs on the copy stream (1..6) while F1 and F2 compute (1..2, 2..3).
    Schedule s;
    s.pipeline = Pipeline::make(1, 1, 3, PlacementKind::Linear).value();
    s.devices = {{Step{Op{OpKind::F, 0, 0}, {}}, Step{Op{OpKind::Offload, 0, 0}, {}},
                  Step{Op{OpKind::F, 0, 1}, {}}, Step{Op{OpKind::F, 0, 2}, {}}}};
    Timeline t;
    t.devices = 1;
    const double spans[][2] = {{0, 1}, {1, 6}, {1, 2}, {2, 3}};
    for (int i = 0; i < 4; ++i)
      t.ops.push_back(TimelineOp{0, i, s.devices[0][size_t(i)].first, false, spans[i][0], spans[i][1]});
    BlockIndex bi = BlockIndex::build(s, t);
    QVERIFY(bi.hasCopyLane());
    QCOMPARE(bi.row(0)[1].lane, 1);
    QCOMPARE(bi.row(0)[2].lane, 0);
    // At t = 5 only the copy is running; it must be in the visible range and hit in its lane.
    auto [f, l] = bi.visibleRange(0, 4.5, 5.5);
    QVERIFY(f <= 1 && l > 1);
    QCOMPARE(bi.hitTest(0, 5.0, 0, 1).value(), size_t(1));
    QVERIFY(!bi.hitTest(0, 5.0, 0, 0).has_value());
    QCOMPARE(bi.hitTest(0, 2.5, 0, 0).value(), size_t(3));
    RowLayout rl;
    const auto [top0, h0] = rl.lane(0, true);
    const auto [top1, h1] = rl.lane(1, true);
    QVERIFY(top0 + h0 <= top1);
    QVERIFY(top1 + h1 <= rl.rowHeight + 1e-9);
    QCOMPARE(rl.laneAt(top1 + 1, true), 1);
    QCOMPARE(rl.laneAt(1, true), 0);
  }

  void levelOfDetailMergesThinBlocks() {
    auto row = uniformRow(1000, 1.0);  // 1000 ms of 1 ms blocks
    TimeAxis fit(0.5, 0);              // 0.5 px each: must merge
    auto spans = levelOfDetail(row, 0, row.size(), fit, 3.0);
    QVERIFY(spans.size() < 200);
    QVERIFY(spans.size() >= 150);  // ~500 px / 3 px
    size_t covered = 0;
    double lastX = -1;
    for (const auto& sp : spans) {
      covered += sp.last - sp.first;
      QVERIFY(sp.x0 >= lastX - 1e-9);  // in order, no overlap
      lastX = sp.x1;
    }
    QCOMPARE(covered, row.size());  // every block drawn exactly once
    TimeAxis zoomed(20.0, 0);       // 20 px each: one span per block
    auto detailed = levelOfDetail(row, 0, 10, zoomed, 3.0);
    QCOMPARE(detailed.size(), size_t(10));
    QVERIFY(!detailed[0].merged);
  }

  void levelOfDetailKeepsVisibleGaps() {
    auto row = uniformRow(4, 1.0, 20.0);  // thin blocks 20 ms apart
    TimeAxis ax(1.0, 0);
    auto spans = levelOfDetail(row, 0, row.size(), ax, 3.0);
    QCOMPARE(spans.size(), size_t(4));  // not merged across the gaps
  }

  void dropIndexCountsCentresBefore() {
    auto row = uniformRow(5, 2.0);  // centres 1, 3, 5, 7, 9
    QCOMPARE(dropIndex(row, 0, 0.5), 0);
    QCOMPARE(dropIndex(row, 0, 6.0), 2);  // past blocks 1 and 2 (centres 3, 5)
    QCOMPARE(dropIndex(row, 4, 0.0), 0);
    QCOMPARE(dropIndex(row, 4, 100.0), 4);         // the end
    QCOMPARE(dropIndex(row, 2, 5.5), 2);           // over itself: stays
    QCOMPARE(dropIndicatorTime(row, 0, 0), 2.0);   // before block 1 (starts at 2)
    QCOMPARE(dropIndicatorTime(row, 0, 2), 6.0);   // between block 2 (ends 6) and block 3 (starts 6)
    QCOMPARE(dropIndicatorTime(row, 0, 4), 10.0);  // after the last
  }

  void tickStepIsNice() {
    QCOMPARE(tickStep(10.0, 90), 10.0);
    QCOMPARE(tickStep(1.0, 90), 100.0);
    QCOMPARE(tickStep(30.0, 90), 5.0);
    QCOMPARE(tickStep(100.0, 90), 1.0);
  }

  void moveStepRotatesTheOrder() {
    Schedule s = twoDeviceSchedule();
    auto later = moveStep(s, 0, 0, 2);
    QVERIFY(later.ok());
    QCOMPARE(later->devices[0][2].first, (Op{OpKind::F, 0, 0}));
    QCOMPARE(later->devices[0][0].first, (Op{OpKind::F, 0, 1}));
    auto back = moveStep(*later, 0, 2, 0);
    QVERIFY(back.ok());
    QVERIFY(*back == s);
    QVERIFY(!moveStep(s, 0, 0, 9).ok());
    QVERIFY(!moveStep(s, 5, 0, 1).ok());
  }

  void splitAndMergeBackward() {
    Schedule s = twoDeviceSchedule();
    auto split = splitBackward(s, OpRef{0, 2});
    QVERIFY(split.ok());
    QCOMPARE(split->devices[0].size(), size_t(5));
    QCOMPARE(split->devices[0][2].first.kind, OpKind::I);
    QCOMPARE(split->devices[0][3].first.kind, OpKind::W);
    QVERIFY(!splitBackward(s, OpRef{0, 0}).ok());         // F does not split
    auto merged = mergeInputWeight(*split, OpRef{0, 3});  // from the W
    QVERIFY(merged.ok());
    QVERIFY(*merged == s);
  }

  void recomputeTogglesPerStage() {
    Schedule s = twoDeviceSchedule();
    auto on = toggleRecompute(s, 0);
    QVERIFY(on.ok());
    QVERIFY(stageRecomputes(*on, 0));
    QCOMPARE(on->devices[0][2].first, (Op{OpKind::R, 0, 0}));  // right before B0
    QCOMPARE(on->devices[0][3].first, (Op{OpKind::B, 0, 0}));
    QCOMPARE(on->devices[0][4].first, (Op{OpKind::R, 0, 1}));
    auto off = toggleRecompute(*on, 0);
    QVERIFY(off.ok());
    QVERIFY(*off == s);
  }

  void offloadWrapsTheGap() {
    Schedule s = twoDeviceSchedule();
    auto o = addOffloadReload(s, OpRef{0, 0});  // F0: gap F0 .. B0 holds F1
    QVERIFY(o.ok());
    const auto& r = o->devices[0];
    QCOMPARE(r[1].first, (Op{OpKind::Offload, 0, 0}));
    QCOMPARE(r[3].first, (Op{OpKind::Reload, 0, 0}));
    QCOMPARE(r[4].first, (Op{OpKind::B, 0, 0}));
    QVERIFY(!addOffloadReload(*o, OpRef{0, 0}).ok());  // already offloaded
    QVERIFY(!addOffloadReload(s, OpRef{1, 0}).ok());   // F0@s1 is followed at once by its B
  }

  // Issue 30 (21): Shift+drag measures the time between two pointer positions.
  void aSpanIsOrderedAndNeverBeforeZero() {
    const TimeAxis ax(10.0, 50.0);                // 10 px per ms, scrolled 5 ms in
    const TimeSpan s = spanBetween(ax, 150, 50);  // dragged leftwards
    QCOMPARE(s.from, 10.0);
    QCOMPARE(s.to, 20.0);
    QCOMPARE(s.length(), 10.0);
    QCOMPARE(spanBetween(ax, -200, 0).from, 0.0);  // left of the start
  }

  // Polish: arrow labels that would print over each other stack instead.
  void labelsDoNotOverlap() {
    std::vector<LabelBox> taken;
    const LabelBox want{100, 50, 60, 14};
    for (int i = 0; i < 3; ++i) {
      const LabelBox b = placeLabel(want, taken);
      for (const LabelBox& t : taken) QVERIFY(!b.intersects(t));
      taken.push_back(b);
    }
    QCOMPARE(taken[0].y, 50.0);
    QVERIFY(taken[1].y < taken[0].y && taken[2].y < taken[1].y);
    QCOMPARE(placeLabel(LabelBox{300, 50, 60, 14}, taken).y, 50.0);  // apart: where it wants
  }
};

QTEST_APPLESS_MAIN(TimelineGeometryTest)
#include "timeline_geometry_test.moc"
