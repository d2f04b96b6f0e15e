#include <algorithm>

#include "federated/errors.h"
#include "federated/round.h"

namespace tn::federated {
namespace {

// SplitMix64's finalizer: a selection seed per round from the task's seed, so consecutive
// rounds do not select correlated subsets.
uint64_t round_seed(uint64_t task_seed, uint64_t round_id) {
  uint64_t z = task_seed + round_id * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const nlohmann::json& meta_field(const nlohmann::json& meta, const char* key) {
  if (!meta.is_object() || !meta.contains(key))
    throw ParameterRefused("task checkpoint: \"" + std::string(key) + "\" is missing from " + meta.dump());
  return meta[key];
}

uint64_t meta_count(const nlohmann::json& meta, const char* key) {
  const nlohmann::json& value = meta_field(meta, key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0)
    throw ParameterRefused("task checkpoint: \"" + std::string(key) + "\" = " + value.dump() +
                           " is not a count");
  return value.get<uint64_t>();
}

}  // namespace

Task::Task(TaskConfig config, Model global_model, std::unique_ptr<Strategy> strategy,
           std::shared_ptr<const Clock> clock)
    : config_(std::move(config)),
      global_(std::move(global_model)),
      spec_(global_.spec()),
      strategy_(std::move(strategy)),
      clock_(std::move(clock)) {
  if (config_.name.empty()) throw ParameterRefused("task: the name is empty");
  const std::string label = "task '" + config_.name + "': ";
  if (!strategy_) throw ParameterRefused(label + "no strategy");
  if (!clock_) throw ParameterRefused(label + "no clock");
  check_selection_config(config_.selection);
  if (config_.round_timeout <= std::chrono::milliseconds::zero())
    throw ParameterRefused(label + "round_timeout must be positive");
  if (config_.min_updates < strategy_->min_updates())
    throw ParameterRefused(label + "min_updates " + std::to_string(config_.min_updates) + " is below the " +
                           std::to_string(strategy_->min_updates()) + " that " + strategy_->name() +
                           " needs");
  if (config_.selection.min_devices < config_.min_updates)
    throw ParameterRefused(label + "selection.min_devices " + std::to_string(config_.selection.min_devices) +
                           " is below min_updates " + std::to_string(config_.min_updates) +
                           ", so a round could never complete");
  for (const char* key : {"round_id", "model_version"})
    if (strategy_->configure_fit().contains(key))
      throw ParameterRefused(label + "the strategy's fit config may not set '" + key +
                             "', the task sends it");
}

Task Task::restore(TaskConfig config, const TaskCheckpoint& checkpoint, std::shared_ptr<const Clock> clock) {
  const nlohmann::json& meta = checkpoint.meta;
  if (meta_field(meta, "task") != config.name)
    throw ParameterRefused("task '" + config.name + "': the checkpoint belongs to task " +
                           meta["task"].dump());
  const nlohmann::json& failure = meta_field(meta, "failure");
  if (!failure.is_string())
    throw ParameterRefused("task checkpoint: \"failure\" = " + failure.dump() + " is not a string");
  Task task(std::move(config), checkpoint.global_model, restore_strategy(checkpoint.strategy),
            std::move(clock));
  task.model_version_ = meta_count(meta, "model_version");
  task.next_round_id_ = meta_count(meta, "next_round_id");
  task.abandoned_in_a_row_ = size_t(meta_count(meta, "abandoned_in_a_row"));
  task.failure_ = failure.get<std::string>();
  return task;
}

void Task::throw_if_failed() const {
  if (failed()) throw TaskFailed(failure_);
}

Selection Task::start_round(std::vector<DeviceId> available) {
  throw_if_failed();
  if (round_)
    throw StateError("task '" + name() + "': round " + std::to_string(round_->plan().round_id) + " is open");
  Selection selection =
      select_devices(std::move(available), config_.selection, round_seed(config_.seed, next_round_id_));
  if (!selection.ok()) return selection;
  RoundPlan plan{next_round_id_,   model_version_,      selection.devices,
                 selection.target, config_.min_updates, clock_->now() + config_.round_timeout};
  round_.emplace(std::move(plan), spec_, config_.limits, clock_);
  ++next_round_id_;
  return selection;
}

nlohmann::json Task::fit_config() const {
  if (!round_) throw StateError("task '" + name() + "': no round is open");
  nlohmann::json config = strategy_->configure_fit();
  config["round_id"] = round_->plan().round_id;
  config["model_version"] = model_version_;
  return config;
}

void Task::submit(Update update) {
  throw_if_failed();
  if (!round_)
    throw UpdateRefused(UpdateRefused::Reason::RoundClosed,
                        "update from '" + update.device_id + "' for round " +
                            std::to_string(update.round_id) + ": task '" + name() + "' has no open round");
  round_->submit(std::move(update));
}

bool Task::round_due() const { return round_ && round_->due(); }

RoundOutcome Task::close_round() {
  throw_if_failed();
  if (!round_) throw StateError("task '" + name() + "': no round is open");
  if (round_->close() == RoundStatus::Abandoned)
    return finish(RoundStatus::Abandoned, round_->contributors(), {}, std::nullopt);
  try {
    Model next = strategy_->aggregate(global_, round_->updates());
    return finish(RoundStatus::Completed, round_->contributors(), {}, std::move(next));
  } catch (const AggregationFailed& error) {
    return finish(RoundStatus::Abandoned, round_->contributors(), error.what(), std::nullopt);
  }
}

RoundOutcome Task::close_round_from_weighted_sum(const WeightedSumReader& sum,
                                                 std::vector<DeviceId> contributors) {
  throw_if_failed();
  if (!strategy_->aggregates_from_weighted_sum())
    throw Unsupported("task '" + name() + "': " + strategy_->name() +
                      " cannot aggregate from a weighted sum, it needs the individual updates");
  return close_round_from_data_plane(std::move(contributors),
                                     [&] { return strategy_->aggregate_from_weighted_sum(global_, sum); });
}

RoundOutcome Task::close_round_from_updates(const UpdatesReader& updates,
                                            std::vector<DeviceId> contributors) {
  throw_if_failed();
  if (strategy_->aggregates_from_weighted_sum())
    throw Unsupported("task '" + name() + "': " + strategy_->name() +
                      " aggregates from a weighted sum, not from the individual updates");
  if (updates.count != contributors.size())
    throw Refused("task '" + name() + "': the updates reader holds " + std::to_string(updates.count) +
                  " updates for " + std::to_string(contributors.size()) + " contributors");
  return close_round_from_data_plane(std::move(contributors),
                                     [&] { return strategy_->aggregate_from_updates(global_, updates); });
}

RoundOutcome Task::close_round_from_data_plane(std::vector<DeviceId> contributors,
                                               const std::function<Model()>& aggregate) {
  if (!round_) throw StateError("task '" + name() + "': no round is open");
  if (round_->close_with_contributors(std::move(contributors)) == RoundStatus::Abandoned)
    return finish(RoundStatus::Abandoned, round_->contributors(), {}, std::nullopt);
  try {
    return finish(RoundStatus::Completed, round_->contributors(), {}, aggregate());
  } catch (const Refused& error) {  // what the data plane delivered does not fit the model
    return finish(RoundStatus::Abandoned, round_->contributors(), error.what(), std::nullopt);
  } catch (const AggregationFailed& error) {
    return finish(RoundStatus::Abandoned, round_->contributors(), error.what(), std::nullopt);
  }
}

RoundOutcome Task::finish(RoundStatus status, std::vector<DeviceId> contributors, std::string reason,
                          std::optional<Model> aggregate) {
  RoundOutcome outcome;
  outcome.round_id = round_->plan().round_id;
  outcome.trained_on_version = round_->plan().model_version;
  outcome.status = status;
  outcome.missing = round_->missing();
  if (status == RoundStatus::Abandoned && reason.empty())
    reason = std::to_string(contributors.size()) + " of the " + std::to_string(round_->plan().min_updates) +
             " updates required arrived";
  outcome.contributors = std::move(contributors);
  outcome.reason = std::move(reason);
  round_.reset();
  if (status == RoundStatus::Completed) {
    global_ = std::move(*aggregate);
    ++model_version_;
    abandoned_in_a_row_ = 0;
  } else if (++abandoned_in_a_row_ > config_.max_retries) {
    failure_ = "task '" + name() + "' failed: the round training model version " +
               std::to_string(outcome.trained_on_version) + " was abandoned " +
               std::to_string(abandoned_in_a_row_) + " times in a row (max_retries " +
               std::to_string(config_.max_retries) + "); last, round " + std::to_string(outcome.round_id) +
               ": " + outcome.reason;
    throw TaskFailed(failure_);
  }
  outcome.model_version = model_version_;
  outcome.abandoned_in_a_row = abandoned_in_a_row_;
  return outcome;
}

TaskCheckpoint Task::checkpoint() const {
  nlohmann::json meta = {{"task", name()},
                         {"model_version", model_version_},
                         {"next_round_id", next_round_id_},
                         {"abandoned_in_a_row", abandoned_in_a_row_},
                         {"failure", failure_}};
  return {std::move(meta), global_, strategy_->export_state()};
}

}  // namespace tn::federated
