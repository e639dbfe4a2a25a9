// Designer edits as pure functions on a Schedule (schedule_edits.h).
#include "pipestudio/core/planning/schedule_edits.h"

#include <algorithm>
#include <string>

namespace ps::core {

const Op* opAt(const Schedule& s, OpRef at) {
  if (at.device < 0 || at.device >= static_cast<int>(s.devices.size())) return nullptr;
  const auto& row = s.devices[static_cast<size_t>(at.device)];
  if (at.step < 0 || at.step >= static_cast<int>(row.size())) return nullptr;
  return &row[static_cast<size_t>(at.step)].first;
}

const Op& backwardOpOf(const Step& st) {
  if (st.second && (st.second->kind == OpKind::B || st.second->kind == OpKind::I)) return *st.second;
  return st.first;
}

bool isBackwardStep(const Step& st) {
  const OpKind k = backwardOpOf(st).kind;
  return k == OpKind::B || k == OpKind::I;
}

std::size_t reloadSlot(const std::vector<Step>& row, std::size_t target, std::size_t earliest) {
  for (std::size_t p = std::min(target, row.size()); p-- > earliest;)
    if (isBackwardStep(row[p])) return p;
  return target;
}

namespace {

std::string where(const Schedule& s, OpRef at) {
  const Op* op = opAt(s, at);
  return (op ? s.opName(*op) : std::string("op")) + " on device " + std::to_string(at.device);
}

std::string noOpAt(OpRef at) {
  return "no op at device " + std::to_string(at.device) + " step " + std::to_string(at.step);
}

std::string microbatchOfStage(const Op& op) {
  return "micro-batch " + std::to_string(op.microbatch) + " of stage " + std::to_string(op.stage);
}

int findStep(const std::vector<Step>& row, OpKind kind, int stage, int mb, int from = 0) {
  for (int i = std::max(0, from); i < static_cast<int>(row.size()); ++i) {
    const Step& st = row[static_cast<size_t>(i)];
    if (!st.overlapped() && st.first.kind == kind && st.first.stage == stage && st.first.microbatch == mb)
      return i;
  }
  return -1;
}

bool isBackwardOrRecompute(OpKind k) {
  return k == OpKind::B || k == OpKind::I || k == OpKind::R;
}

}  // namespace

Result<Schedule> moveStep(const Schedule& s, int device, int from, int to) {
  if (device < 0 || device >= static_cast<int>(s.devices.size()))
    return makeError("edit.device", "device " + std::to_string(device) + " does not exist");
  const auto& row = s.devices[static_cast<size_t>(device)];
  const int n = static_cast<int>(row.size());
  if (from < 0 || from >= n || to < 0 || to >= n)
    return makeError("edit.move", "cannot move step " + std::to_string(from) + " to " + std::to_string(to) +
                                      " on device " + std::to_string(device) + " (" + std::to_string(n) +
                                      " steps)");
  Schedule out = s;
  auto& r = out.devices[static_cast<size_t>(device)];
  if (from < to)
    std::rotate(r.begin() + from, r.begin() + from + 1, r.begin() + to + 1);
  else if (from > to)
    std::rotate(r.begin() + to, r.begin() + from, r.begin() + from + 1);
  return out;
}

namespace {

bool isTransferKind(OpKind k) {
  return k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB;
}

bool isTransferStep(const Step& st) {
  return !st.overlapped() && isTransferKind(st.first.kind);
}

// Whether the transfer `t` belongs to `op`: the RECV of its input or the SEND of its output.
bool belongsTo(const Op& t, const Op& op, bool receive) {
  if (t.stage != op.stage || t.microbatch != op.microbatch) return false;
  if (op.kind == OpKind::F) return t.kind == (receive ? OpKind::RecvF : OpKind::SendF);
  if (op.kind == OpKind::B || op.kind == OpKind::I)
    return t.kind == (receive ? OpKind::RecvB : OpKind::SendB);
  return false;
}

bool belongsToStep(const Step& transfer, const Step& anchor, bool receive) {
  if (!isTransferStep(transfer)) return false;
  return belongsTo(transfer.first, anchor.first, receive) ||
         (anchor.second && belongsTo(transfer.first, *anchor.second, receive));
}

// The compute step at `a` with its own RECVs right before it and SENDs right after it.
std::pair<int, int> unitOf(const std::vector<Step>& row, int a) {
  int first = a, last = a;
  while (first > 0 && belongsToStep(row[static_cast<size_t>(first - 1)], row[static_cast<size_t>(a)], true))
    --first;
  while (last + 1 < static_cast<int>(row.size()) &&
         belongsToStep(row[static_cast<size_t>(last) + 1], row[static_cast<size_t>(a)], false))
    ++last;
  return {first, last};
}

}  // namespace

Result<Schedule> moveAmongCompute(const Schedule& s, int device, int step, int delta) {
  if (device < 0 || device >= static_cast<int>(s.devices.size()))
    return makeError("edit.device", "device " + std::to_string(device) + " does not exist");
  const auto& row = s.devices[static_cast<size_t>(device)];
  const int n = static_cast<int>(row.size());
  if (step < 0 || step >= n || delta == 0)
    return makeError("edit.move", "cannot move step " + std::to_string(step) + " on device " +
                                      std::to_string(device) + " (" + std::to_string(n) + " steps)");
  if (isTransferStep(row[static_cast<size_t>(step)]))
    return moveStep(s, device, step, delta < 0 ? step - 1 : step + 1);
  const auto [first, last] = unitOf(row, step);
  const std::string name = s.opName(row[static_cast<size_t>(step)].first);
  Schedule out = s;
  auto& r = out.devices[static_cast<size_t>(device)];
  if (delta < 0) {
    int prev = first - 1;
    while (prev >= 0 && isTransferStep(row[static_cast<size_t>(prev)])) --prev;
    if (prev < 0)
      return makeError("edit.move",
                       name + " is already the first compute op on device " + std::to_string(device));
    // The unit goes in front of the previous compute op's unit; loose transfers between them
    // stay where they were relative to the others.
    const int to = unitOf(row, prev).first;
    std::rotate(r.begin() + to, r.begin() + first, r.begin() + last + 1);
  } else {
    int next = last + 1;
    while (next < n && isTransferStep(row[static_cast<size_t>(next)])) ++next;
    if (next >= n)
      return makeError("edit.move",
                       name + " is already the last compute op on device " + std::to_string(device));
    const int end = unitOf(row, next).second;
    std::rotate(r.begin() + first, r.begin() + last + 1, r.begin() + end + 1);
  }
  return out;
}

Result<Schedule> splitBackward(const Schedule& s, OpRef at) {
  const Op* op = opAt(s, at);
  if (!op) return makeError("edit.split", noOpAt(at));
  const auto& step = s.devices[static_cast<size_t>(at.device)][static_cast<size_t>(at.step)];
  if (step.overlapped() || op->kind != OpKind::B)
    return makeError("edit.split",
                     where(s, at) + " is not a full backward (B) that could split into I and W");
  Schedule out = s;
  auto& r = out.devices[static_cast<size_t>(at.device)];
  Op i = *op, w = *op;
  i.kind = OpKind::I;
  w.kind = OpKind::W;
  r[static_cast<size_t>(at.step)] = Step{i, std::nullopt};
  r.insert(r.begin() + at.step + 1, Step{w, std::nullopt});
  return out;
}

Result<Schedule> mergeInputWeight(const Schedule& s, OpRef at) {
  const Op* op = opAt(s, at);
  if (!op) return makeError("edit.merge", noOpAt(at));
  if (op->kind != OpKind::I && op->kind != OpKind::W)
    return makeError("edit.merge", where(s, at) + " is neither I nor W; only an I and its W merge into B");
  const auto& row = s.devices[static_cast<size_t>(at.device)];
  const int iStep = op->kind == OpKind::I ? at.step : findStep(row, OpKind::I, op->stage, op->microbatch);
  const int wStep = op->kind == OpKind::W ? at.step : findStep(row, OpKind::W, op->stage, op->microbatch);
  if (iStep < 0 || wStep < 0)
    return makeError("edit.merge", microbatchOfStage(*op) + " has no " + (iStep < 0 ? "I" : "W") +
                                       " on device " + std::to_string(at.device) + " to merge with");
  Schedule out = s;
  auto& r = out.devices[static_cast<size_t>(at.device)];
  Op b = *op;
  b.kind = OpKind::B;
  r[static_cast<size_t>(iStep)] = Step{b, std::nullopt};
  r.erase(r.begin() + wStep);
  return out;
}

bool stageRecomputes(const Schedule& s, int stage) {
  for (const auto& row : s.devices)
    for (const auto& st : row)
      if (st.first.kind == OpKind::R && st.first.stage == stage) return true;
  return false;
}

Result<Schedule> toggleRecompute(const Schedule& s, int stage) {
  if (stage < 0 || stage >= s.pipeline.stages)
    return makeError("edit.recompute", "stage " + std::to_string(stage) + " does not exist");
  Schedule out = s;
  if (stageRecomputes(s, stage)) {
    for (auto& row : out.devices)
      row.erase(std::remove_if(row.begin(), row.end(),
                               [&](const Step& st) {
                                 return !st.overlapped() && st.first.kind == OpKind::R &&
                                        st.first.stage == stage;
                               }),
                row.end());
    return out;
  }
  const int d = s.pipeline.deviceOf(stage);
  auto& row = out.devices[static_cast<size_t>(d)];
  std::vector<char> done(static_cast<size_t>(s.pipeline.microbatches), 0);
  for (size_t i = 0; i < row.size(); ++i) {
    // The backward of an overlapped pair is its second op.
    const Op& bw = row[i].overlapped() && row[i].second ? *row[i].second : row[i].first;
    if (bw.stage != stage || (bw.kind != OpKind::B && bw.kind != OpKind::I)) continue;
    if (bw.microbatch < 0 || bw.microbatch >= s.pipeline.microbatches ||
        done[static_cast<size_t>(bw.microbatch)])
      continue;
    done[static_cast<size_t>(bw.microbatch)] = 1;
    row.insert(row.begin() + static_cast<long>(i), Step{Op{OpKind::R, stage, bw.microbatch}, std::nullopt});
    ++i;  // skip the backward we just passed
  }
  if (std::none_of(done.begin(), done.end(), [](char c) { return c != 0; }))
    return makeError("edit.recompute",
                     "stage " + std::to_string(stage) + " has no backward to recompute for");
  return out;
}

Result<Schedule> addOffloadReload(const Schedule& s, OpRef at) {
  const Op* op = opAt(s, at);
  if (!op) return makeError("edit.offload", noOpAt(at));
  if (op->microbatch < 0) return makeError("edit.offload", where(s, at) + " belongs to no micro-batch");
  const auto& row = s.devices[static_cast<size_t>(at.device)];
  const int f = findStep(row, OpKind::F, op->stage, op->microbatch);
  if (f < 0)
    return makeError("edit.offload", "F" + std::to_string(op->microbatch) + "@s" + std::to_string(op->stage) +
                                         " is not on device " + std::to_string(at.device));
  if (findStep(row, OpKind::Offload, op->stage, op->microbatch) >= 0)
    return makeError("edit.offload", microbatchOfStage(*op) + " is already offloaded");
  int bw = -1;
  for (int i = f + 1; i < static_cast<int>(row.size()); ++i) {
    const Step& st = row[static_cast<size_t>(i)];
    const Op& o = st.overlapped() && st.second ? *st.second : st.first;
    if (o.stage == op->stage && o.microbatch == op->microbatch && isBackwardOrRecompute(o.kind)) {
      bw = i;
      break;
    }
  }
  if (bw < 0) return makeError("edit.offload", microbatchOfStage(*op) + " has no backward after its forward");
  if (bw == f + 1)
    return makeError("edit.offload", microbatchOfStage(*op) + " has no gap between its forward and backward");
  const Op reload{OpKind::Reload, op->stage, op->microbatch};
  const Op offload{OpKind::Offload, op->stage, op->microbatch};
  const std::size_t slot = reloadSlot(row, static_cast<std::size_t>(bw), static_cast<std::size_t>(f) + 1);
  Schedule out = s;
  auto& r = out.devices[static_cast<size_t>(at.device)];
  r.insert(r.begin() + static_cast<long>(slot), Step{reload, std::nullopt});
  r.insert(r.begin() + f + 1, Step{offload, std::nullopt});
  return out;
}

}  // namespace ps::core
