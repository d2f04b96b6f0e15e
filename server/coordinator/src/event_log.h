// What happens, for AdminService.StreamEvents and the log: every event gets the next sequence
// number, is written to the structured log, and is kept in a bounded window that streams follow.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "torchnative/federated/v1/admin.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

class EventLog {
 public:
  // Logged as event "<kind in lower case>" (round_completed, ...) with the event's fields and
  // `log_fields`, detail that the log keeps and the event stream does not carry.
  void publish(v1::EventKind kind, const std::string& task_id, uint64_t round_id,
               const std::string& device_id, const std::string& message,
               const nlohmann::json& log_fields = nlohmann::json::object());
  // The sequence number of the latest event (0 before any).
  uint64_t latest() const;
  // Events after `cursor` (of `task_id` only, unless empty), waiting up to `wait` for any event;
  // moves `cursor` past every event looked at. A follower that fell more than the window behind
  // misses the oldest.
  std::vector<v1::Event> follow(uint64_t& cursor, const std::string& task_id, std::chrono::milliseconds wait);
  // Wakes every follower (shutdown).
  void close();
  bool closed() const;

 private:
  static constexpr size_t kWindow = 4096;
  mutable std::mutex mutex_;
  std::condition_variable published_;
  std::deque<v1::Event> window_;
  uint64_t sequence_ = 0;
  bool closed_ = false;
};

}  // namespace tn::server
