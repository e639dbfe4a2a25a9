#include "run/device_positions.h"

#include "pipestudio/core/model/schedule.h"

namespace ps::engine::detail {

using core::Op;
using core::OpKind;

void DevicePositions::reset(const core::Schedule& schedule, int devices) {
  schedule_ = &schedule;
  graph_.rebuild(schedule);
  std::lock_guard lock(mu_);
  positions_.assign(static_cast<size_t>(devices), Position{});
}

void DevicePositions::enterStep(int device, int step, const Op& op) {
  std::lock_guard lock(mu_);
  Position& p = positions_[static_cast<size_t>(device)];
  p = Position{};
  p.started = true;
  p.step = step;
  p.op = op;
}

void DevicePositions::startWait(int device, int srcDevice, const Op& producer) {
  int producerId = graph_.find(producer);
  if (producerId < 0 && producer.kind == OpKind::B)
    producerId = graph_.find(Op{OpKind::I, producer.stage, producer.microbatch});
  std::lock_guard lock(mu_);
  Position& p = positions_[static_cast<size_t>(device)];
  p.waiting = true;
  p.waitsOnDevice = srcDevice;
  p.waitsFor = producerId >= 0 ? graph_.op(producerId) : producer;
  p.waitsForStep = producerId >= 0 ? graph_.ref(producerId).step : -1;
  p.since = Clock::now();
  p.until = {};
}

void DevicePositions::endWait(int device, bool arrived) {
  std::lock_guard lock(mu_);
  Position& p = positions_[static_cast<size_t>(device)];
  if (arrived)
    p.waiting = false;
  else
    p.until = Clock::now();
}

void DevicePositions::finish(int device) {
  std::lock_guard lock(mu_);
  positions_[static_cast<size_t>(device)].done = true;
}

void DevicePositions::clear(int device) {
  std::lock_guard lock(mu_);
  positions_[static_cast<size_t>(device)] = Position{};
}

core::StuckDevice DevicePositions::stuck(int device) const {
  std::lock_guard lock(mu_);
  const Position& p = positions_[static_cast<size_t>(device)];
  core::StuckDevice d;
  d.device = device;
  d.step = p.step;
  if (p.step >= 0) d.action = core::pytorchActionText(*schedule_, p.op);
  if (p.done) {
    d.state = core::StuckDevice::State::Finished;
  } else if (p.waiting) {
    d.state = core::StuckDevice::State::Waiting;
    d.waitsOnDevice = p.waitsOnDevice;
    d.waitsFor = core::pytorchActionText(*schedule_, p.waitsFor);
    d.waitsForStep = p.waitsForStep;
    const auto until = p.until == Clock::time_point{} ? Clock::now() : p.until;
    d.seconds = std::chrono::duration<double>(until - p.since).count();
  } else {
    d.state = core::StuckDevice::State::Running;
  }
  return d;
}

}  // namespace ps::engine::detail
