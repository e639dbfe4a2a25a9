#include "pipestudio/core/planning/generators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pipestudio/core/analysis/validator.h"

using namespace ps::core;

namespace {

// "F0 F1 B0" style listing of one device's order (stage omitted when omitStage).
std::string order(const Schedule& s, int device, bool withStage = false) {
  std::string out;
  for (const Step& st : s.devices[static_cast<size_t>(device)]) {
    if (!out.empty()) out += ' ';
    auto one = [&](const Op& op) {
      return withStage ? s.opName(op) : s.kindName(op.kind) + std::to_string(op.microbatch);
    };
    out += st.second ? "(" + one(st.first) + ";" + one(*st.second) + ")" : one(st.first);
  }
  return out;
}

Schedule gen(ScheduleKind k, int d, int m, int chunks = 0) {
  auto r = generateSchedule(k, GeneratorOptions{d, m, chunks});
  EXPECT_TRUE(r.ok()) << scheduleKindName(k) << " D=" << d << " M=" << m << ": "
                      << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Schedule{};
}

// Start times when every op takes one unit and each device runs its order as early as the
// dependencies allow (an overlapped pair takes one unit). Returns per-op start by id.
std::vector<int> unitTimes(const Schedule& s, const DependencyGraph& g) {
  std::vector<int> start(static_cast<size_t>(g.size()), -1);
  std::vector<int> pos(static_cast<size_t>(g.devices()));
  std::vector<int> free(static_cast<size_t>(g.devices()), 0);
  for (int d = 0; d < g.devices(); ++d) pos[static_cast<size_t>(d)] = g.deviceBegin(d);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int d = 0; d < g.devices(); ++d) {
      auto du = static_cast<size_t>(d);
      while (pos[du] < g.deviceBegin(d + 1)) {
        int id = pos[du];
        int width = id + 1 < g.deviceBegin(d + 1) && g.isPairSecond(id + 1) ? 2 : 1;
        int t = free[du];
        bool ready = true;
        for (int k = 0; k < width && ready; ++k)
          for (int dep : g.dependencies(id + k)) {
            if (dep >= id && dep < id + width) continue;
            if (start[static_cast<size_t>(dep)] < 0) {
              ready = false;
              break;
            }
            t = std::max(t, start[static_cast<size_t>(dep)] + 1);
          }
        if (!ready) break;
        for (int k = 0; k < width; ++k) start[static_cast<size_t>(id + k)] = t;
        free[du] = t + 1;
        pos[du] += width;
        progress = true;
      }
    }
  }
  (void)s;
  return start;
}

// With unit op times, every device runs its ops back to back from its first to its last.
void expectNoDeviceIdles(const Schedule& s, int D, int M, bool withStage) {
  DependencyGraph g(s);
  auto start = unitTimes(s, g);
  for (int d = 0; d < D; ++d) {
    int first = start[static_cast<size_t>(g.deviceBegin(d))];
    int last = start[static_cast<size_t>(g.deviceBegin(d + 1) - 1)];
    EXPECT_EQ(last - first + 1, g.deviceBegin(d + 1) - g.deviceBegin(d))
        << "D=" << D << " M=" << M << " device " << d << ": " << order(s, d, withStage);
  }
}

}  // namespace

