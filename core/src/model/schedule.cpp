#include "pipestudio/core/model/schedule.h"

#include <algorithm>
#include <array>

#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace {
constexpr std::array<std::string_view, static_cast<size_t>(OpKind::kBuiltinCount)> kNames = {
    "F",
    "B",
    "I",
    "W",
    "R",
    "OFFLOAD",
    "RELOAD",
    "SEND_F",
    "RECV_F",
    "SEND_B",
    "RECV_B",
    "UNSHARD",
    "RESHARD",
    "REDUCE_GRAD",
    "WAIT_SEND_F",
    "WAIT_SEND_B",
    "WAIT_REDUCE_GRAD"};
}

bool isUserKind(OpKind k) {
  return static_cast<std::uint16_t>(k) >= kFirstUserKind;
}

std::string_view builtinKindName(OpKind k) {
  auto i = static_cast<size_t>(k);
  return i < kNames.size() ? kNames[i] : std::string_view("?");
}

std::optional<OpKind> builtinKindFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

bool isStageLevelKind(OpKind k) {
  return k == OpKind::Unshard || k == OpKind::Reshard || k == OpKind::ReduceGrad ||
         k == OpKind::WaitReduceGrad;
}

constexpr EnumName<PlacementKind> kPlacementKindNames[] = {{PlacementKind::Explicit, "explicit"},
                                                           {PlacementKind::Linear, "linear"},
                                                           {PlacementKind::Interleaved, "interleaved"},
                                                           {PlacementKind::VShape, "vshape"}};
PS_ENUM_NAME_FUNCTION(PlacementKind, kPlacementKindNames, placementKindName);

Result<Pipeline> Pipeline::make(int devices, int stages, int microbatches, PlacementKind kind) {
  if (devices < 1)
    return makeError("pipeline.devices", "devices must be at least 1, got " + std::to_string(devices));
  if (stages < 1)
    return makeError("pipeline.stages", "stages must be at least 1, got " + std::to_string(stages));
  if (microbatches < 1)
    return makeError("pipeline.microbatches",
                     "micro-batches must be at least 1, got " + std::to_string(microbatches));
  Pipeline p;
  p.devices = devices;
  p.stages = stages;
  p.microbatches = microbatches;
  // One stage per device: interleaving is the linear placement; one name for one placement.
  if (kind == PlacementKind::Interleaved && stages == devices) kind = PlacementKind::Linear;
  p.placementKind = kind;
  p.stageToDevice.resize(static_cast<size_t>(stages));
  switch (kind) {
    case PlacementKind::Linear:
      if (stages % devices != 0)
        return makeError("pipeline.placement", "linear placement needs stages (" + std::to_string(stages) +
                                                   ") to be a multiple of devices (" +
                                                   std::to_string(devices) + ")");
      for (int s = 0; s < stages; ++s) p.stageToDevice[static_cast<size_t>(s)] = s / (stages / devices);
      break;
    case PlacementKind::Interleaved:
      if (stages % devices != 0)
        return makeError("pipeline.placement",
                         "interleaved placement needs stages (" + std::to_string(stages) +
                             ") to be a multiple of devices (" + std::to_string(devices) + ")");
      for (int s = 0; s < stages; ++s) p.stageToDevice[static_cast<size_t>(s)] = s % devices;
      break;
    case PlacementKind::VShape:
      if (stages % (2 * devices) != 0)
        return makeError("pipeline.placement", "V-shape placement needs stages (" + std::to_string(stages) +
                                                   ") to be a multiple of 2 x devices (" +
                                                   std::to_string(2 * devices) + ")");
      for (int s = 0; s < stages; ++s) {
        int r = s % (2 * devices);
        p.stageToDevice[static_cast<size_t>(s)] = r < devices ? r : 2 * devices - 1 - r;
      }
      break;
    case PlacementKind::Explicit:
      return makeError("pipeline.placement", "explicit placement needs a stage-to-device list");
  }
  return p;
}

