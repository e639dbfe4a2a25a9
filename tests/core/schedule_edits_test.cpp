// The designer's edits in core, and the one RELOAD rule they share with applyActivationPolicies.
#include "pipestudio/core/planning/schedule_edits.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/partition_search.h"

using namespace ps::core;

namespace {

Step st(OpKind k, int mb) {
  return Step{Op{k, 0, mb}, std::nullopt};
}

// One device, one stage, three micro-batches: F0 F1 F2 B0 B1 B2 (GPipe-like).
Schedule threeForwardsThenBackwards() {
  Schedule s;
  s.pipeline = Pipeline::make(1, 1, 3, PlacementKind::Linear).value();
  s.devices = {{st(OpKind::F, 0), st(OpKind::F, 1), st(OpKind::F, 2), st(OpKind::B, 0), st(OpKind::B, 1),
                st(OpKind::B, 2)}};
  return s;
}

// The first op after RELOAD(mb) in device 0's order that is not another RELOAD (several may
// be prefetched in front of the same backward).
Op afterReload(const Schedule& s, int mb) {
  const auto& row = s.devices[0];
  auto it = std::find_if(row.begin(), row.end(), [&](const Step& x) {
    return x.first == Op{OpKind::Reload, 0, mb};
  });
  EXPECT_NE(it, row.end());
  if (it == row.end()) return Op{};
  it = std::find_if(it, row.end(), [](const Step& x) { return x.first.kind != OpKind::Reload; });
  return it != row.end() ? it->first : Op{};
}

}  // namespace

TEST(ScheduleEdits, OffloadPrefetchesTheReloadOneBackwardAhead) {
  // RELOAD(2) goes in front of B1, the backward before B2, so the copy overlaps B1's compute.
  const Schedule s = threeForwardsThenBackwards();
  auto edited = addOffloadReload(s, OpRef{0, 2});
  ASSERT_TRUE(edited.ok()) << edited.error().message;
  EXPECT_EQ(edited->devices[0][3].first, (Op{OpKind::Offload, 0, 2}));
  EXPECT_EQ(afterReload(*edited, 2), (Op{OpKind::B, 0, 1}));
  EXPECT_TRUE(validateSchedule(*edited).valid());
  // The first backward has none ahead of it: its reload comes right before it.
  auto first = addOffloadReload(s, OpRef{0, 0});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(afterReload(*first, 0), (Op{OpKind::B, 0, 0}));
}

TEST(ScheduleEdits, TheEditAndTheMemoryPlanPlaceReloadsAlike) {
  const Schedule s = threeForwardsThenBackwards();
  auto planned = applyActivationPolicies(s, {ActivationPolicy::Offload});
  ASSERT_TRUE(planned.ok());
  for (int mb = 0; mb < 3; ++mb) {
    auto edited = addOffloadReload(s, OpRef{0, mb});
    ASSERT_TRUE(edited.ok()) << mb;
    EXPECT_EQ(afterReload(*edited, mb), afterReload(*planned, mb)) << "micro-batch " << mb;
  }
}

TEST(ScheduleEdits, ReloadNeverGoesAheadOfItsOwnOffload) {
  // 1F1B-like: F0 B0 F1 B1. B0 is before F1, so RELOAD(1) cannot be prefetched ahead of B0.
  Schedule s;
  s.pipeline = Pipeline::make(1, 1, 2, PlacementKind::Linear).value();
  s.devices = {{st(OpKind::F, 0), st(OpKind::W, 0), st(OpKind::F, 1), st(OpKind::W, 1)}};
  s.devices[0][1] = st(OpKind::B, 0);
  s.devices[0][3] = st(OpKind::B, 1);
  EXPECT_FALSE(addOffloadReload(s, OpRef{0, 2}).ok());  // F1 is followed at once by its B
  s.devices[0].insert(s.devices[0].begin() + 3, st(OpKind::F, 2));
  s.pipeline = Pipeline::make(1, 1, 3, PlacementKind::Linear).value();
  s.devices[0].push_back(st(OpKind::B, 2));
  // F0 B0 F1 F2 B1 B2: RELOAD(1) has no backward between OFFLOAD(1) and B1, so it precedes B1.
  auto e = addOffloadReload(s, OpRef{0, 2});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(afterReload(*e, 1), (Op{OpKind::B, 0, 1}));
}

