// Devices between rounds and in them: who is waiting for work right now (held in a CheckIn long
// poll), who is reserved for a round, the assignments not yet delivered and the round
// configurations devices fetch. In memory only: a restarted coordinator starts with no device
// waiting and no round running, and devices find their way back by checking in again.
//
// A held CheckIn is a callback, not a blocked thread, so a thousand waiting devices cost a
// thousand small records; one thread of the board ends the holds whose wait has passed.
//
// Liveness: a device is alive while the board has heard from it (a Heartbeat, a CheckIn, a
// FetchTask) within the liveness window. Devices heartbeat on a timer whatever they are doing, so
// one that trains for longer than the window stays alive, and one that vanished without closing
// its connections (a held CheckIn whose caller is gone but never hung up) is not selected.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "federated/model.h"
#include "torchnative/federated/v1/device.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

class DeviceBoard {
 public:
  struct Waiting {
    federated::DeviceId id;
    nlohmann::json metadata;  // as registered, for a task's device requirements
    v1::RoundTransport transport = v1::ROUND_TRANSPORT_DATA_PLANE;  // as its CheckIn asked
  };
  using Chooser = std::function<std::vector<federated::DeviceId>(const std::vector<Waiting>& available)>;
  // How a held CheckIn ends: with the assignment posted for its device, or with nothing (its
  // wait passed, or the board closed). Called once, never under the board's lock, on the thread
  // that ended the hold (or on the caller's, from hold() itself).
  using Answer = std::function<void(std::optional<v1::Assignment>)>;

  explicit DeviceBoard(std::chrono::milliseconds liveness_window);
  ~DeviceBoard();  // answers every hold, as close() does
  DeviceBoard(const DeviceBoard&) = delete;
  DeviceBoard& operator=(const DeviceBoard&) = delete;

  // CheckIn: counts `device` as available until its hold is answered or withdrawn (and as heard
  // from now). An assignment posted while the device was between two CheckIns is given at once;
  // so is no work when the work ended (end_of_work) since `endings_seen`, the endings() the
  // CheckIn read before it looked at the tasks. Returns the hold's ticket, for withdraw().
  uint64_t hold(const federated::DeviceId& device, const nlohmann::json& metadata,
                std::chrono::milliseconds wait, Answer answer,
                v1::RoundTransport transport = v1::ROUND_TRANSPORT_DATA_PLANE,
                std::optional<uint64_t> endings_seen = std::nullopt);
  // The caller hung up (a dead device must not be selected): ends the hold without answering
  // it. False when it had been answered already.
  bool withdraw(const federated::DeviceId& device, uint64_t ticket);
  // Runs `choose` on the devices waiting, alive and not reserved (sorted by id) under the board's
  // lock, and reserves the devices it returns, so rounds of two tasks never share a device.
  std::vector<federated::DeviceId> reserve(const Chooser& choose);
  // For reserved devices: posts their assignment (waking their CheckIn) and keeps the round
  // configuration FetchTask gives them.
  void assign(const std::map<federated::DeviceId, v1::RoundConfig>& configs);
  // The configuration of round `round_id` of `task_id` assigned to `device`, while it runs.
  std::optional<v1::RoundConfig> round_config(const federated::DeviceId& device, const std::string& task_id,
                                              uint64_t round_id) const;
  // Ends the reservations of a round's devices, with their undelivered assignments and configurations.
  void release(const std::vector<federated::DeviceId>& devices);
  // Returns once a device starts waiting, the board closes, `wait` passes, or `interrupted`
  // (called under the board's lock) holds: at once if it holds already, or on the next wake().
  void wait_for_arrival(std::chrono::milliseconds wait, const std::function<bool()>& interrupted = {});
  // Wakes every wait_for_arrival to look at its `interrupted` again (a task loop told to stop).
  void wake();
  size_t waiting() const;
  // A request from the device other than CheckIn: a Heartbeat, with the state it reports, or a
  // FetchTask.
  void heard_from(const federated::DeviceId& device, std::optional<v1::DeviceState> reported = std::nullopt);
  struct Presence {
    v1::DeviceState last_state = v1::DEVICE_STATE_UNSPECIFIED;  // reported in a Heartbeat
    std::optional<std::chrono::system_clock::time_point> last_heard;
    bool alive = false;  // heard from within the liveness window
    // Waiting in a CheckIn now: a device takes part in one round at a time, so one that checks in
    // while it is in a round has left that round.
    bool checking_in = false;
  };
  // Since the coordinator started: a device not heard from since has no last_heard.
  Presence presence(const federated::DeviceId& device) const;
  // When each device heard from since the last call was last heard from (Unix ms), for the
  // coordinator to store as last_seen in one transaction rather than one per request.
  std::map<federated::DeviceId, int64_t> take_unsaved_last_heard();
  // A task ended and none is running: counts the end (endings()) and takes every held CheckIn off
  // the board, in one step, for the caller to answer with no work (answer_with_no_work) once it
  // holds no lock, so that a device with nothing more to do learns it now rather than when its
  // wait passes. Called in the state store's critical section that records the end
  // (end_work_if_no_task_runs): the store's lock is taken before the board's, never the other way
  // round (nothing run under the board's lock looks at the store).
  [[nodiscard]] std::vector<Answer> end_of_work();
  static void answer_with_no_work(std::vector<Answer> answers);
  // How many times end_of_work was called.
  uint64_t endings() const;
  // Answers every held CheckIn with no work, now and from now on (shutdown).
  void close();

 private:
  using SteadyClock = std::chrono::steady_clock;
  struct Hold {
    Answer answer;
    SteadyClock::time_point until;
  };
  struct Held {
    std::map<uint64_t, Hold> holds;  // by ticket: a device may hold more than one CheckIn
    nlohmann::json metadata;
    v1::RoundTransport transport = v1::ROUND_TRANSPORT_DATA_PLANE;  // the latest CheckIn's
  };
  struct Heard {
    SteadyClock::time_point at;
    std::chrono::system_clock::time_point at_wall;  // for listings
    v1::DeviceState state = v1::DEVICE_STATE_UNSPECIFIED;
  };
  struct Reservation {
    std::optional<v1::Assignment> undelivered;
    std::optional<v1::RoundConfig> config;
  };
  // Takes the hold out of the board; its answer is the caller's to call, outside the lock.
  Answer take_hold(const federated::DeviceId& device, uint64_t ticket);
  std::vector<Answer> take_every_hold();  // likewise, under the lock
  void expire_holds();                    // the expiry thread
  void note_heard(const federated::DeviceId& device,
                  std::optional<v1::DeviceState> reported);                          // under the lock
  bool alive(const federated::DeviceId& device, SteadyClock::time_point now) const;  // under the lock

  mutable std::mutex mutex_;
  std::condition_variable arrived_;         // round loops wait on it
  std::condition_variable expiry_changed_;  // the expiry thread waits on it
  std::map<federated::DeviceId, Held> held_;
  // When each hold's wait passes, earliest first.
  std::multimap<SteadyClock::time_point, std::pair<federated::DeviceId, uint64_t>> expiries_;
  uint64_t next_ticket_ = 1;
  std::map<federated::DeviceId, Reservation> reserved_;
  const std::chrono::milliseconds liveness_window_;
  std::map<federated::DeviceId, Heard> heard_;
  std::set<federated::DeviceId> unsaved_;  // heard from since take_unsaved_last_heard
  uint64_t arrivals_ = 0;
  uint64_t endings_ = 0;
  bool closed_ = false;
  std::thread expiry_;
};

}  // namespace tn::server
