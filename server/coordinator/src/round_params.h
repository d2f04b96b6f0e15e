// A task's selection and round parameters: what CreateTaskHeader asks for, stored with the task
// (TaskDefinition::round_params) so that a restarted coordinator rebuilds the same
// federated::TaskConfig, with the same selection seed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "central_dp.h"
#include "federated/round.h"
#include "secure_aggregation_params.h"
#include "torchnative/federated/v1/admin.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

struct RoundParams {
  uint32_t devices_per_round = 0;
  std::map<std::string, std::string> required_labels;
  uint64_t min_memory_bytes = 0;
  std::chrono::milliseconds round_timeout{0};
  uint64_t deadline_unix_ms = 0;  // 0: none
  uint32_t min_available_devices = 0;
  uint32_t min_updates = 0;
  // Abandoned attempts of one round tolerated in a row (federated::TaskConfig::max_retries).
  uint32_t max_retries = 3;
  uint64_t seed = 0;
  std::optional<CentralDpParams> central_dp;  // stored as "central_dp" only when set
  // Stored as "secure_aggregation" only when set.
  std::optional<SecureAggregationParams> secure_aggregation;

  // Refuses (federated::ParameterRefused naming the field) rounds, devices_per_round, min_updates
  // or round_timeout_ms of 0, min_updates above devices_per_round, and what
  // CentralDpParams::from_header and SecureAggregationParams::from_header refuse. The seed derives from the
  // task id, so two tasks do not select alike.
  static RoundParams from_header(const v1::CreateTaskHeader& header, const std::string& task_id);
  static RoundParams from_json(const nlohmann::json& stored, const std::string& task_id);
  nlohmann::json to_json() const;

  federated::TaskConfig task_config(const std::string& task_id, const federated::UpdateLimits& limits) const;
  // Whether a device whose registered metadata is `metadata` (device_metadata.h) may take part.
  bool eligible(const nlohmann::json& metadata) const;
  // A round starts once this many eligible devices are waiting.
  size_t devices_to_wait_for() const;
  // What each completed round is charged to the task's accountant: central_dp, or
  // secure_aggregation's distributed DP at the multiplier its devices' shares realise
  // (SecureAggregationParams::charged_dp); nothing for a task without DP.
  std::optional<CentralDpParams> charged_dp() const;
  // The same from the stored round parameters, reading the DP blocks alone (the admin views list a
  // task whose other parameters no longer read back). Throws nlohmann::json::exception for a block
  // that does not read back.
  static std::optional<CentralDpParams> charged_dp_of(const nlohmann::json& stored);
};

}  // namespace tn::server
