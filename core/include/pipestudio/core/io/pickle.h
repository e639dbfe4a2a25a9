#pragma once
// A reader of Python pickles of plain data, into JSON values: what PyTorch's flight recorder
// writes (torch::jit::Pickler, protocol 2: dicts, lists, tuples, strings, numbers, booleans,
// None, and int/float/bool lists it wraps in torch.jit._pickle.build_*list) and what Python's
// pickle.dump writes for the same data (protocols 2 to 5). No code runs: a global other than
// torch.jit._pickle's list builders, an object build or any opcode outside that set is an error
// naming the opcode and its byte offset. Tuples and sets read as arrays, bytes as strings, a dict
// key that is not a string as its JSON text. Bounded: a pickle that refers to the same container
// many times (or to itself) is refused once the values it stands for pass a budget.
#include <nlohmann/json.hpp>
#include <string_view>

#include "pipestudio/core/model/result.h"

namespace ps::core {

// `name` names the input in errors ("rank0: byte 812: ...").
Result<nlohmann::json> readPickle(std::string_view bytes, std::string_view name);

}  // namespace ps::core
