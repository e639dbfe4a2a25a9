#pragma once
// One line for any exception: a c10::Error without its backtrace and C++ frames.
#include <exception>
#include <string>

namespace ps::engine::detail {
std::string errorText(const std::exception& e);
// Installs a c10 warning handler that prints each distinct warning once on one line, and
// raises glog's threshold to errors. libtorch 2.x keeps the handler per thread: every thread
// that runs torch ops calls this first (it is cheap after the first call on a thread).
void quietTorchLogging();
}  // namespace ps::engine::detail
