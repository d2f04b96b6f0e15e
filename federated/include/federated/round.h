// Rounds and tasks: the coordinator's state machine, with the clock injected and no threads.
//
// A Task trains one model. Each attempt at a round gets a fresh round id, so an update from
// an abandoned attempt can never count in the retry; the model version is the number of
// completed rounds, the version every selected device trains on.
//
//   start_round(available)  select devices; open a round with a deadline (or say why not)
//   submit(update)          validate and accept, or refuse (UpdateRefused)
//   round_due()             the deadline passed or the round has its target of updates
//   close_round()           completed (>= min_updates arrived): aggregate over exactly the
//                           recorded contributors, version + 1; otherwise abandoned, and once
//                           more than max_retries attempts in a row were abandoned the task
//                           fails (TaskFailed naming it)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "federated/model.h"
#include "federated/selection.h"
#include "federated/strategy.h"
#include "federated/validation.h"

namespace tn::federated {

using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

// Time that moves only when told to: for tests, simulations and replays.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = {}) : now_(start) {}
  TimePoint now() const override { return now_; }
  void advance(std::chrono::nanoseconds by) { now_ += by; }

 private:
  TimePoint now_;
};

struct RoundPlan {
  uint64_t round_id = 0;
  uint64_t model_version = 0;
  std::vector<DeviceId> selected;
  size_t target_updates = 0;  // the round takes no more than this and is due once it has them
  size_t min_updates = 1;     // fewer than this at close: abandoned
  TimePoint deadline;
};

enum class RoundStatus { Open, Completed, Abandoned };
const char* round_status_name(RoundStatus status);

// One attempt at a round.
class Round {
 public:
  // Refuses (ParameterRefused) a plan with no or repeated devices, min_updates 0, or not
  // min_updates <= target_updates <= selected devices.
  Round(RoundPlan plan, ModelSpec spec, UpdateLimits limits, std::shared_ptr<const Clock> clock);

  const RoundPlan& plan() const { return plan_; }
  RoundStatus status() const { return status_; }
  // Refuses (UpdateRefused) an update when the round is closed, for another round or model
  // version, past the deadline, from a device not selected or that already contributed, once the
  // round has its target; only then runs the rest of validate_update (the full scan).
  void submit(Update update);
  bool due() const;
  // Decides Completed or Abandoned by the updates accepted; StateError when already closed.
  RoundStatus close();
  // Closes a round whose updates were summed by the data plane rather than submitted:
  // `contributors` are who the reduce counted. Refuses (Refused) a device not selected or
  // listed twice, and (StateError) a round that also took individual updates.
  RoundStatus close_with_contributors(std::vector<DeviceId> contributors);
  // Accepted updates, sorted by device id.
  const std::vector<Update>& updates() const { return updates_; }
  // Who contributed, sorted: exactly the devices counted at close.
  const std::vector<DeviceId>& contributors() const { return contributors_; }
  // Selected devices that did not contribute, sorted.
  std::vector<DeviceId> missing() const;

 private:
  RoundPlan plan_;
  ModelSpec spec_;
  UpdateLimits limits_;
  std::shared_ptr<const Clock> clock_;
  RoundStatus status_ = RoundStatus::Open;
  std::vector<Update> updates_;
  std::vector<DeviceId> contributors_;
};

struct TaskConfig {
  std::string name;
  SelectionConfig selection;
  std::chrono::milliseconds round_timeout{std::chrono::minutes(10)};
  size_t min_updates = 1;
  // Abandoned attempts of one round tolerated in a row; the next abandonment fails the task.
  size_t max_retries = 3;
  UpdateLimits limits;
  uint64_t seed = 0;
};

struct RoundOutcome {
  uint64_t round_id = 0;
  uint64_t trained_on_version = 0;
  RoundStatus status = RoundStatus::Abandoned;
  std::vector<DeviceId> contributors;  // sorted
  std::vector<DeviceId> missing;       // sorted
  uint64_t model_version = 0;          // the task's version after this round
  size_t abandoned_in_a_row = 0;       // abandoned attempts of this version so far
  std::string reason;                  // why the round was abandoned; empty when completed
};

