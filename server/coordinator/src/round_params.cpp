#include "round_params.h"

#include <algorithm>

#include "device_metadata.h"
#include "federated/errors.h"

namespace tn::server {

namespace {

// FNV-1a: a stable 64-bit seed from the task id, the same on every platform and build.
uint64_t seed_from(const std::string& task_id) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : task_id) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

RoundParams RoundParams::from_header(const v1::CreateTaskHeader& header, const std::string& task_id) {
  const std::string label = "CreateTask: ";
  if (header.rounds() == 0) throw federated::ParameterRefused(label + "rounds must be at least 1");
  if (header.selection().devices_per_round() == 0)
    throw federated::ParameterRefused(label + "selection.devices_per_round must be at least 1");
  if (header.min_updates() == 0) throw federated::ParameterRefused(label + "min_updates must be at least 1");
  if (header.min_updates() > header.selection().devices_per_round())
    throw federated::ParameterRefused(label + "min_updates " + std::to_string(header.min_updates()) +
                                      " exceeds selection.devices_per_round " +
                                      std::to_string(header.selection().devices_per_round()) +
                                      ", so no round could complete");
  if (header.round_timeout_ms() == 0 || header.round_timeout_ms() > uint64_t{86'400'000} * 365)
    throw federated::ParameterRefused(label + "round_timeout_ms " +
                                      std::to_string(header.round_timeout_ms()) +
                                      " must be from 1 ms to a year");
  RoundParams params;
  params.devices_per_round = header.selection().devices_per_round();
  params.required_labels = {header.selection().required_labels().begin(),
                            header.selection().required_labels().end()};
  params.min_memory_bytes = header.selection().min_memory_bytes();
  params.round_timeout = std::chrono::milliseconds(header.round_timeout_ms());
  params.deadline_unix_ms = header.deadline_unix_ms();
  params.min_available_devices = header.min_available_devices();
  params.min_updates = header.min_updates();
  params.seed = seed_from(task_id);
  params.central_dp = CentralDpParams::from_header(header);
  params.secure_aggregation = SecureAggregationParams::from_header(header);
  return params;
}

RoundParams RoundParams::from_json(const nlohmann::json& stored, const std::string& task_id) {
  try {
    RoundParams params;
    params.devices_per_round = stored.at("devices_per_round").get<uint32_t>();
    params.required_labels = stored.at("required_labels").get<std::map<std::string, std::string>>();
    params.min_memory_bytes = stored.at("min_memory_bytes").get<uint64_t>();
    params.round_timeout = std::chrono::milliseconds(stored.at("round_timeout_ms").get<int64_t>());
    params.deadline_unix_ms = stored.at("deadline_unix_ms").get<uint64_t>();
    params.min_available_devices = stored.at("min_available_devices").get<uint32_t>();
    params.min_updates = stored.at("min_updates").get<uint32_t>();
    params.max_retries = stored.at("max_retries").get<uint32_t>();
    params.seed = stored.at("seed").get<uint64_t>();
    if (stored.contains("central_dp"))
      params.central_dp = CentralDpParams::from_json(stored.at("central_dp"));
    if (stored.contains("secure_aggregation"))
      params.secure_aggregation = SecureAggregationParams::from_json(stored.at("secure_aggregation"));
    return params;
  } catch (const nlohmann::json::exception& error) {
    throw federated::ParameterRefused("task '" + task_id + "': the stored round parameters " + stored.dump() +
                                      " do not read back: " + error.what());
  }
}

nlohmann::json RoundParams::to_json() const {
  nlohmann::json stored = {{"devices_per_round", devices_per_round},
                           {"required_labels", required_labels},
                           {"min_memory_bytes", min_memory_bytes},
                           {"round_timeout_ms", round_timeout.count()},
                           {"deadline_unix_ms", deadline_unix_ms},
                           {"min_available_devices", min_available_devices},
                           {"min_updates", min_updates},
                           {"max_retries", max_retries},
                           {"seed", seed}};
  if (central_dp) stored["central_dp"] = central_dp->to_json();
  if (secure_aggregation) stored["secure_aggregation"] = secure_aggregation->to_json();
  return stored;
}

std::optional<CentralDpParams> RoundParams::charged_dp() const {
  if (central_dp) return central_dp;
  return secure_aggregation ? secure_aggregation->charged_dp() : std::nullopt;
}

std::optional<CentralDpParams> RoundParams::charged_dp_of(const nlohmann::json& stored) {
  if (const auto found = stored.find("central_dp"); found != stored.end())
    return CentralDpParams::from_json(*found);
  if (const auto found = stored.find("secure_aggregation"); found != stored.end())
    return SecureAggregationParams::from_json(*found).charged_dp();
  return std::nullopt;
}

federated::TaskConfig RoundParams::task_config(const std::string& task_id,
                                               const federated::UpdateLimits& limits) const {
  federated::TaskConfig config;
  config.name = task_id;
  // Every waiting eligible device up to devices_per_round; fewer than min_updates is no round.
  config.selection.fraction = 1.0;
  config.selection.min_devices = min_updates;
  config.selection.max_devices = devices_per_round;
  config.round_timeout = round_timeout;
  config.min_updates = min_updates;
  config.max_retries = max_retries;
  config.limits = limits;
  config.seed = seed;
  return config;
}

bool RoundParams::eligible(const nlohmann::json& metadata) const {
  const v1::DeviceMetadata device = metadata_from_json(metadata);
  if (device.memory_bytes() < min_memory_bytes) return false;
  return std::all_of(required_labels.begin(), required_labels.end(), [&](const auto& required) {
    auto found = device.labels().find(required.first);
    return found != device.labels().end() && found->second == required.second;
  });
}

size_t RoundParams::devices_to_wait_for() const { return std::max(min_available_devices, min_updates); }

}  // namespace tn::server
