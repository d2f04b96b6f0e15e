#include "event_log.h"

#include <algorithm>
#include <cctype>

#include "json_log.h"
#include "request_verifier.h"

namespace tn::server {

namespace {

StoredEvent to_stored(const v1::Event& event) {
  return {event.sequence(),
          int64_t(event.time_unix_ms()),
          v1::EventKind_Name(event.kind()),
          event.task_id(),
          event.round_id(),
          event.device_id(),
          event.message()};
}

v1::Event from_stored(const StoredEvent& stored) {
  v1::Event event;
  v1::EventKind kind = v1::EVENT_KIND_UNSPECIFIED;
  v1::EventKind_Parse(stored.kind, &kind);  // a kind this build no longer knows stays UNSPECIFIED
  event.set_sequence(stored.sequence);
  event.set_time_unix_ms(uint64_t(stored.time_unix_ms));
  event.set_kind(kind);
  event.set_task_id(stored.task_id);
  event.set_round_id(stored.round_id);
  event.set_device_id(stored.device_id);
  event.set_message(stored.message);
  return event;
}

void log(const v1::Event& event, const nlohmann::json& log_fields) {
  nlohmann::json fields = log_fields;
  fields["sequence"] = event.sequence();
  if (!event.task_id().empty()) fields["task"] = event.task_id();
  if (event.round_id() != 0) fields["round"] = event.round_id();
  if (!event.device_id().empty()) fields["device"] = event.device_id();
  if (!event.message().empty()) fields["message"] = event.message();
  std::string name = v1::EventKind_Name(event.kind()).substr(std::string_view("EVENT_KIND_").size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const bool trouble =
      event.kind() == v1::EVENT_KIND_ROUND_FAILED || event.kind() == v1::EVENT_KIND_UPDATE_REFUSED;
  log_event(trouble ? LogLevel::Warning : LogLevel::Info, name, std::move(fields));
}

}  // namespace

EventLog::EventLog(GuardedState& state)
    : state_(state), sequence_(state.with([](StateStore& store) { return store.latest_event_sequence(); })) {}

void EventLog::publish(v1::EventKind kind, const std::string& task_id, uint64_t round_id,
                       const std::string& device_id, const std::string& message,
                       const nlohmann::json& log_fields) {
  publish({Draft{kind, task_id, round_id, device_id, message, log_fields}});
}

void EventLog::publish(const std::vector<Draft>& drafts) {
  std::vector<v1::Event> events;
  for (const Draft& draft : drafts) {
    v1::Event& event = events.emplace_back();
    event.set_time_unix_ms(uint64_t(unix_now_ms()));
    event.set_kind(draft.kind);
    event.set_task_id(draft.task_id);
    event.set_round_id(draft.round_id);
    event.set_device_id(draft.device_id);
    event.set_message(draft.message);
  }
  {
    // Held while storing and logging, so that the stored order, the window's, the log's and the
    // numbering agree (logged after the lock, two publishers' lines could swap: seen under load).
    std::lock_guard lock(mutex_);
    for (v1::Event& event : events) event.set_sequence(++sequence_);
    store(events);
    for (const v1::Event& event : events) {
      window_.push_back(event);
      if (window_.size() > kWindow) window_.pop_front();
    }
    for (size_t i = 0; i < events.size(); ++i) log(events[i], drafts[i].log_fields);
  }
  published_.notify_all();
}

void EventLog::store(const std::vector<v1::Event>& events) {
  std::vector<StoredEvent> stored;
  for (const v1::Event& event : events) stored.push_back(to_stored(event));
  try {
    state_.with([&](StateStore& store) { store.append_events(stored); });
  } catch (const std::exception& error) {
    // Live followers still see them; a replay after a restart will not.
    log_event(
        LogLevel::Error, "events_not_stored",
        {{"first_sequence", stored.front().sequence}, {"count", stored.size()}, {"error", error.what()}});
  }
}

uint64_t EventLog::latest() const {
  std::lock_guard lock(mutex_);
  return sequence_;
}

std::vector<v1::Event> EventLog::follow(uint64_t& cursor, const std::string& task_id,
                                        std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  const bool behind_window =
      cursor < sequence_ && (window_.empty() || cursor + 1 < window_.front().sequence());
  if (behind_window) return stored_after(cursor, task_id);
  published_.wait_for(lock, wait, [&] { return closed_ || sequence_ > cursor; });
  std::vector<v1::Event> events;
  for (const v1::Event& event : window_)
    if (event.sequence() > cursor && (task_id.empty() || event.task_id() == task_id)) events.push_back(event);
  cursor = std::max(cursor, sequence_);  // a cursor past the latest event waits for it
  return events;
}

// With mutex_ held (the store then has every event up to sequence_ that it could take).
std::vector<v1::Event> EventLog::stored_after(uint64_t& cursor, const std::string& task_id) {
  const std::vector<StoredEvent> page =
      state_.with([&](StateStore& store) { return store.events_after(cursor, task_id, kStoredPage); });
  std::vector<v1::Event> events;
  for (const StoredEvent& stored : page) events.push_back(from_stored(stored));
  // A short page is all there is up to sequence_ (of this task); a full one may have more after it.
  cursor = page.size() < kStoredPage ? sequence_ : page.back().sequence;
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