Result<Pipeline> Pipeline::makeExplicit(int devices, int microbatches, std::vector<int> stageToDevice) {
  if (stageToDevice.empty()) return makeError("pipeline.placement", "explicit placement lists no stages");
  if (devices < 1)
    return makeError("pipeline.devices", "devices must be at least 1, got " + std::to_string(devices));
  if (microbatches < 1)
    return makeError("pipeline.microbatches",
                     "micro-batches must be at least 1, got " + std::to_string(microbatches));
  for (size_t s = 0; s < stageToDevice.size(); ++s) {
    int d = stageToDevice[s];
    if (d < 0 || d >= devices)
      return makeError("pipeline.placement", "stage " + std::to_string(s) + " is placed on device " +
                                                 std::to_string(d) + ", outside 0.." +
                                                 std::to_string(devices - 1));
  }
  Pipeline p;
  p.devices = devices;
  p.stages = static_cast<int>(stageToDevice.size());
  p.microbatches = microbatches;
  p.placementKind = PlacementKind::Explicit;
  p.stageToDevice = std::move(stageToDevice);
  return p;
}

std::vector<int> Pipeline::stagesOn(int device) const {
  std::vector<int> out;
  for (int s = 0; s < stages; ++s)
    if (stageToDevice[static_cast<size_t>(s)] == device) out.push_back(s);
  return out;
}

int Pipeline::blocks() const {
  if (stageBlock.empty()) return stages;
  return *std::max_element(stageBlock.begin(), stageBlock.end()) + 1;
}

std::optional<std::string> Pipeline::routeProblem(int* routeIndex) const {
  if (routeIndex) *routeIndex = -1;
  // StageRoutes holds a table cell per route and stage.
  if (static_cast<long long>(routes.size()) * stages > limits::kMaxOps)
    return std::to_string(routes.size()) + " route groups over " + std::to_string(stages) +
           " stages are more than PipeStudio indexes (" + std::to_string(limits::kMaxOps) + " cells)";
  int nextMb = 0;
  const auto S = static_cast<size_t>(stages);
  // The position each stage holds on the routes that run it (-1: none yet).
  std::vector<int> position(S, -1);
  for (size_t r = 0; r < routes.size(); ++r) {
    const Route& route = routes[r];
    const std::string name = "route " + std::to_string(r);
    if (routeIndex) *routeIndex = static_cast<int>(r);
    if (route.stages.empty()) return name + " lists no stages";
    if (route.microbatchCount < 1) return name + " has no micro-batches";
    if (route.firstMicrobatch != nextMb)
      return name + " starts at micro-batch " + std::to_string(route.firstMicrobatch) + ", expected " +
             std::to_string(nextMb) + " (route groups cover the micro-batches in order)";
    nextMb += route.microbatchCount;
    for (size_t i = 0; i < route.stages.size(); ++i) {
      const int st = route.stages[i];
      if (st < 0 || st >= stages)
        return name + " names stage " + std::to_string(st) + ", outside 0.." + std::to_string(stages - 1);
      if (i > 0 && st <= route.stages[i - 1])
        return name + ": stage " + std::to_string(st) + " follows stage " +
               std::to_string(route.stages[i - 1]) + " (a route lists its stages in increasing order)";
    }
  }
  if (routeIndex) *routeIndex = -1;
  if (!routes.empty() && nextMb != microbatches)
    return "the route groups cover " + std::to_string(nextMb) + " micro-batches, the pipeline has " +
           std::to_string(microbatches);
  if (stageBlock.empty()) return std::nullopt;
  if (stageBlock.size() != S)
    return "the stage blocks list " + std::to_string(stageBlock.size()) + " stages, the pipeline has " +
           std::to_string(stages);
  std::vector<std::uint8_t> used(S, 0);
  for (int b : stageBlock) {
    if (b < 0 || b >= stages)
      return "stage block " + std::to_string(b) + " is outside 0.." + std::to_string(stages - 1);
    used[static_cast<size_t>(b)] = 1;
  }
  const int nBlocks = blocks();
  for (int b = 0; b < nBlocks; ++b)
    if (!used[static_cast<size_t>(b)]) return "no stage runs block " + std::to_string(b);
  // Copies of one block run the same layers: they must sit at the same depth of their routes.
  std::vector<int> depthOfBlock(static_cast<size_t>(nBlocks), -1);
  for (const Route& route : routes)
    for (size_t i = 0; i < route.stages.size(); ++i) {
      const int b = blockOf(route.stages[i]);
      int& depth = depthOfBlock[static_cast<size_t>(b)];
      if (depth >= 0 && depth != static_cast<int>(i))
        return "block " + std::to_string(b) + " runs at position " + std::to_string(depth) +
               " of one route and " + std::to_string(i) + " of another (stage " +
               std::to_string(route.stages[i]) + ")";
      depth = static_cast<int>(i);
    }
  return std::nullopt;
}