TEST(ScheduleEdits, EditsThatDoNotApplySayWhy) {
  const Schedule s = threeForwardsThenBackwards();
  auto bad = moveStep(s, 3, 0, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("device 3"), std::string::npos);
  EXPECT_FALSE(splitBackward(s, OpRef{0, 0}).ok());  // F0 is not a B
  EXPECT_FALSE(mergeInputWeight(s, OpRef{0, 3}).ok());
  EXPECT_FALSE(addOffloadReload(s, OpRef{0, 9}).ok());
  auto split = splitBackward(s, OpRef{0, 3});
  ASSERT_TRUE(split.ok());
  auto merged = mergeInputWeight(*split, OpRef{0, 4});  // the W merges back with its I
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(*merged, s);
  auto moved = moveStep(s, 0, 5, 3);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->devices[0][3].first, (Op{OpKind::B, 0, 2}));
}

namespace {

// Device `d`'s order as PyTorch's action names, one string ("0F0 0SEND_F0 ...").
std::string rowText(const Schedule& s, int d) {
  std::string out;
  for (const Step& st : s.devices[static_cast<size_t>(d)])
    out += (out.empty() ? "" : " ") + pytorchStepText(s, st);
  return out;
}

}  // namespace

TEST(ScheduleEdits, MovingAmongComputeOpsCarriesTheirTransfers) {
  // PyTorch 2.11's compute_comms lowering of 1F1B, 2 ranks, 2 micro-batches
  // (tests/data/pytorch/1F1B_pp2_mb2_spr1_compute_comms.csv): rank 1 posts RECV_F1 before B0.
  const std::string csv =
      "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\n"
      "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\n";
  const Schedule s = readPytorchCsv(csv).value();
  ASSERT_FALSE(hasErrors(validateSchedule(s).diagnostics));

  // F1 one compute op earlier on rank 1: in front of B0 and its SEND, after its own RECV.
  auto earlier = moveAmongCompute(s, 1, 6, -1);
  ASSERT_TRUE(earlier.ok());
  EXPECT_EQ(rowText(*earlier, 1),
            "1UNSHARD 1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1 1REDUCE_GRAD 1RESHARD");
  EXPECT_FALSE(hasErrors(validateSchedule(*earlier).diagnostics));
  // Once more: F1 takes its RECV along in front of F0 and F0's RECV.
  auto again = moveAmongCompute(*earlier, 1, 4, -1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(rowText(*again, 1),
            "1UNSHARD 1RECV_F1 1F1 1RECV_F0 1F0 1B0 1SEND_B0 1B1 1SEND_B1 1REDUCE_GRAD 1RESHARD");

  // Rank 0's F1 moves later with its SEND, past RECV_B0 + B0 (the RECV belongs to B0).
  auto later = moveAmongCompute(s, 0, 3, +1);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(rowText(*later, 0),
            "0UNSHARD 0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0RECV_B1 0B1 0REDUCE_GRAD 0RESHARD");
  // And back: the inverse move restores the order.
  auto back = moveAmongCompute(*later, 0, 5, -1);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, s);

  // A transfer selected by itself moves one step; the ends of the row say so.
  auto recv = moveAmongCompute(s, 1, 3, -1);
  ASSERT_TRUE(recv.ok());
  EXPECT_EQ(rowText(*recv, 1).substr(0, 33), "1UNSHARD 1RECV_F0 1RECV_F1 1F0 1B");
  auto first = moveAmongCompute(s, 0, 0, -1);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.error().message.find("already the first"), std::string::npos);
  auto last = moveAmongCompute(s, 0, 10, +1);
  ASSERT_FALSE(last.ok());
  EXPECT_NE(last.error().message.find("already the last"), std::string::npos);
  // Without transfers it is moveStep by one.
  const Schedule g = threeForwardsThenBackwards();
  EXPECT_EQ(moveAmongCompute(g, 0, 3, -1).value(), moveStep(g, 0, 3, 2).value());
}
