#include "device_board.h"

#include <algorithm>
#include <utility>

namespace tn::server {

DeviceBoard::DeviceBoard(std::chrono::milliseconds liveness_window)
    : liveness_window_(liveness_window), expiry_([this] { expire_holds(); }) {}

DeviceBoard::~DeviceBoard() {
  close();
  expiry_.join();
}

uint64_t DeviceBoard::hold(const federated::DeviceId& device, const nlohmann::json& metadata,
                           std::chrono::milliseconds wait, Answer answer, v1::RoundTransport transport,
                           std::optional<uint64_t> endings_seen) {
  std::optional<v1::Assignment> ready;
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    ticket = next_ticket_++;
    note_heard(device, std::nullopt);
    auto reserved = reserved_.find(device);
    const bool work_ended_since = endings_seen && *endings_seen != endings_;
    if (!closed_ && reserved != reserved_.end() && reserved->second.undelivered) {
      ready = std::exchange(reserved->second.undelivered, std::nullopt);
    } else if (!closed_ && !work_ended_since) {
      const auto until = SteadyClock::now() + wait;
      Held& held = held_[device];
      held.holds[ticket] = {std::move(answer), until};
      held.metadata = metadata;
      held.transport = transport;
      const bool earliest = expiries_.empty() || until < expiries_.begin()->first;
      expiries_.emplace(until, std::pair{device, ticket});
      ++arrivals_;
      arrived_.notify_all();
      if (earliest) expiry_changed_.notify_one();
      return ticket;
    }
  }
  // An assignment that was waiting for the device, or no work: the board closed, or the work
  // ended while the CheckIn looked at the tasks.
  answer(std::move(ready));
  return ticket;
}

DeviceBoard::Answer DeviceBoard::take_hold(const federated::DeviceId& device, uint64_t ticket) {
  auto held = held_.find(device);
  if (held == held_.end()) return {};
  auto found = held->second.holds.find(ticket);
  if (found == held->second.holds.end()) return {};
  Answer answer = std::move(found->second.answer);
  auto [first, last] = expiries_.equal_range(found->second.until);
  for (auto expiry = first; expiry != last; ++expiry)
    if (expiry->second.second == ticket) {
      expiries_.erase(expiry);
      break;
    }
  held->second.holds.erase(found);
  if (held->second.holds.empty()) held_.erase(held);
  return answer;
}

bool DeviceBoard::withdraw(const federated::DeviceId& device, uint64_t ticket) {
  std::lock_guard lock(mutex_);
  return bool(take_hold(device, ticket));
}

void DeviceBoard::expire_holds() {
  std::unique_lock lock(mutex_);
  while (!closed_) {
    if (expiries_.empty()) {
      expiry_changed_.wait(lock);
      continue;
    }
    const auto earliest = expiries_.begin()->first;
    if (SteadyClock::now() < earliest) {
      expiry_changed_.wait_until(lock, earliest);
      continue;
    }
    const auto [device, ticket] = expiries_.begin()->second;
    Answer answer = take_hold(device, ticket);
    lock.unlock();
    answer(std::nullopt);
    lock.lock();
  }
}

std::vector<federated::DeviceId> DeviceBoard::reserve(const Chooser& choose) {
  std::lock_guard lock(mutex_);
  std::vector<Waiting> available;
  const auto now = SteadyClock::now();
  for (const auto& [id, held] : held_)
    if (!reserved_.contains(id) && alive(id, now)) available.push_back({id, held.metadata, held.transport});
  std::vector<federated::DeviceId> chosen = choose(available);
  for (const federated::DeviceId& id : chosen) reserved_[id];
  return chosen;
}

void DeviceBoard::assign(const std::map<federated::DeviceId, v1::RoundConfig>& configs) {
  std::vector<std::pair<Answer, v1::Assignment>> delivered;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, config] : configs) {
      Reservation& reservation = reserved_[id];
      v1::Assignment assignment;
      assignment.set_task_id(config.task_id());
      assignment.set_round_id(config.round_id());
      reservation.config = config;
      // To one CheckIn the device holds; with none, its next CheckIn takes the assignment.
      auto held = held_.find(id);
      if (held == held_.end())
        reservation.undelivered = std::move(assignment);
      else
        delivered.emplace_back(take_hold(id, held->second.holds.begin()->first), std::move(assignment));
    }
  }
  for (auto& [answer, assignment] : delivered) answer(std::move(assignment));
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

void DeviceBoard::wait_for_arrival(std::chrono::milliseconds wait, const std::function<bool()>& interrupted) {
  std::unique_lock lock(mutex_);
  const uint64_t seen = arrivals_;
  arrived_.wait_for(lock, wait,
                    [&] { return closed_ || arrivals_ != seen || (interrupted && interrupted()); });
}

void DeviceBoard::wake() {
  {
    // Under the lock, so a waiter that found `interrupted` false is asleep before this notifies.
    std::lock_guard lock(mutex_);
  }
  arrived_.notify_all();
}

size_t DeviceBoard::waiting() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

void DeviceBoard::note_heard(const federated::DeviceId& device, std::optional<v1::DeviceState> reported) {
  Heard& heard = heard_[device];
  heard.at = SteadyClock::now();
  heard.at_wall = std::chrono::system_clock::now();
  if (reported) heard.state = *reported;
  unsaved_.insert(device);
}

std::map<federated::DeviceId, int64_t> DeviceBoard::take_unsaved_last_heard() {
  std::lock_guard lock(mutex_);
  std::map<federated::DeviceId, int64_t> heard;
  for (const federated::DeviceId& device : unsaved_)
    heard[device] =
        std::chrono::duration_cast<std::chrono::milliseconds>(heard_.at(device).at_wall.time_since_epoch())
            .count();
  unsaved_.clear();
  return heard;
}

bool DeviceBoard::alive(const federated::DeviceId& device, SteadyClock::time_point now) const {
  auto found = heard_.find(device);
  return found != heard_.end() && now - found->second.at <= liveness_window_;
}

void DeviceBoard::heard_from(const federated::DeviceId& device, std::optional<v1::DeviceState> reported) {
  std::lock_guard lock(mutex_);
  note_heard(device, reported);
}

DeviceBoard::Presence DeviceBoard::presence(const federated::DeviceId& device) const {
  std::lock_guard lock(mutex_);
  auto found = heard_.find(device);
  if (found == heard_.end()) return {};
  return {found->second.state, found->second.at_wall, alive(device, SteadyClock::now()),
          held_.contains(device)};
}

std::vector<DeviceBoard::Answer> DeviceBoard::take_every_hold() {
  std::vector<Answer> answers;
  for (auto& [id, held] : held_)
    for (auto& [ticket, hold] : held.holds) answers.push_back(std::move(hold.answer));
  held_.clear();
  expiries_.clear();
  return answers;
}

std::vector<DeviceBoard::Answer> DeviceBoard::end_of_work() {
  std::lock_guard lock(mutex_);
  ++endings_;
  std::vector<Answer> taken = take_every_hold();
  expiry_changed_.notify_all();
  return taken;
}

void DeviceBoard::answer_with_no_work(std::vector<Answer> answers) {
  for (Answer& answer : answers) answer(std::nullopt);
}

uint64_t DeviceBoard::endings() const {
  std::lock_guard lock(mutex_);
  return endings_;
}

void DeviceBoard::close() {
  std::vector<Answer> unanswered;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    unanswered = take_every_hold();
  }
  arrived_.notify_all();
  expiry_changed_.notify_all();
  answer_with_no_work(std::move(unanswered));
}

}  // namespace tn::server
