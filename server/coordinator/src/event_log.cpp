#include "event_log.h"

#include <algorithm>
#include <cctype>

#include "json_log.h"
#include "request_verifier.h"

namespace tn::server {

void EventLog::publish(v1::EventKind kind, const std::string& task_id, uint64_t round_id,
                       const std::string& device_id, const std::string& message,
                       const nlohmann::json& log_fields) {
  v1::Event event;
  event.set_time_unix_ms(uint64_t(unix_now_ms()));
  event.set_kind(kind);
  event.set_task_id(task_id);
  event.set_round_id(round_id);
  event.set_device_id(device_id);
  event.set_message(message);
  {
    std::lock_guard lock(mutex_);
    event.set_sequence(++sequence_);
    window_.push_back(event);
    if (window_.size() > kWindow) window_.pop_front();
  }
  published_.notify_all();
  nlohmann::json fields = log_fields;
  fields["sequence"] = event.sequence();
  if (!task_id.empty()) fields["task"] = task_id;
  if (round_id != 0) fields["round"] = round_id;
  if (!device_id.empty()) fields["device"] = device_id;
  if (!message.empty()) fields["message"] = message;
  std::string name = v1::EventKind_Name(kind).substr(std::string_view("EVENT_KIND_").size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const bool trouble = kind == v1::EVENT_KIND_ROUND_FAILED || kind == v1::EVENT_KIND_UPDATE_REFUSED;
  log_event(trouble ? LogLevel::Warning : LogLevel::Info, name, std::move(fields));
}

uint64_t EventLog::latest() const {
  std::lock_guard lock(mutex_);
  return sequence_;
}

std::vector<v1::Event> EventLog::follow(uint64_t& cursor, const std::string& task_id,
                                        std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  published_.wait_for(lock, wait, [&] { return closed_ || sequence_ > cursor; });
  std::vector<v1::Event> events;
  for (const v1::Event& event : window_)
    if (event.sequence() > cursor && (task_id.empty() || event.task_id() == task_id)) events.push_back(event);
  cursor = sequence_;
  return events;
}

void EventLog::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  published_.notify_all();
}

bool EventLog::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

}  // namespace tn::server
