#include "run/stage_layout.h"

#include <algorithm>

namespace ps::engine::detail {

StageLayout::StageLayout(const core::Pipeline& p, int microbatches, std::vector<int> partition)
    : pipeline_(p), microbatches_(microbatches), partition_(std::move(partition)), routes_(p) {
  firstLayer_.assign(1, 0);
  for (int n : partition_) firstLayer_.push_back(firstLayer_.back() + n);
  blockStages_.assign(static_cast<size_t>(p.blocks()), {});
  copyIndex_.assign(static_cast<size_t>(p.stages), 0);
  for (int st = 0; st < p.stages; ++st) {
    auto& stages = blockStages_[static_cast<size_t>(p.blockOf(st))];
    copyIndex_[static_cast<size_t>(st)] = static_cast<int>(stages.size());
    stages.push_back(st);
    copies_ = std::max(copies_, stages.size() - 1);
  }
  for (int st = 0; st < p.stages; ++st)
    for (int m = 0; m < microbatches_; ++m)
      if (routes_.runs(st, m) && routes_.next(st, m) < 0) {
        lossStages_.push_back(st);
        break;
      }
}

int StageLayout::routeStart(int m) const {
  for (int s = 0; s < pipeline_.stages; ++s)
    if (routes_.runs(s, m) && routes_.prev(s, m) < 0) return s;
  return -1;
}

std::vector<std::pair<int, int>> StageLayout::linkedDevices() const {
  std::vector<std::pair<int, int>> pairs;
  auto link = [&](int a, int b) {
    if (a == b) return;
    pairs.emplace_back(a, b);
    pairs.emplace_back(b, a);
  };
  for (int st = 0; st < pipeline_.stages; ++st)
    for (int m = 0; m < microbatches_; ++m)
      if (const int nx = routes_.next(st, m); nx >= 0) link(pipeline_.deviceOf(st), pipeline_.deviceOf(nx));
  for (const auto& stages : blockStages_)
    for (size_t i = 0; i < stages.size(); ++i)
      for (size_t j = i + 1; j < stages.size(); ++j)
        link(pipeline_.deviceOf(stages[i]), pipeline_.deviceOf(stages[j]));
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

}  // namespace ps::engine::detail
