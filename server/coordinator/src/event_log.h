// What happens, for AdminService.StreamEvents and the log: every event gets the next sequence
// number, is stored with the coordinator's state (so the sequence goes on across restarts and a
// follower can replay from any number), is written to the structured log, and is kept in a
// bounded window that live followers read without touching the database.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "guarded_state.h"
#include "torchnative/federated/v1/admin.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

class EventLog {
 public:
  // An event to publish, and `log_fields`: detail that the log keeps and the event stream does not.
  struct Draft {
    v1::EventKind kind = v1::EVENT_KIND_UNSPECIFIED;
    std::string task_id;
    uint64_t round_id = 0;
    std::string device_id;
    std::string message;
    nlohmann::json log_fields = nlohmann::json::object();
  };

  // Numbering goes on from the latest event `state` holds.
  explicit EventLog(GuardedState& state);

  // Logged as event "<kind in lower case>" (round_completed, ...) with the event's fields and
  // `log_fields`.
  void publish(v1::EventKind kind, const std::string& task_id, uint64_t round_id,
               const std::string& device_id, const std::string& message,
               const nlohmann::json& log_fields = nlohmann::json::object());
  // Several events with consecutive sequence numbers, stored in one transaction (one sync).
  void publish(const std::vector<Draft>& drafts);
  // The sequence number of the latest event (0 before any).
  uint64_t latest() const;
  // Events after `cursor` (of `task_id` only, unless empty), waiting up to `wait` for any event;
  // moves `cursor` past every event looked at. Behind the window, a page of stored events without
  // waiting. An event the store could not take is in the window alone.
  std::vector<v1::Event> follow(uint64_t& cursor, const std::string& task_id, std::chrono::milliseconds wait);
  // Wakes every follower (shutdown).
  void close();
  bool closed() const;

 private:
  static constexpr size_t kWindow = 4096;
  static constexpr size_t kStoredPage = 1024;
  void store(const std::vector<v1::Event>& events);
  std::vector<v1::Event> stored_after(uint64_t& cursor, const std::string& task_id);
  GuardedState& state_;
  mutable std::mutex mutex_;
  std::condition_variable published_;
  std::deque<v1::Event> window_;
  uint64_t sequence_ = 0;
  bool closed_ = false;
};

}  // namespace tn::server
