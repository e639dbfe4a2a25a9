// Reading a batch saved by torch.save: torch::jit::pickle_load reads the zip format that
// torch.save writes by default since PyTorch 1.6 (and torch::pickle_save writes).
#include "common/data_file.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/error_text.h"

namespace ps::engine::detail {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error("--inputs " + path + ": " + why);
}

std::string shapeOf(at::IntArrayRef s) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  return o.str() + ']';
}

std::uint64_t fnv1a(const std::vector<char>& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

std::vector<char> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the file");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

at::Tensor tensorOf(const std::string& path, const c10::IValue& v, const char* what) {
  if (!v.isTensor()) fail(path, std::string(what) + " is a " + v.tagKind() + ", not a tensor");
  return v.toTensor();
}

}  // namespace

std::string describeDataSource(const DataFile& file) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(file.contentHash));
  return std::string("file ") + hex + (file.targets.defined() ? "" : " with synthetic targets");
}

DataFile loadDataFile(const std::string& path) {
  DataFile f;
  f.path = path;
  const std::vector<char> bytes = readAll(path);
  f.contentHash = fnv1a(bytes);
  // torch.save's zip format starts with a local file header, "PK\x03\x04"; the pre-1.6
  // format (a bare pickle stream) cannot be read by libtorch.
  if (bytes.size() < 4 || bytes[0] != 'P' || bytes[1] != 'K' || bytes[2] != 3 || bytes[3] != 4)
    fail(path,
         "not a torch.save file in the zip format (save it with torch.save of PyTorch 1.6 or later, "
         "without _use_new_zipfile_serialization=False)");
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    const std::string why = errorText(e);
    // libtorch's unpickler lacks SETITEM and APPEND, which pickle uses for a dict of a single
    // entry and a list of a single item.
    if (why.find("Unknown opcode") != std::string::npos && why.find("0x73") != std::string::npos)
      fail(path,
           "libtorch cannot read a dict of one entry (pickle opcode SETITEM): save the tensor itself, "
           "a tuple (inputs,), or a dict with both \"inputs\" and \"targets\"");
    if (why.find("Unknown opcode") != std::string::npos && why.find("0x61") != std::string::npos)
      fail(path,
           "libtorch cannot read a list of one item (pickle opcode APPEND), nor a list inside the "
           "file: save the tensor itself, or a tuple, (inputs,) or (inputs, targets)");
    // A numpy array or another Python object: the reader knows tensors and plain containers.
    if (const size_t at = why.find("unknown type "); at != std::string::npos)
      fail(path, "holds a Python object libtorch cannot read (" + why.substr(at + 13) +
                     "); save torch tensors (torch.from_numpy(array) for a numpy array)");
    fail(path, "cannot read it as a torch.save file: " + why);
  }
  if (v.isTensor()) {
    f.inputs = v.toTensor();
  } else if (v.isTuple() || v.isList()) {
    std::vector<c10::IValue> items;
    if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) items.push_back(e);
    } else {
      for (const auto& e : v.toListRef()) items.push_back(e);
    }
    if (items.empty() || items.size() > 2)
      fail(path, "holds a sequence of " + std::to_string(items.size()) +
                     " items; give (inputs) or (inputs, targets)");
    f.inputs = tensorOf(path, items[0], "item 0 (inputs)");
    if (items.size() == 2) f.targets = tensorOf(path, items[1], "item 1 (targets)");
  } else if (v.isGenericDict()) {
    auto dict = v.toGenericDict();
    for (const auto& kv : dict) {
      if (!kv.key().isString())
        fail(path, "a dict key is a " + kv.key().tagKind() + "; keys are \"inputs\" and \"targets\"");
      const std::string key = kv.key().toStringRef();
      if (key == "inputs")
        f.inputs = tensorOf(path, kv.value(), "\"inputs\"");
      else if (key == "targets")
        f.targets = tensorOf(path, kv.value(), "\"targets\"");
      else
        fail(path, "unknown key \"" + key + "\" (keys are \"inputs\" and \"targets\")");
    }
    if (!f.inputs.defined()) fail(path, "the dict has no \"inputs\"");
  } else {
    fail(
        path,
        std::string("holds a ") + v.tagKind() +
            "; give a tensor of inputs, a tuple (inputs, targets) or a dict with \"inputs\" and \"targets\"");
  }
  for (at::Tensor* t : {&f.inputs, &f.targets}) {
    if (!t->defined()) continue;
    if (t->dim() < 1)
      fail(path, std::string(t == &f.inputs ? "inputs" : "targets") + " has no sample dimension");
    *t = t->to(at::kCPU).contiguous();
  }
  if (f.targets.defined() && f.targets.size(0) != f.inputs.size(0))
    fail(path, "inputs hold " + std::to_string(f.inputs.size(0)) + " samples but targets " +
                   std::to_string(f.targets.size(0)));
  return f;
}

