// One running task's round loop, on its own thread:
//
//   wait until enough eligible devices are checked in, select among them (federated::Task,
//   seeded per round), record the round (StateStore::begin_round), host it on the data plane
//   (a TCP store and a star ProcessGroup whose hub, rank 0, is this thread; selected devices are
//   ranks 1..k in ascending device-id order), broadcast the model, deadline-reduce the devices'
//   contributions (federated/contribution.h), wait for the contributions of the devices that
//   take part over gRPC (UpdateInbox: FetchModel, then SubmitUpdate), aggregate them with the strategy,
//   reading them a piece at a time (folded into the weighted sum for the FedAvg family, each device's apart
//   for median, trimmed mean and Krum), and close the round in the state store in one transaction: the new
//   model and strategy state, or the reason it was abandoned.
//
// Why a round starts with the devices it has is logged on its round_started line (available,
// eligible, devices_per_round, min_available, min_updates, over_selection, selected, rule, why, closes),
// and while it waits, a round_waiting line says for what (docs/federated.md, "Selection").
//
// Ranks follow device-id order because the hub reduces in ascending rank order: the float64 sum
// is then the one federated's strategies form over the individual updates, and the contributions
// read apart are numbered as the strategies number the updates, so the model has the same bits
// as if each update had been aggregated on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "central_dp.h"
#include "federated/round.h"
#include "round_params.h"
#include "services.h"

namespace tn::dist {
class ProcessGroup;
class Work;
struct DeadlineReduceResult;
}  // namespace tn::dist

namespace tn::server {

// Called in the state store's critical section that records a task's end (`store` is the
// store it guards): when no task is running then, counts the end of the work on the board and
// takes the devices' held CheckIns (DeviceBoard::end_of_work), for the caller to answer with no
// work (DeviceBoard::answer_with_no_work) once it has left that section, so that a device with
// nothing more to do learns it now and not when its wait (check_in_wait_bound) passes. In the
// same section, because a CheckIn sees the end in the store (no task running, its task ended)
// and the board's endings() in two looks: counted after the section, a device told of the end
// by one CheckIn could read endings() from before it in its next, be held, and be answered with
// that same end (NoWork.work_ended_while_held), which it counts as a task it saw running.
[[nodiscard]] std::vector<DeviceBoard::Answer> end_work_if_no_task_runs(StateStore& store,
                                                                        DeviceBoard& board);

class TaskRunner {
 public:
  // Starts the loop at once. `task` is fresh or restored at the state store's resume point, whose
  // next round is `next_round_id`; `clip_norm`: a central DP task's adaptive clipping bound as
  // stored with that point (stored_clip_norm), none for the configured one.
  TaskRunner(Services services, federated::Task task, RoundParams params, uint64_t rounds_planned,
             uint64_t next_round_id, std::optional<double> clip_norm = std::nullopt);
  ~TaskRunner();  // drains and joins
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // StopTask: starts no further round; a round in progress runs to its end, then the task is
  // recorded as stopped with `reason`.
  void stop(const std::string& reason);
  // Shutdown: starts no further round and lets one in progress finish; the task stays running in
  // the state store, for the next start to resume.
  void drain();
  void join();
  bool finished() const { return finished_; }
  // Where the loop is, for the administrators' views of a running task: WAITING_FOR_DEVICES for
  // the round it waits to start, AGGREGATING an open round whose updates are in, or UNSPECIFIED
  // (training, between rounds, or ended: the state store says). In memory only.
  struct Phase {
    v1::RoundState state = v1::ROUND_STATE_UNSPECIFIED;
    uint64_t round_id = 0;
    int64_t since_unix_ms = 0;
  };
  Phase phase() const;

