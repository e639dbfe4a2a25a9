#pragma once
// A batch read from a file written by PyTorch's torch.save (the zip format, PyTorch >= 1.6)
// or torch::pickle_save: a tensor of inputs, a tuple or list (inputs, targets), or a dict with
// "inputs" and optionally "targets". The first dimension is the sample. Private to the engine.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace ps::engine::detail {

struct DataFile {
  std::string path;
  at::Tensor inputs;              // on the CPU, contiguous
  at::Tensor targets;             // undefined when the file holds inputs only
  std::uint64_t contentHash = 0;  // FNV-1a of the file's bytes: ranks compare it at rendezvous
};

// Throws std::runtime_error naming the file and what is wrong with it.
DataFile loadDataFile(const std::string& path);

// What a run's data come from, as ranks compare it: "file <hash>", plus " with synthetic
// targets" when the file has none.
std::string describeDataSource(const DataFile& file);
// For people: "FILE: samples 0..n-1 of N, targets from the file" (or "from seed S").
std::string describeDataUse(const DataFile& file, std::int64_t n, std::uint64_t seed);

// The first `n` samples of `t` (read from `what` of `file`) checked against what the model
// takes: same dtype class as `like` (integer ids or floating point; converted to `like`'s dtype),
// the per-sample shape of `like` unless `anyShape`. Throws naming the file and the field.
at::Tensor takeSamples(const DataFile& file, const at::Tensor& t, const char* what, const at::Tensor& like,
                       std::int64_t n, bool anyShape);

// Integer ids of `what` must lie in [0, limit): throws naming the file, the field and the value.
void checkIds(const DataFile& file, const at::Tensor& t, const char* what, std::int64_t limit,
              const char* of);

}  // namespace ps::engine::detail
