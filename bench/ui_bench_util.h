#pragma once
// Shared by the GUI benchmarks: the 100,000-op schedule, one painted frame, and a main()
// that starts an offscreen QApplication around Google Benchmark.
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <QStandardPaths>

#include "document/schedule_document.h"
#include "pipestudio/core/planning/generators.h"
#include "timeline/timeline_view.h"

namespace ps::bench {

// 1F1B over 8 devices: 2 ops per stage and micro-batch, so `ops` ops in all.
inline ps::core::Schedule oneFOneBOps(int ops) {
  ps::core::GeneratorOptions o;
  o.devices = 8;
  o.microbatches = ops / 16;
  return ps::core::generateSchedule(ps::core::ScheduleKind::OneFOneB, o).value();
}

// `doc` showing 1F1B of `ops` ops under the default profile.
inline void loadOneFOneB(ps::ui::ScheduleDocument& doc, int ops) {
  const ps::core::Schedule s = oneFOneBOps(ops);
  doc.load(s, ps::ui::defaultCostProfile(s.pipeline.stages));
}

// One frame of `v` as the viewport would show it with `axis`, into `img`.
inline void paintFrame(const ps::ui::TimelineView& v, QImage& img, const ps::ui::TimeAxis& axis) {
  QPainter p(&img);
  v.paintTimeline(p, img.rect(), axis, 0);
  p.end();
  benchmark::DoNotOptimize(img.constBits());
}

inline int runBenchmarks(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QStandardPaths::setTestModeEnabled(true);  // no user settings read or written
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace ps::bench