TEST(Generators, KindNamesRoundTrip) {
  for (ScheduleKind k : allScheduleKinds()) {
    auto back = scheduleKindFromName(scheduleKindName(k));
    ASSERT_TRUE(back.has_value()) << scheduleKindName(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(scheduleKindFromName("2f2b").has_value());
  EXPECT_EQ(allScheduleKinds().size(), 9u);
}

TEST(Generators, OneFOneBTwoDevicesThreeMicrobatches) {
  Schedule s = gen(ScheduleKind::OneFOneB, 2, 3);
  EXPECT_EQ(order(s, 0), "F0 F1 B0 F2 B1 B2");
  EXPECT_EQ(order(s, 1), "F0 B0 F1 B1 F2 B2");
  EXPECT_EQ(s.pipeline.stages, 2);
  EXPECT_EQ(s.pipeline.stageToDevice, (std::vector<int>{0, 1}));
}

TEST(Generators, OneFOneBWarmupIsCappedByMicrobatches) {
  // Device 0 of 4 wants 3 warm-up forwards but only 2 micro-batches exist.
  Schedule s = gen(ScheduleKind::OneFOneB, 4, 2);
  EXPECT_EQ(order(s, 0), "F0 F1 B0 B1");
  EXPECT_EQ(order(s, 3), "F0 B0 F1 B1");
}

TEST(Generators, GPipeAllForwardsThenAllBackwards) {
  Schedule s = gen(ScheduleKind::GPipe, 3, 3);
  for (int d = 0; d < 3; ++d) EXPECT_EQ(order(s, d), "F0 F1 F2 B0 B1 B2");
}

TEST(Generators, InterleavedFollowsPyTorchsOrder) {
  // PyTorch's ScheduleInterleaved1F1B (and Megatron's, when M is a multiple of D above D):
  // D=2, V=2, M=4, device 0: warm-up (2-0-1)*2 + (2-1)*2 = 4 forwards; rounds of 2
  // micro-batches per chunk; backwards run the chunks in reverse.
  Schedule s = gen(ScheduleKind::Interleaved1F1B, 2, 4);
  EXPECT_EQ(s.pipeline.stages, 4);
  EXPECT_EQ(s.pipeline.stageToDevice, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(order(s, 0, true),
            "F0@s0 F1@s0 F0@s2 F1@s2 "
            "F2@s0 B0@s2 F3@s0 B1@s2 F2@s2 B0@s0 F3@s2 B1@s0 "
            "B2@s2 B3@s2 B2@s0 B3@s0");
  // Device 1 (last): warm-up (V-1)*D = 2.
  EXPECT_EQ(order(s, 1, true).substr(0, 11), "F0@s1 F1@s1");
  EXPECT_EQ(s.devices[1][2].first, (Op{OpKind::F, 3, 0}));
  EXPECT_EQ(s.devices[1][3].first, (Op{OpKind::B, 3, 0}));
}

TEST(Generators, InterleavedNeedsMicrobatchesInEqualRounds) {
  // PyTorch's rule, not Megatron's "a multiple of D": max(1, M / D) rounds must divide M.
  EXPECT_TRUE(generateSchedule(ScheduleKind::Interleaved1F1B, GeneratorOptions{4, 6, 2}).ok());
  EXPECT_TRUE(generateSchedule(ScheduleKind::Interleaved1F1B, GeneratorOptions{4, 3, 2}).ok());
  auto r = generateSchedule(ScheduleKind::Interleaved1F1B, GeneratorOptions{4, 9, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("9 is not a multiple of max(1, 9 / 4) = 2 rounds"), std::string::npos)
      << r.error().message;
  // When M == D, PyTorch starts backward before all forwards (Megatron runs every forward
  // first): device 1 of 2 warms up with 2 forwards of stage 1, then 1F1B on stage 3.
  Schedule s = gen(ScheduleKind::Interleaved1F1B, 2, 2);
  EXPECT_EQ(order(s, 1, true), "F0@s1 F1@s1 F0@s3 B0@s3 F1@s3 B1@s3 B0@s1 B1@s1");
}

TEST(Generators, LoopedBfsRunsStagesBreadthFirst) {
  Schedule s = gen(ScheduleKind::LoopedBFS, 2, 2);
  EXPECT_EQ(order(s, 1, true), "F0@s1 F1@s1 F0@s3 F1@s3 B1@s3 B0@s3 B1@s1 B0@s1");
}

TEST(Generators, ZbH1SplitsBackwardAndDefersWeights) {
  Schedule s = gen(ScheduleKind::ZBH1, 2, 4);
  // Device 0: 1F1B's warm-up, W right after each I; device 1 holds back one W.
  EXPECT_EQ(order(s, 0), "F0 F1 I0 W0 F2 I1 W1 F3 I2 W2 I3 W3");
  EXPECT_EQ(order(s, 1), "F0 I0 F1 I1 W0 F2 I2 W1 F3 I3 W2 W3");
}

TEST(Generators, ZbH2HasNoBubblesWithUnitTimes) {
  for (int D = 1; D <= 8; ++D) {
    for (int M = 2 * D; M <= 4 * D; ++M) {
      expectNoDeviceIdles(gen(ScheduleKind::ZBH2, D, M), D, M, false);
    }
  }
}

TEST(Generators, ZbVUsesVShapeAndSplitBackward) {
  Schedule s = gen(ScheduleKind::ZBV, 2, 4);
  EXPECT_EQ(s.pipeline.stages, 4);
  EXPECT_EQ(s.pipeline.stageToDevice, (std::vector<int>{0, 1, 1, 0}));
  // Device 0 warms up with 2*(2-0)-1 = 3 forwards of stage 0, then F of stage 3 with its I and W.
  EXPECT_EQ(order(s, 0, true).substr(0, 35), "F0@s0 F1@s0 F2@s0 F0@s3 I0@s3 W0@s3");
  auto r = generateSchedule(ScheduleKind::ZBV, GeneratorOptions{2, 4, 3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--chunks 2"), std::string::npos);
}

TEST(Generators, DualPipeVOverlapsForwardAndBackwardInSteadyState) {
  Schedule s = gen(ScheduleKind::DualPipeV, 2, 8);
  int pairs = 0;
  for (const auto& dev : s.devices)
    for (const auto& st : dev)
      if (st.overlapped()) {
        ++pairs;
        EXPECT_EQ(st.first.kind, OpKind::F);
        EXPECT_EQ(st.second->kind, OpKind::B);
        EXPECT_NE(st.first.microbatch, st.second->microbatch);
      }
  EXPECT_GT(pairs, 0);
  auto r = generateSchedule(ScheduleKind::DualPipeV, GeneratorOptions{4, 7});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("2 x devices = 8"), std::string::npos) << r.error().message;
}

TEST(Generators, ZbH1WithChunksIsInterleavedZeroBubble) {
  // PyTorch's ScheduleInterleavedZeroBubble: zero bubble's I/W split over interleaved chunks.
  Schedule s = gen(ScheduleKind::ZBH1, 2, 4, 2);
  EXPECT_EQ(s.pipeline.placementKind, PlacementKind::Interleaved);
  EXPECT_EQ(order(s, 1, true).substr(0, 35), "F0@s1 F1@s1 F0@s3 I0@s3 F1@s3 I1@s3");
  EXPECT_FALSE(generateSchedule(ScheduleKind::ZBH1, GeneratorOptions{4, 9, 2}).ok());
  EXPECT_TRUE(generateSchedule(ScheduleKind::ZBH1, GeneratorOptions{4, 9, 1}).ok());
}

TEST(Generators, OneStageKindsRefuseChunks) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZBH2}) {
    auto r = generateSchedule(k, GeneratorOptions{2, 4, 2});
    ASSERT_FALSE(r.ok()) << scheduleKindName(k);
    EXPECT_NE(r.error().message.find("--chunks 1"), std::string::npos);
  }
  EXPECT_FALSE(generateSchedule(ScheduleKind::GPipe, GeneratorOptions{0, 4}).ok());
  EXPECT_FALSE(generateSchedule(ScheduleKind::GPipe, GeneratorOptions{2, 0}).ok());
}

// Property: every kind, D in 1..8, every M in 1..4D the kind accepts is valid and
// deadlock-free, and has the expected op count.
TEST(Generators, EveryAcceptedSizeIsValidAndDeadlockFree) {
  int accepted = 0;
  for (ScheduleKind k : allScheduleKinds()) {
    for (int D = 1; D <= 8; ++D) {
      for (int M = 1; M <= 4 * D; ++M) {
        auto r = generateSchedule(k, GeneratorOptions{D, M});
        if (!r.ok()) {
          EXPECT_EQ(r.error().code, "generate.size");
          continue;
        }
        ++accepted;
        const Schedule& s = *r;
        auto rep = validateSchedule(s);
        EXPECT_TRUE(rep.valid()) << scheduleKindName(k) << " D=" << D << " M=" << M << ": "
                                 << formatDiagnostics(rep.diagnostics);
        EXPECT_EQ(s.pipeline.devices, D);
        EXPECT_EQ(s.pipeline.microbatches, M);
        EXPECT_EQ(static_cast<int>(s.devices.size()), D);
      }
    }
  }
  EXPECT_GT(accepted, 500);
}

TEST(Generators, InterleavedWithMoreChunksIsValid) {
  for (int V = 1; V <= 4; ++V)
    for (int D = 1; D <= 4; ++D)
      for (int M = D; M <= 3 * D; M += D) {
        Schedule s = gen(ScheduleKind::Interleaved1F1B, D, M, V);
        EXPECT_EQ(s.pipeline.stages, D * V);
        EXPECT_TRUE(validateSchedule(s).valid()) << "V=" << V << " D=" << D << " M=" << M;
        Schedule l = gen(ScheduleKind::LoopedBFS, D, M, V);
        EXPECT_TRUE(validateSchedule(l).valid()) << "looped V=" << V << " D=" << D << " M=" << M;
      }
}

TEST(Generators, ZbH2KeepsAtMostTwoDMinusOneMicrobatchesInFlight) {
  for (int D = 1; D <= 6; ++D) {
    for (int M = 1; M <= 4 * D; ++M) {
      Schedule s = gen(ScheduleKind::ZBH2, D, M);
      int peak0 = 0;
      for (int d = 0; d < D; ++d) {
        int inFlight = 0, peak = 0;
        for (const Step& st : s.devices[static_cast<size_t>(d)]) {
          if (st.first.kind == OpKind::F) ++inFlight;
          if (st.first.kind == OpKind::W) --inFlight;
          peak = std::max(peak, inFlight);
        }
        EXPECT_LE(peak, 2 * D - 1) << "D=" << D << " M=" << M << " device " << d;
        if (d == 0) peak0 = peak;
      }
      // The first device warms up with the extra forwards (ZB-H2's 2p - 1).
      EXPECT_EQ(peak0, std::min(M, 2 * D - 1)) << "D=" << D << " M=" << M;
    }
  }
}

// Zero Bubble's claim for ZB-H1: with F = I = W, the bubble shrinks from 1F1B's
// (D - 1)(F + B) = 3(D - 1) to (D - 1)(F + I - W) = D - 1 per device.
TEST(Generators, ZbH1MakespanWithUnitTimes) {
  for (int D = 2; D <= 8; ++D) {
    for (int M = D; M <= 4 * D; ++M) {
      Schedule s = gen(ScheduleKind::ZBH1, D, M);
      DependencyGraph g(s);
      auto start = unitTimes(s, g);
      int makespan = 0;
      for (int t : start) makespan = std::max(makespan, t + 1);
      EXPECT_EQ(makespan, 3 * M + D - 1) << "D=" << D << " M=" << M;
    }
  }
}

// ZB-V's claim (Zero Bubble section 6, PyTorch's ScheduleZBVZeroBubble): with F = I = W and
// enough micro-batches, no device idles between its first and last op.
TEST(Generators, ZbVHasNoBubblesWithUnitTimes) {
  for (int D = 1; D <= 6; ++D) {
    for (int M = 2 * D; M <= 4 * D; ++M) {
      expectNoDeviceIdles(gen(ScheduleKind::ZBV, D, M), D, M, true);
    }
  }
}
