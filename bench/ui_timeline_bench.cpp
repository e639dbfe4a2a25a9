// Timeline painting at 100,000 ops (fit and zoomed) and drag-time re-simulation at 10,000 ops.
#include "pipestudio/core/planning/schedule_edits.h"
#include "ui_bench_util.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

struct Fixture {
  explicit Fixture(int ops) {
    ps::bench::loadOneFOneB(doc, ops);
    view = std::make_unique<TimelineView>(&doc);
    view->resize(1600, 420);
  }
  ScheduleDocument doc;
  std::unique_ptr<TimelineView> view;
};

Fixture& large() {
  static Fixture f(100000);
  return f;
}

void paintZoomed(benchmark::State& state, double zoom) {
  Fixture& f = large();
  QImage img(1600, 420, QImage::Format_ARGB32_Premultiplied);
  const double plotW = 1600 - f.view->rows().labelWidth - 12;
  const double fit = TimeAxis::fitScale(f.view->blocks().endTime(), plotW);
  // Zoomed: the middle of the run at `zoom` times the fit scale.
  TimeAxis axis(fit * zoom, (zoom - 1) * plotW / 2);
  for (auto _ : state) ps::bench::paintFrame(*f.view, img, axis);
  state.counters["ops"] = static_cast<double>(f.doc.schedule().opCount());
}

void BM_PaintTimeline100kFit(benchmark::State& state) {
  paintZoomed(state, 1.0);
}
void BM_PaintTimeline100kZoomed(benchmark::State& state) {
  paintZoomed(state, 200.0);
}

// What one drag step costs: move the op, validate and simulate the candidate, lay out blocks.
void BM_DragResimulate10k(benchmark::State& state) {
  static Fixture f(10000);
  const Schedule& s = f.doc.schedule();
  const int from = 40;
  int to = 41;
  for (auto _ : state) {
    auto moved = moveStep(s, 0, from, to);
    Analysis a = f.doc.analyze(*moved);
    BlockIndex bi = BlockIndex::build(a.schedule, a.timeline);
    benchmark::DoNotOptimize(bi.endTime());
    to = to == 41 ? 42 : 41;
  }
  state.counters["ops"] = static_cast<double>(s.opCount());
}

// The same at 100,000 ops: what one drag step costs on the largest schedules.
void BM_DragResimulate100k(benchmark::State& state) {
  Fixture& f = large();
  const Schedule& s = f.doc.schedule();
  int to = 41;
  for (auto _ : state) {
    auto moved = moveStep(s, 0, 40, to);
    Analysis a = f.doc.analyze(*moved);
    BlockIndex bi = BlockIndex::build(a.schedule, a.timeline);
    benchmark::DoNotOptimize(bi.endTime());
    to = to == 41 ? 42 : 41;
  }
}

void BM_BlockIndexBuild100k(benchmark::State& state) {
  Fixture& f = large();
  for (auto _ : state) {
    BlockIndex bi = BlockIndex::build(f.doc.schedule(), f.doc.analysis().timeline);
    benchmark::DoNotOptimize(bi.endTime());
  }
}

}  // namespace

BENCHMARK(BM_PaintTimeline100kFit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PaintTimeline100kZoomed)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DragResimulate10k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DragResimulate100k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BlockIndexBuild100k)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  return ps::bench::runBenchmarks(argc, argv);
}
