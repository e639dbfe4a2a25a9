#pragma once
// How a schedule's stages sit on the model and on each other: the layers each stage runs (its
// block's share of the partition), which copy of its block it holds (DualPipe's two directions
// run every block twice, each copy with its own parameters), each micro-batch's route through
// the stages, the stages that end a route (compute a loss), and the devices that exchange
// tensors. Torch-free: a unit of its own, tested without a run (tests/engine/stage_layout_test.cpp).
#include <utility>
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::engine::detail {

class StageLayout {
 public:
  StageLayout() = default;
  // `partition`: the layers of each of the pipeline's blocks (p.blocks() numbers).
  StageLayout(const core::Pipeline& p, int microbatches, std::vector<int> partition);

  const std::vector<int>& partition() const { return partition_; }
  // Stage s runs layers [layerBegin(s), layerEnd(s)) of its block's copy of the model.
  int layerBegin(int s) const { return firstLayer_[static_cast<size_t>(pipeline_.blockOf(s))]; }
  int layerEnd(int s) const { return firstLayer_[static_cast<size_t>(pipeline_.blockOf(s)) + 1]; }
  // 0: the first stage of its block, which runs the model itself; k: its block's k-th copy.
  int copyIndex(int s) const { return copyIndex_[static_cast<size_t>(s)]; }
  // Copies of the model beyond the first that the stages need.
  size_t copies() const { return copies_; }
  // The stages of stage s's block, in order (s among them).
  const std::vector<int>& blockStagesOf(int s) const {
    return blockStages_[static_cast<size_t>(pipeline_.blockOf(s))];
  }
  const core::StageRoutes& routes() const { return routes_; }
  // The first stage of micro-batch m's route (-1 when it runs none).
  int routeStart(int m) const;
  // The stages that end a route, in order.
  const std::vector<int>& lossStages() const { return lossStages_; }
  // The device pairs that exchange tensors, both directions, sorted: neighbours on a route and
  // devices holding copies of one block (their gradients are summed).
  std::vector<std::pair<int, int>> linkedDevices() const;

 private:
  core::Pipeline pipeline_;
  int microbatches_ = 0;
  std::vector<int> partition_;
  std::vector<int> firstLayer_;  // per block, plus the end
  core::StageRoutes routes_;     // a micro-batch's previous and next stage on its route
  std::vector<int> copyIndex_;   // per stage
  std::vector<int> lossStages_;
  std::vector<std::vector<int>> blockStages_;  // per block: its stages, in order
  size_t copies_ = 0;
};

}  // namespace ps::engine::detail