std::string describeDataUse(const DataFile& file, std::int64_t n, std::uint64_t seed) {
  return file.path + ": samples 0.." + std::to_string(n - 1) + " of " + std::to_string(file.inputs.size(0)) +
         ", targets from " +
         (file.targets.defined() ? std::string("the file") : "seed " + std::to_string(seed));
}

at::Tensor takeSamples(const DataFile& file, const at::Tensor& t, const char* what, const at::Tensor& like,
                       std::int64_t n, bool anyShape) {
  const bool wantIds = !at::isFloatingType(like.scalar_type());
  const bool isIds = !at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()) &&
                     t.scalar_type() != at::kBool;
  if (wantIds != isIds)
    fail(file.path, std::string(what) + " are " + std::string(c10::toString(t.scalar_type())) +
                        "; the model takes " +
                        (wantIds ? "integer ids (int64, as torch.randint or a tokenizer gives)"
                                 : "floating-point values"));
  if (t.size(0) < n)
    fail(file.path, std::string(what) + " hold " + std::to_string(t.size(0)) + " samples; the run needs " +
                        std::to_string(n) + " (micro-batches x --microbatch-size)");
  if (!anyShape && t.sizes().slice(1) != like.sizes().slice(1))
    fail(file.path, std::string(what) + " have shape " + shapeOf(t.sizes()) + "; the model takes [N" +
                        (like.dim() > 1 ? ", " : "") + shapeOf(like.sizes().slice(1)).substr(1));
  at::Tensor out = t.narrow(0, 0, n).to(like.scalar_type()).contiguous();
  if (out.is_floating_point()) {
    // Checked now, not at the first op that meets it: a NaN there would fail the run midway
    // and name an op, not the sample. (Values beyond the model's dtype become Inf here.)
    const at::Tensor bad = at::logical_not(at::isfinite(out)).reshape({n, -1}).any(1);
    if (bad.any().item<bool>()) {
      const std::int64_t first = bad.nonzero()[0][0].item<std::int64_t>();
      const std::int64_t count = bad.sum().item<std::int64_t>();
      fail(file.path, std::string(what) + " hold NaN or Inf values (sample " + std::to_string(first) +
                          (count > 1 ? " and " + std::to_string(count - 1) + " more" : std::string()) +
                          " of the " + std::to_string(n) + " the run takes)");
    }
  }
  return out;
}

void checkIds(const DataFile& file, const at::Tensor& t, const char* what, std::int64_t limit,
              const char* of) {
  if (t.numel() == 0) return;
  const std::int64_t lo = t.min().item<std::int64_t>(), hi = t.max().item<std::int64_t>();
  if (lo < 0 || hi >= limit)
    fail(file.path, std::string(what) + " hold id " + std::to_string(lo < 0 ? lo : hi) + "; " + of +
                        " takes 0.." + std::to_string(limit - 1));
}

}  // namespace ps::engine::detail
