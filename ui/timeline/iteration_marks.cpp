#include "timeline/iteration_marks.h"

#include <algorithm>
#include <string>

namespace ps::ui {

using namespace ps::core;

std::vector<IterationMark> iterationMarks(const IterationResult& r) {
  std::vector<IterationMark> out;
  const std::string prefix(kOptimizerStepKind);
  for (const auto& op : r.timeline.ops) {
    const UserKind* u = r.unrolled.userKind(op.op.kind);
    if (!u || u->name.rfind(prefix, 0) != 0) continue;
    out.push_back(IterationMark{op.device, op.op.microbatch, op.start, op.end});
  }
  std::sort(out.begin(), out.end(), [](const IterationMark& a, const IterationMark& b) {
    return a.device != b.device ? a.device < b.device : a.end < b.end;
  });
  return out;
}

}  // namespace ps::ui
