// The coordinator's tasks: created by AdminService, resumed at startup, each running on its own
// TaskRunner until it completes, fails, is stopped, or the coordinator shuts down.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "federated/model.h"
#include "services.h"
#include "task_runner.h"
#include "torchnative/federated/v1/admin.pb.h"

namespace tn::server {

class Tasks {
 public:
  explicit Tasks(Services services) : services_(services) {}
  ~Tasks();  // drains and joins every runner

  // Starts a runner for every task the state store holds as running, at its resume point.
  // A task that cannot be restored is logged and left as it is.
  void resume_all();
  // Refuses (federated::ParameterRefused naming it) a header whose round parameters, strategy
  // or strategy parameters cannot run, before its model is read.
  void check(const v1::CreateTaskHeader& header) const;
  // Validates the header (round parameters, strategy and its parameters, the model against
  // both), stores the task with `initial_model` as version 0 and starts it; returns its id.
  // Refuses (federated::ParameterRefused) what cannot run, naming it: e.g. min_updates below
  // what the strategy needs (Krum's 2f + 3), a model with nothing to train.
  std::string create(const v1::CreateTaskHeader& header, federated::Model initial_model);
  // Refuses (NotFound) an unknown task and (Conflict) one that is not running.
  void stop(const std::string& task_id, const std::string& reason);
  // No runner starts another round; rounds in progress finish. Then joins every runner.
  void drain_and_join();
  // The task's loop's phase (TaskRunner::phase); UNSPECIFIED for a task with no loop.
  TaskRunner::Phase phase(const std::string& task_id);

 private:
  void start(federated::Task task, RoundParams params, uint64_t rounds_planned, uint64_t next_round_id,
             std::optional<double> clip_norm = std::nullopt);

  Services services_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<TaskRunner>> runners_;
  bool draining_ = false;
};

}  // namespace tn::server
