#pragma once
// Fixtures shared by the designer, overlay, step-through and iterations tests: generated
// schedules, ops by hand, a measured copy of a plan, a shown main window, and test-mode
// settings so no test reads or writes the user's.
#include <QSettings>
#include <QStandardPaths>
#include <QtTest>
#include <memory>

#include "document/schedule_document.h"
#include "pipestudio/core/planning/generators.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"

namespace ps::test {

inline ps::core::Schedule generated(ps::core::ScheduleKind k, int devices, int mb, int chunks = 0) {
  ps::core::GeneratorOptions o;
  o.devices = devices;
  o.microbatches = mb;
  o.chunks = chunks;
  return ps::core::generateSchedule(k, o).value();
}

inline ps::core::Schedule oneFOneB(int devices = 4, int mb = 8) {
  return generated(ps::core::ScheduleKind::OneFOneB, devices, mb);
}

inline ps::core::Op op(ps::core::OpKind k, int stage, int mb) {
  ps::core::Op o;
  o.kind = k;
  o.stage = stage;
  o.microbatch = mb;
  return o;
}

// The planned timeline, relabelled as a measurement, with `stretch` applied to every time.
inline ps::core::Timeline measuredCopy(const ps::core::Timeline& planned, double stretch) {
  ps::core::Timeline m = planned;
  m.source = ps::core::TimelineSource::Measured;
  m.transfers.clear();
  for (auto& o : m.ops) {
    o.start *= stretch;
    o.end *= stretch;
  }
  m.metrics = ps::core::computeMetrics(m);
  return m;
}

// Test-mode paths, and optionally no saved window layout, recent files or dialog folders.
inline void useTestSettings(bool clear = false) {
  QStandardPaths::setTestModeEnabled(true);
  if (clear) QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio")).clear();
}

// `w` resized to `size`, showing `s` under `profile` (not shown on screen).
inline void load(ps::ui::MainWindow& w, const ps::core::Schedule& s, const ps::core::CostProfile& profile,
                 QSize size) {
  w.resize(size);
  w.document()->load(s, profile);
}

// A main window of `size` showing `s` under `profile`, exposed and zoomed to fit.
inline std::unique_ptr<ps::ui::MainWindow> shownWindow(const ps::core::Schedule& s,
                                                       const ps::core::CostProfile& profile,
                                                       QSize size = QSize(1400, 900)) {
  auto w = std::make_unique<ps::ui::MainWindow>();
  w->resize(size);
  w->document()->load(s, profile);
  w->show();
  if (!QTest::qWaitForWindowExposed(w.get())) return nullptr;
  w->timeline()->zoomToFit();
  return w;
}

// Closes a window without the "save changes?" question.
inline void closeQuietly(std::unique_ptr<ps::ui::MainWindow>& w) {
  if (w) w->document()->undoStack()->setClean();
  w.reset();
}

}  // namespace ps::test
