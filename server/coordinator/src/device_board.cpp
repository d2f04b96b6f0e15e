#include "device_board.h"

#include <algorithm>
#include <utility>

namespace tn::server {

std::optional<v1::Assignment> DeviceBoard::check_in(const federated::DeviceId& device,
                                                    const nlohmann::json& metadata,
                                                    std::chrono::milliseconds wait,
                                                    const std::function<bool()>& gone) {
  std::unique_lock lock(mutex_);
  if (closed_) return std::nullopt;
  Held& held = held_[device];
  ++held.calls;
  held.metadata = metadata;
  ++arrivals_;
  arrived_.notify_all();
  auto has_assignment = [&] {
    auto found = reserved_.find(device);
    return found != reserved_.end() && found->second.undelivered;
  };
  // In slices, to notice a caller that hung up.
  constexpr std::chrono::milliseconds kSlice{200};
  const auto until = std::chrono::steady_clock::now() + wait;
  while (!closed_ && !has_assignment() && std::chrono::steady_clock::now() < until && !gone())
    assigned_.wait_until(lock, std::min(until, std::chrono::steady_clock::now() + kSlice));
  std::optional<v1::Assignment> assignment;
  // A caller that hung up would lose the assignment; the device's next CheckIn gets it instead.
  if (has_assignment() && !gone()) assignment = std::exchange(reserved_[device].undelivered, std::nullopt);
  if (--held_[device].calls == 0) held_.erase(device);
  return assignment;
}

std::vector<federated::DeviceId> DeviceBoard::reserve(const Chooser& choose) {
  std::lock_guard lock(mutex_);
  std::vector<Waiting> available;
  for (const auto& [id, held] : held_)
    if (!reserved_.contains(id)) available.push_back({id, held.metadata});
  std::vector<federated::DeviceId> chosen = choose(available);
  for (const federated::DeviceId& id : chosen) reserved_[id];
  return chosen;
}

void DeviceBoard::assign(const std::map<federated::DeviceId, v1::RoundConfig>& configs) {
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, config] : configs) {
      Reservation& reservation = reserved_[id];
      v1::Assignment assignment;
      assignment.set_task_id(config.task_id());
      assignment.set_round_id(config.round_id());
      reservation.undelivered = assignment;
      reservation.config = config;
    }
  }
  assigned_.notify_all();
}

std::optional<v1::RoundConfig> DeviceBoard::round_config(const federated::DeviceId& device,
                                                         const std::string& task_id,
                                                         uint64_t round_id) const {
  std::lock_guard lock(mutex_);
  auto found = reserved_.find(device);
  if (found == reserved_.end() || !found->second.config || found->second.config->task_id() != task_id ||
      found->second.config->round_id() != round_id)
    return std::nullopt;
  return found->second.config;
}

void DeviceBoard::release(const std::vector<federated::DeviceId>& devices) {
  std::lock_guard lock(mutex_);
  for (const federated::DeviceId& id : devices) reserved_.erase(id);
  // Devices still held in a CheckIn are available again.
  ++arrivals_;
  arrived_.notify_all();
}

void DeviceBoard::wait_for_arrival(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  const uint64_t seen = arrivals_;
  arrived_.wait_for(lock, wait, [&] { return closed_ || arrivals_ != seen; });
}

size_t DeviceBoard::waiting() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

void DeviceBoard::note_state(const federated::DeviceId& device, v1::DeviceState state) {
  std::lock_guard lock(mutex_);
  reported_[device] = state;
}

v1::DeviceState DeviceBoard::last_state(const federated::DeviceId& device) const {
  std::lock_guard lock(mutex_);
  auto found = reported_.find(device);
  return found == reported_.end() ? v1::DEVICE_STATE_UNSPECIFIED : found->second;
}

void DeviceBoard::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  assigned_.notify_all();
  arrived_.notify_all();
}

}  // namespace tn::server
