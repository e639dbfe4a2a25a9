#pragma once
// Chrome trace JSON (Perfetto, chrome://tracing) of any Timeline: a process per device with
// a compute track, a copy-stream track and one track per outgoing link, and a memory counter.
// Op slices are named like PyTorch's pipelining actions ("0F1": stage 0, F, micro-batch 1)
// and carry stage, mb, kind and step in their args. docs/formats.md describes the layout;
// trace_import.h reads these traces back.
#include <string>

#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

// `schedule` (optional) names user kinds and labels the trace.
std::string exportChromeTrace(const Timeline& t, const Schedule* schedule = nullptr);

}  // namespace ps::core
