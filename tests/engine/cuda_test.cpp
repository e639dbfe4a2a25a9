// GPU paths. On a CPU-only build: --device cuda is refused with a clear message and the GPU
// tests skip. On a GPU: gradients equal the unpipelined model's for 1F1B and ZB-H1 on one GPU
// (a stream per pipeline device), offload to pinned memory and overlapped pairs keep them
// exact, the timeline comes from CUDA events and memory from the caching allocator; with two
// GPUs, two processes over NCCL.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "background_process.h"
#include "cli/cli_runner.h"
#include "engine_checks.h"
#include "fixtures/schedules.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/engine/engine.h"

using namespace ps::engine;
using ps::core::ScheduleKind;
using namespace ps::test;

namespace {

RunOptions gpuOptions() {
  RunOptions o;
  o.model = parseModelSpec("gpt:layers=2,hidden=32,heads=2,seq=8,vocab=32").value();
  o.device = Device::Cuda;
  o.microbatchSize = 2;
  o.checkGradients = true;
  o.timeoutSeconds = 60;
  o.iterations = 2;
  o.warmup = 1;
  return o;
}

void expectExactOnGpu(const ps::core::Schedule& s, const RunOptions& o) {
  RunReport r;
  ASSERT_NO_FATAL_FAILURE(runToTheEnd(s, o, r));
  expectGradientsPassed(s, r);
  ASSERT_EQ(r.timeline.ops.size(), s.opCount());
  // CUDA-event times: inside the iteration, ordered within each op.
  for (const auto& op : r.timeline.ops) {
    EXPECT_GE(op.start, 0.0);
    EXPECT_LE(op.start, op.end);
    EXPECT_LE(op.end, r.iterationMs.back() + 1.0);
  }
  // Allocator statistics: the GPU holds at least the model while ops run.
  bool sawBytes = false;
  for (const auto& dev : r.timeline.memory)
    for (const auto& m : dev) sawBytes = sawBytes || m.bytes > 0;
  EXPECT_TRUE(sawBytes);
}

#define SKIP_WITHOUT_GPU()                                                                                  \
  if (!cudaAvailable())                                                                                     \
  GTEST_SKIP() << (cudaCompiled() ? "no GPU visible to this process"                                        \
                                  : "CPU-only build (Debian libtorch): GPU tests run on a CUDA build, see " \
                                    "docs/engine.md \"Builds\"")

}  // namespace

TEST(CudaBuild, DeviceCudaIsRefusedClearlyWithoutAGpu) {
  if (cudaAvailable()) GTEST_SKIP() << "a GPU is present: nothing to refuse";
  auto r = runSchedule(generated(ScheduleKind::OneFOneB), gpuOptions());
  ASSERT_FALSE(r.ok());
  const std::string msg = ps::core::formatDiagnostics(r.errors());
  EXPECT_NE(msg.find("--device cuda"), std::string::npos) << msg;
  if (!cudaCompiled()) {
    EXPECT_NE(msg.find("CPU-only"), std::string::npos) << msg;
    EXPECT_EQ(cudaDeviceCount(), 0);
  }
}

TEST(CudaBuild, SeveralRanksOnTooFewGpusAreRefusedBeforeAnyStarts) {
  // NCCL refuses two ranks on one GPU: --nproc N --device cuda needs N GPUs on this host, and a
  // run asking for more than are visible is refused before a single rank starts (quickly, and
  // without a rank's output), naming the reason and the way that works (threads).
  // A CPU-only build (no CUDA at all) says that first.
  const int gpus = cudaDeviceCount(), n = std::max(2, gpus + 1);
  const std::string path = writeSchedule(ScheduleKind::OneFOneB, n, 2 * n, "nccl_refusal");
  const auto start = std::chrono::steady_clock::now();
  CliResult r = runCli("run " + path + " --model mlp:layers=4,hidden=8 --device cuda --nproc " +
                       std::to_string(n) + " --events jsonl");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exitCode, 1) << r.out;
  if (cudaCompiled()) {
    EXPECT_NE(r.out.find(std::to_string(n) + " processes on this host need " + std::to_string(n) +
                         " GPUs over NCCL (one GPU per rank: NCCL refuses two ranks on one GPU)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("Leave out --nproc"), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("built against a CPU-only libtorch"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("\"stage\":\"refused\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"type\":\"started\""), std::string::npos) << r.out;
  EXPECT_LT(seconds, 10.0);
}

TEST(CudaGpu, OneFOneBGradientsEqualUnpipelined) {
  SKIP_WITHOUT_GPU();
  expectExactOnGpu(generated(ScheduleKind::OneFOneB), gpuOptions());
}

TEST(CudaGpu, ZbH1GradientsEqualUnpipelined) {
  SKIP_WITHOUT_GPU();
  expectExactOnGpu(generated(ScheduleKind::ZBH1), gpuOptions());
}

TEST(CudaGpu, OffloadToPinnedMemoryAndRecomputeStayExact) {
  SKIP_WITHOUT_GPU();
  expectExactOnGpu(ps::test::withOffload(generated(ScheduleKind::OneFOneB)), gpuOptions());
  expectExactOnGpu(ps::test::withRecompute(generated(ScheduleKind::ZBH1)), gpuOptions());
}

TEST(CudaGpu, OverlappedPairsOnTwoStreamsStayExact) {
  SKIP_WITHOUT_GPU();
  auto s = generated(ScheduleKind::DualPipeV, 2, 8);
  bool pairs = false;
  for (const auto& dev : s.devices)
    for (const auto& st : dev) pairs = pairs || st.overlapped();
  ASSERT_TRUE(pairs) << "DualPipeV should overlap F and B";
  expectExactOnGpu(s, gpuOptions());
}

TEST(CudaGpu, TwoProcessesOverNccl) {
  SKIP_WITHOUT_GPU();
  if (cudaDeviceCount() < 2) GTEST_SKIP() << "NCCL test needs 2 GPUs, " << cudaDeviceCount() << " visible";
  for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::ZBH1}) {
    auto s = generated(k);
    const std::string pipe = ::testing::TempDir() + "ps_cuda_nccl_" + std::to_string(::getpid()) + "_" +
                             std::string(ps::core::scheduleKindName(k)) + ".pipe";
    expectCliRunPassesGradientCheck(
        s, pipe,
        " --model gpt:layers=2,hidden=32,heads=2,seq=8,vocab=32 --device cuda --nproc 2"
        " --check-gradients --timeout 60");
  }
}
