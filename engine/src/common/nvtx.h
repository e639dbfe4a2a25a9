#pragma once
// NVTX ranges (header-only nvtx3, from the CUDA toolkit when CMake finds it), named as
// PyTorch's pipelining runtime names its ranges ("PP:1F3") so Nsight Systems shows the schedule. Without
// nvtx3 this is a no-op; with it and no profiler attached, a push/pop costs a few ns.
#include <string>

#ifdef PIPESTUDIO_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace ps::engine::detail {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) {
#ifdef PIPESTUDIO_HAVE_NVTX
    nvtxRangePushA(name.c_str());
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef PIPESTUDIO_HAVE_NVTX
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace ps::engine::detail
