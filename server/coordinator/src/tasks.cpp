#include "tasks.h"

#include "federated/contribution.h"
#include "federated/errors.h"
#include "json_log.h"
#include "model_versions.h"

namespace tn::server {

namespace {

std::shared_ptr<const federated::Clock> steady_clock() {
  static const auto clock = std::make_shared<const federated::SteadyClock>();
  return clock;
}

nlohmann::json strategy_parameters(const v1::CreateTaskHeader& header) {
  if (header.strategy_parameters_json().empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(header.strategy_parameters_json());
  } catch (const nlohmann::json::exception& error) {
    throw federated::ParameterRefused("CreateTask: strategy_parameters_json is not JSON: " +
                                      std::string(error.what()));
  }
}

}  // namespace

Tasks::~Tasks() { drain_and_join(); }

void Tasks::resume_all() {
  std::vector<TaskRecord> records =
      services_.state.with([](StateStore& store) { return store.list_tasks(); });
  for (const TaskRecord& record : records) {
    if (record.state != TaskState::Running) continue;
    const std::string& id = record.definition.id;
    try {
      ResumePoint point = services_.state.with([&](StateStore& store) { return store.resume_point(id); });
      RoundParams params = RoundParams::from_json(record.definition.round_params, id);
      federated::Task task = federated::Task::restore(params.task_config(id, services_.config.update_limits),
                                                      point.checkpoint(), steady_clock());
      log_event(
          LogLevel::Info, "task_resumed",
          {{"task", id}, {"model_version", point.model_version}, {"next_round", point.next_round_number}});
      std::lock_guard lock(mutex_);
      start(std::move(task), std::move(params), record.definition.rounds_planned, point.next_round_number,
            stored_clip_norm(point.strategy_state));
    } catch (const std::exception& error) {
      log_event(LogLevel::Error, "task_not_resumed", {{"task", id}, {"error", error.what()}});
    }
  }
}

void Tasks::check(const v1::CreateTaskHeader& header) const {
  const RoundParams params = RoundParams::from_header(header, "unnamed");
  const std::unique_ptr<federated::Strategy> strategy =
      federated::make_strategy(header.strategy(), strategy_parameters(header));
  if (params.central_dp) check_strategy_takes_central_dp(*strategy);
  if (params.secure_aggregation) check_strategy_takes_secure_aggregation(*strategy);
}

std::string Tasks::create(const v1::CreateTaskHeader& header, federated::Model initial_model) {
  std::lock_guard lock(mutex_);
  if (draining_) throw Conflict("CreateTask: the coordinator is shutting down");
  std::string id;
  services_.state.with([&](StateStore& store) {
    for (size_t n = store.list_tasks().size() + 1; id.empty() || store.task(id); ++n)
      id = "task-" + std::to_string(n);
  });
  RoundParams params = RoundParams::from_header(header, id);
  std::unique_ptr<federated::Strategy> strategy =
      federated::make_strategy(header.strategy(), strategy_parameters(header));
  if (params.central_dp) check_strategy_takes_central_dp(*strategy);
  if (params.secure_aggregation) check_strategy_takes_secure_aggregation(*strategy);
  const size_t elements = federated::ContributionLayout(initial_model.spec()).elements();
  if (elements == 1)
    throw federated::ParameterRefused("CreateTask: the model has no floating-point tensor to train");
  // One element of the layout is the example count; the rest are the update's coordinates.
  if (params.secure_aggregation) params.secure_aggregation->plan_noise(elements - 1, params.min_updates);
  TaskDefinition definition;
  definition.id = id;
  definition.strategy = strategy->name();
  definition.strategy_params = strategy->params();  // defaults included, so a restart rebuilds the same
  definition.round_params = params.to_json();
  definition.rounds_planned = header.rounds();
  federated::Task task(params.task_config(id, services_.config.update_limits), initial_model,
                       std::move(strategy), steady_clock());
  services_.state.with([&](StateStore& store) { return store.create_task(definition, initial_model); });
  services_.events.publish(
      v1::EVENT_KIND_TASK_CREATED, id, 0, "",
      definition.strategy + ", " + std::to_string(definition.rounds_planned) + " rounds of " +
          std::to_string(params.devices_per_round) + " devices, initial model " + model_version_name(id, 0) +
          (params.central_dp ? "; " + params.central_dp->planned_words(definition.rounds_planned) : "") +
          (params.secure_aggregation
               ? "; " + params.secure_aggregation->planned_words(definition.rounds_planned)
               : ""));
  start(std::move(task), std::move(params), definition.rounds_planned, 1);
  return id;
}

void Tasks::stop(const std::string& task_id, const std::string& reason) {
  std::lock_guard lock(mutex_);
  std::optional<TaskRecord> record =
      services_.state.with([&](StateStore& store) { return store.task(task_id); });
  if (!record) throw NotFound("no task '" + task_id.substr(0, 300) + "'");
  if (record->state != TaskState::Running)
    throw Conflict("task '" + task_id + "' is " + task_state_name(record->state) + ", not running");
  const std::string why = reason.empty() ? "stopped by an administrator" : reason;
  auto found = runners_.find(task_id);
  if (found != runners_.end() && !found->second->finished()) return found->second->stop(why);
  // Running in the store with no loop (it could not be resumed): record the stop directly.
  std::vector<DeviceBoard::Answer> held;
  services_.state.with([&](StateStore& store) {
    store.set_task_state(task_id, TaskState::Stopped, why);
    held = end_work_if_no_task_runs(store, services_.board);
  });
  services_.events.publish(v1::EVENT_KIND_TASK_STOPPED, task_id, 0, "", why);
  DeviceBoard::answer_with_no_work(std::move(held));
}

void Tasks::drain_and_join() {
  std::vector<TaskRunner*> runners;
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
    for (auto& [id, runner] : runners_) {
      runner->drain();
      runners.push_back(runner.get());
    }
  }
  // Runners are never removed, and creation is refused once draining, so the pointers stay valid.
  for (TaskRunner* runner : runners) runner->join();
}

TaskRunner::Phase Tasks::phase(const std::string& task_id) {
  std::lock_guard lock(mutex_);
  auto found = runners_.find(task_id);
  return found == runners_.end() ? TaskRunner::Phase{} : found->second->phase();
}

void Tasks::start(federated::Task task, RoundParams params, uint64_t rounds_planned, uint64_t next_round_id,
                  std::optional<double> clip_norm) {
  std::string id = task.name();
  runners_[id] = std::make_unique<TaskRunner>(services_, std::move(task), std::move(params), rounds_planned,
                                              next_round_id, clip_norm);
}

}  // namespace tn::server
