// Step-through in the GUI at 100,000 ops (8 devices): one Next Event with every view that
// follows the playhead (State dock, timeline marks, memory cursor, diagnostics), the same with
// a frame painted, one playback tick, and the stepper's rebuild after an edit.
#include "debugger/stepper_controller.h"
#include "shell/main_window.h"
#include "ui_bench_util.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

struct Fixture {
  explicit Fixture(int ops) {
    w.resize(1600, 1000);
    ps::bench::loadOneFOneB(*w.document(), ops);
    sc = w.stepperController();
    sc->seekPosition(sc->stepper()->size() / 2);
  }
  MainWindow w;
  StepperController* sc = nullptr;
};

Fixture& large() {
  static Fixture f(100000);
  return f;
}

void BM_StepNext100k(benchmark::State& state) {
  Fixture& f = large();
  for (auto _ : state) {
    if (f.sc->position() >= f.sc->stepper()->size()) f.sc->seekPosition(0);
    f.sc->next();
    benchmark::DoNotOptimize(f.sc->time());
  }
  state.counters["events"] = static_cast<double>(f.sc->stepper()->size());
}

void BM_StepNextAndPaint100k(benchmark::State& state) {
  Fixture& f = large();
  QImage img(1600, 420, QImage::Format_ARGB32_Premultiplied);
  TimelineView* v = f.w.timeline();
  const TimeAxis axis(TimeAxis::fitScale(v->blocks().endTime(), 1600 - v->rows().labelWidth - 12), 0);
  for (auto _ : state) {
    if (f.sc->position() >= f.sc->stepper()->size()) f.sc->seekPosition(0);
    f.sc->next();
    ps::bench::paintFrame(*v, img, axis);
  }
}

// One 33 ms frame of playback at 1000 timeline ms per second, with a breakpoint set.
void BM_PlayTick100k(benchmark::State& state) {
  Fixture& f = large();
  Breakpoint bp;
  bp.device = 7;
  bp.kind = OpKind::W;  // no W in this schedule: never matches, every tick searches its window
  f.sc->addBreakpoint(bp);
  f.sc->setSpeed(1000);
  f.sc->seekPosition(0);
  for (auto _ : state) {
    if (f.sc->position() >= f.sc->stepper()->size()) f.sc->seekPosition(0);
    f.sc->play();
    f.sc->advance(33);
    f.sc->pause();
    benchmark::DoNotOptimize(f.sc->time());
  }
  f.sc->removeBreakpoint(0);
}

// After an edit: Stepper::make over the new timeline and the views refreshed.
void BM_StepperRebuild100k(benchmark::State& state) {
  Fixture& f = large();
  for (auto _ : state) {
    f.sc->timelineOpened();
    benchmark::DoNotOptimize(f.sc->position());
  }
}

}  // namespace

BENCHMARK(BM_StepNext100k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StepNextAndPaint100k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlayTick100k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StepperRebuild100k)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  return ps::bench::runBenchmarks(argc, argv);
}