// What a coordinator persists between rounds to survive being killed: `meta` holds
// {"task", "model_version", "next_round_id", "abandoned_in_a_row", "failure"} ("failure" is
// empty unless the task failed, and a failed task stays failed when restored).
struct TaskCheckpoint {
  nlohmann::json meta;
  Model global_model;
  StrategyState strategy;
};

class Task {
 public:
  // Refuses (ParameterRefused) an empty name, a bad selection config, min_updates 0 or below
  // the strategy's minimum, selection.min_devices below min_updates (a round could never
  // complete), and a global model the ModelSpec refuses.
  Task(TaskConfig config, Model global_model, std::unique_ptr<Strategy> strategy,
       std::shared_ptr<const Clock> clock);
  // Resumes from a checkpoint; refuses one of another task. A round open when the checkpoint
  // was taken is lost, and round ids are not reused, so its late updates are refused.
  static Task restore(TaskConfig config, const TaskCheckpoint& checkpoint,
                      std::shared_ptr<const Clock> clock);

  const std::string& name() const { return config_.name; }
  const Model& global_model() const { return global_; }
  uint64_t model_version() const { return model_version_; }
  const Strategy& strategy() const { return *strategy_; }
  bool failed() const { return !failure_.empty(); }

  // Opens the next round among `available` with deadline now + round_timeout. When too few
  // devices are available, opens nothing and returns the selection saying why. StateError while
  // a round is open; TaskFailed once the task failed.
  Selection start_round(std::vector<DeviceId> available);
  // The open round, or nullptr.
  const Round* current_round() const { return round_ ? &*round_ : nullptr; }
  // What selected devices are told: the strategy's configure_fit() plus "round_id" and
  // "model_version" (which their update must carry). StateError with no open round.
  nlohmann::json fit_config() const;
  void submit(Update update);
  bool round_due() const;
  // Closes the open round (StateError if none). A completed round is aggregated by the strategy;
  // an aggregation that fails (AggregationFailed) abandons the round with that reason. Throws
  // TaskFailed when this abandonment exceeds max_retries.
  RoundOutcome close_round();
  // The same for a round whose updates were summed by the data plane instead of submitted:
  // `contributors` (who the reduce says contributed) must be selected devices, each once. A sum
  // the strategy refuses (a non-finite value, one that does not fit the model) abandons the round.
  RoundOutcome close_round_from_weighted_sum(const WeightedSumReader& sum,
                                             std::vector<DeviceId> contributors);
  // The same for a strategy that needs the individual updates (median, trimmed mean, Krum),
  // whose contributions the data plane kept apart: `updates` reads them, numbered as the sorted
  // `contributors`. Fewer updates than the strategy accepts (Krum's n >= 2f + 3) abandons the
  // round with the strategy's reason.
  RoundOutcome close_round_from_updates(const UpdatesReader& updates, std::vector<DeviceId> contributors);

  TaskCheckpoint checkpoint() const;

 private:
  // Closes the open round over `contributors` and, when enough contributed, aggregates; a Refused
  // or AggregationFailed from `aggregate` abandons the round with its reason.
  RoundOutcome close_round_from_data_plane(std::vector<DeviceId> contributors,
                                           const std::function<Model()>& aggregate);
  RoundOutcome finish(RoundStatus status, std::vector<DeviceId> contributors, std::string reason,
                      std::optional<Model> aggregate);
  void throw_if_failed() const;

  TaskConfig config_;
  Model global_;
  ModelSpec spec_;
  std::unique_ptr<Strategy> strategy_;
  std::shared_ptr<const Clock> clock_;
  uint64_t model_version_ = 0;
  uint64_t next_round_id_ = 1;
  size_t abandoned_in_a_row_ = 0;
  std::optional<Round> round_;
  std::string failure_;
};

}  // namespace tn::federated
