#pragma once
// The model zoo's time model, shared by the dense and the heterogeneous generators: an op takes
// the longer of its math and its memory traffic (roofline), rounded to the nanosecond so that
// generated profiles read well.
#include <algorithm>
#include <cmath>

namespace ps::core::detail {

struct Roofline {
  double flopsPerMs = 0;
  double hbmBytesPerMs = 0;
  Roofline(double gpuTflops, double computeEfficiency, double hbmGBps)
      : flopsPerMs(gpuTflops * 1e12 * std::min(1.0, computeEfficiency) / 1e3),
        hbmBytesPerMs(hbmGBps * 1e9 / 1e3) {}
  double ms(double flops, double bytes) const {
    return std::round(std::max(flops / flopsPerMs, bytes / hbmBytesPerMs) * 1e6) / 1e6;
  }
};

}  // namespace ps::core::detail