Result<Pipeline> Pipeline::withRoutes(std::vector<Route> routeGroups, std::vector<int> blockOfStage) const {
  Pipeline p = *this;
  p.routes = std::move(routeGroups);
  p.stageBlock = std::move(blockOfStage);
  if (auto problem = p.routeProblem()) return makeError("pipeline.routes", *problem);
  return p;
}

StageRoutes::StageRoutes(const Pipeline& p) : routed_(p.routed()), stages_(p.stages) {
  if (!routed_) return;
  const auto S = static_cast<size_t>(p.stages);
  routeOf_.assign(static_cast<size_t>(std::max(0, p.microbatches)), 0);
  prev_.assign(p.routes.size() * S, -1);
  next_.assign(p.routes.size() * S, -1);
  onRoute_.assign(p.routes.size() * S, 0);
  for (size_t r = 0; r < p.routes.size(); ++r) {
    const Route& route = p.routes[r];
    for (int m = route.firstMicrobatch; m < route.firstMicrobatch + route.microbatchCount; ++m)
      if (m >= 0 && m < p.microbatches) routeOf_[static_cast<size_t>(m)] = static_cast<int>(r);
    for (size_t i = 0; i < route.stages.size(); ++i) {
      const int st = route.stages[i];
      if (st < 0 || st >= p.stages) continue;
      const size_t c = r * S + static_cast<size_t>(st);
      onRoute_[c] = 1;
      prev_[c] = i > 0 ? route.stages[i - 1] : -1;
      next_[c] = i + 1 < route.stages.size() ? route.stages[i + 1] : -1;
    }
  }
}

size_t Schedule::opCount() const {
  size_t n = 0;
  for (const auto& dev : devices)
    for (const auto& st : dev) n += st.overlapped() ? 2 : 1;
  return n;
}

const UserKind* Schedule::userKind(OpKind k) const {
  if (!isUserKind(k)) return nullptr;
  size_t i = static_cast<size_t>(k) - kFirstUserKind;
  return i < userKinds.size() ? &userKinds[i] : nullptr;
}

std::string Schedule::kindName(OpKind k) const {
  if (const UserKind* u = userKind(k)) return u->name;
  return std::string(builtinKindName(k));
}

std::optional<OpKind> Schedule::kindFromName(std::string_view name) const {
  if (auto k = builtinKindFromName(name)) return k;
  for (size_t i = 0; i < userKinds.size(); ++i)
    if (userKinds[i].name == name) return static_cast<OpKind>(kFirstUserKind + i);
  return std::nullopt;
}

std::string Schedule::opName(const Op& op) const {
  std::string s = kindName(op.kind);
  if (op.microbatch >= 0) s += std::to_string(op.microbatch);
  s += "@s" + std::to_string(op.stage);
  return s;
}

std::string pytorchActionText(const Schedule& s, const Op& op) {
  std::string t = std::to_string(op.stage);
  t += s.kindName(op.kind);
  if (op.microbatch >= 0) t += std::to_string(op.microbatch);
  return t;
}

std::string pytorchStepText(const Schedule& s, const Step& st) {
  if (st.second)
    return "(" + pytorchActionText(s, st.first) + ";" + pytorchActionText(s, *st.second) + ")OVERLAP_F_B";
  return pytorchActionText(s, st.first);
}

}  // namespace ps::core