 private:
  struct Hosted;
  void run();
  bool run_round();
  // `over_grpc`: the selected devices that take part by FetchModel and SubmitUpdate.
  Hosted host_round(const federated::RoundPlan& plan, int64_t deadline_unix_ms,
                    const std::set<federated::DeviceId>& over_grpc);
  // host_round's phases, in order; each data-plane one answers why the round is abandoned, if it is.
  struct Round;
  using WaitForWork = std::function<void(dist::Work&)>;
  void open_grpc_inbox(Round& round);
  void open_data_plane_store(Round& round);
  // Join, broadcast the model, then `then` (the plaintext round's reduce, or a secure round's stages).
  using OnDataPlane = std::function<std::optional<std::string>(dist::ProcessGroup&, const WaitForWork&)>;
  std::optional<std::string> host_data_plane(Round& round, const OnDataPlane& then);
  std::optional<std::string> broadcast_model(Round& round, dist::ProcessGroup& group,
                                             const WaitForWork& wait);
  std::optional<std::string> reduce_contributions(Round& round, dist::ProcessGroup& group,
                                                  const WaitForWork& wait);
  // The reduce's refused contributions, by device: counted in /metrics, each an UPDATE_REFUSED
  // event added to `events`.
  std::map<federated::DeviceId, std::string> note_refused(const Round& round,
                                                          const dist::DeadlineReduceResult& reduced,
                                                          std::vector<EventLog::Draft>& events);
  void collect_grpc_updates(Round& round);
  // A secure aggregation task's round, instead of the plaintext reduce and the inbox: each
  // device's update masked through the SecAggStage stages (secure_exchange.h); the devices that
  // asked for the data plane receive the model by the hub's broadcast and send their masked
  // inputs into its reduce of integer vectors (reduce_masked_inputs), the others by SecAggStage.
  Hosted host_secure_round(Round& round);
  // The five stages; `plane_sum`, when the round has a data plane, runs first at the masked input
  // stage (until that stage's deadline). Why the round is abandoned, if it is.
  using PlaneSum = std::function<std::optional<std::string>(std::chrono::steady_clock::time_point deadline)>;
  std::optional<std::string> run_secure_stages(Round& round, SecureExchange& exchange,
                                               const PlaneSum& plane_sum);
  // The hub's reduce of the data plane's masked inputs, summed modulo 2^32 and handed to the
  // exchange with exactly the devices whose words it holds (SecureExchange::take_masked_sum).
  std::optional<std::string> reduce_masked_inputs(Round& round, dist::ProcessGroup& group,
                                                  const WaitForWork& wait, SecureExchange& exchange,
                                                  std::chrono::steady_clock::time_point deadline);
  // Each device's SecAggRound, by index: `identities` (the registered keys) in device-id order.
  std::vector<v1::SecAggRound> secure_round_configs(
      const Round& round, const std::map<federated::DeviceId, std::string>& identities) const;
  // `plane_contributors`: how many of the round's sources came over the data plane.
  Hosted aggregate(Round& round, size_t plane_contributors);
  bool close_round(const federated::RoundPlan& plan, Hosted hosted,
                   std::chrono::steady_clock::time_point started);
  void end_task(TaskState state, const std::string& reason);
  // A DP task's round, completed and charged: sets the task's epsilon in /metrics and the
  // round_completed event's "privacy" fields (with central DP's `clipped`, what clipping found);
  // returns the event message's words for it.
  std::string report_privacy(const CentralDp::Clipped* clipped, nlohmann::json& fields);
  // A round_waiting line once a wait has lasted a second, then when what is waiting changes (at
  // most every 5 s) or every minute: not a line per poll.
  void log_waiting(size_t available, size_t eligible, size_t on_data_plane);
  // The loop begins waiting for devices (once per wait): the phase and its event.
  void note_waiting(size_t available, size_t eligible, size_t on_data_plane);
  void set_phase(v1::RoundState state, uint64_t round_id);
  bool halted(std::string* stop_reason = nullptr) const;

  Services services_;
  federated::Task task_;
  RoundParams params_;
  // A DP task's accounting (RoundParams::charged_dp): central DP's, which also clips and noises
  // each round, or distributed DP's, charged alone (its devices add the noise).
  std::optional<CentralDp> dp_;
  uint64_t rounds_planned_;
  mutable std::mutex mutex_;
  bool draining_ = false;
  std::optional<std::string> stop_reason_;
  Phase phase_;
  uint64_t next_round_id_;
  std::atomic<bool> finished_{false};
  // The wait for devices in progress (log_waiting): since when, when it was last logged, and the
  // (available, eligible) counts that line gave.
  std::optional<std::chrono::steady_clock::time_point> waiting_since_, wait_logged_at_;
  std::pair<size_t, size_t> wait_logged_counts_;
  std::thread thread_;
};

}  // namespace tn::server
