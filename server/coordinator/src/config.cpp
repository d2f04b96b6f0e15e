#include <limits>
#include <map>
#include <set>

#include "proto/signing.h"
#include "server/coordinator_config.h"
#include "server/hex.h"

namespace tn::server {

namespace {

using nlohmann::json;

// Refuses keys of `object` (named `where`) that are not in `known`, listing the known ones.
void refuse_unknown_keys(const json& object, const std::string& where, const std::set<std::string>& known) {
  if (!object.is_object()) throw ConfigError(where + " must be a JSON object, not " + object.dump());
  for (const auto& [key, value] : object.items()) {
    if (known.contains(key)) continue;
    std::string list;
    for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
    throw ConfigError("unknown configuration key '" + where + key + "' (known here: " + list + ")");
  }
}

std::string text_at(const json& object, const std::string& key, const std::string& where) {
  const json& value = object.at(key);
  if (!value.is_string()) throw ConfigError("'" + where + key + "' must be a string, not " + value.dump());
  return value.get<std::string>();
}

uint64_t count_at(const json& object, const std::string& key, const std::string& where, uint64_t minimum,
                  uint64_t maximum = std::numeric_limits<uint64_t>::max()) {
  const json& value = object.at(key);
  if (!value.is_number_unsigned() || value.get<uint64_t>() < minimum || value.get<uint64_t>() > maximum)
    throw ConfigError("'" + where + key + "' must be an integer from " + std::to_string(minimum) + " to " +
                      std::to_string(maximum) + ", not " + value.dump());
  return value.get<uint64_t>();
}

std::chrono::milliseconds duration_at(const json& object, const std::string& key, const std::string& where) {
  // At most a day: a bound beyond that is a typo, and it must fit every clock's arithmetic.
  return std::chrono::milliseconds(count_at(object, key, where, 1, 86'400'000));
}

void parse_data_plane(const json& section, CoordinatorConfig& config) {
  refuse_unknown_keys(section, "data_plane.",
                      {"enabled", "host", "join_window_ms", "spool_bytes", "spool_directory"});
  if (section.contains("enabled")) {
    if (!section["enabled"].is_boolean())
      throw ConfigError("'data_plane.enabled' must be true or false, not " + section["enabled"].dump());
    config.data_plane_enabled = section["enabled"].get<bool>();
  }
  if (section.contains("host")) config.data_plane_host = text_at(section, "host", "data_plane.");
  if (section.contains("join_window_ms"))
    config.join_window = duration_at(section, "join_window_ms", "data_plane.");
  if (section.contains("spool_bytes"))
    config.spool_bytes = count_at(section, "spool_bytes", "data_plane.", 1);
  if (section.contains("spool_directory")) {
    config.spool_directory = text_at(section, "spool_directory", "data_plane.");
    // Found at start, not at the first round that spools.
    if (!std::filesystem::is_directory(config.spool_directory))
      throw ConfigError("data_plane.spool_directory: '" + config.spool_directory + "' is not a directory");
  }
}

void parse_transfer_limits(const json& section, proto::TransferLimits& limits) {
  const std::string where = "transfer_limits.";
  refuse_unknown_keys(section, where,
                      {"max_message_bytes", "max_chunk_bytes", "max_tensors", "max_total_bytes"});
  // gRPC takes message sizes as int.
  const uint64_t int_max = uint64_t(std::numeric_limits<int>::max());
  if (section.contains("max_message_bytes"))
    limits.max_message_bytes =
        count_at(section, "max_message_bytes", where, 2 * proto::kEnvelopeBytes, int_max);
  if (section.contains("max_chunk_bytes"))
    limits.max_chunk_bytes = count_at(section, "max_chunk_bytes", where, 1, int_max);
  if (section.contains("max_tensors")) limits.max_tensors = count_at(section, "max_tensors", where, 1);
  if (section.contains("max_total_bytes"))
    limits.max_total_bytes = count_at(section, "max_total_bytes", where, 1);
}

void parse_update_limits(const json& section, federated::UpdateLimits& limits) {
  refuse_unknown_keys(section, "update_limits.", {"max_update_bytes", "max_examples"});
  if (section.contains("max_update_bytes"))
    limits.max_update_bytes = count_at(section, "max_update_bytes", "update_limits.", 1);
  if (section.contains("max_examples"))
    limits.max_examples = int64_t(count_at(section, "max_examples", "update_limits.", 1,
                                           uint64_t(std::numeric_limits<int64_t>::max())));
}

}  // namespace

CoordinatorConfig parse_config(const json& document) {
  refuse_unknown_keys(
      document, "",
      {"listen", "tls", "state_directory", "admin_public_keys", "data_plane", "request_timestamp_window_ms",
       "check_in_wait_bound_ms", "heartbeat_interval_ms", "transfer_limits", "update_limits", "http_listen"});
  CoordinatorConfig config;
  if (document.contains("listen")) config.listen = text_at(document, "listen", "");
  if (document.contains("tls")) {
    const json& tls = document["tls"];
    refuse_unknown_keys(tls, "tls.", {"certificate_chain", "private_key"});
    if (!tls.contains("certificate_chain") || !tls.contains("private_key"))
      throw ConfigError("'tls' needs both 'certificate_chain' and 'private_key' (PEM files)");
    config.tls = TlsFiles{text_at(tls, "certificate_chain", "tls."), text_at(tls, "private_key", "tls.")};
  }
  if (!document.contains("state_directory")) throw ConfigError("'state_directory' is required");
  config.state_directory = text_at(document, "state_directory", "");
  if (config.state_directory.empty()) throw ConfigError("'state_directory' is empty");
  if (!document.contains("admin_public_keys") || !document["admin_public_keys"].is_array() ||
      document["admin_public_keys"].empty())
    throw ConfigError("'admin_public_keys' must list at least one administrator key (64 hex digits each)");
  for (const json& entry : document["admin_public_keys"]) {
    std::optional<std::string> key;
    if (entry.is_string()) key = from_hex(entry.get<std::string>(), proto::kPublicKeyBytes);
    if (!key)
      throw ConfigError("'admin_public_keys' entry " + entry.dump() +
                        " is not an Ed25519 public key in hex (64 digits)");
    config.admin_public_keys.push_back(*key);
  }
  if (document.contains("data_plane")) parse_data_plane(document["data_plane"], config);
  if (document.contains("request_timestamp_window_ms"))
    config.request_timestamp_window = duration_at(document, "request_timestamp_window_ms", "");
  if (document.contains("check_in_wait_bound_ms"))
    config.check_in_wait_bound = duration_at(document, "check_in_wait_bound_ms", "");
  if (document.contains("heartbeat_interval_ms"))
    config.heartbeat_interval = duration_at(document, "heartbeat_interval_ms", "");
  if (document.contains("transfer_limits"))
    parse_transfer_limits(document["transfer_limits"], config.transfer_limits);
  if (document.contains("update_limits"))
    parse_update_limits(document["update_limits"], config.update_limits);
  if (document.contains("http_listen")) config.http_listen = text_at(document, "http_listen", "");
  if (config.transfer_limits.max_chunk_bytes + proto::kEnvelopeBytes >
      config.transfer_limits.max_message_bytes)
    throw ConfigError("'transfer_limits.max_chunk_bytes' " +
                      std::to_string(config.transfer_limits.max_chunk_bytes) +
                      " does not fit a message of 'transfer_limits.max_message_bytes' " +
                      std::to_string(config.transfer_limits.max_message_bytes) + " with its " +
                      std::to_string(proto::kEnvelopeBytes) + "-byte envelope");
  return config;
}

void apply_flags(json& document, const std::vector<std::string>& flags) {
  enum class Kind { Text, Count };
  struct Flag {
    std::vector<std::string> path;
    Kind kind;
  };
  const std::map<std::string, Flag> known = {
      {"--listen", {{"listen"}, Kind::Text}},
      {"--tls-cert", {{"tls", "certificate_chain"}, Kind::Text}},
      {"--tls-key", {{"tls", "private_key"}, Kind::Text}},
      {"--state-dir", {{"state_directory"}, Kind::Text}},
      {"--data-plane-host", {{"data_plane", "host"}, Kind::Text}},
      {"--join-window-ms", {{"data_plane", "join_window_ms"}, Kind::Count}},
      {"--timestamp-window-ms", {{"request_timestamp_window_ms"}, Kind::Count}},
      {"--check-in-wait-ms", {{"check_in_wait_bound_ms"}, Kind::Count}},
      {"--max-message-bytes", {{"transfer_limits", "max_message_bytes"}, Kind::Count}},
      {"--http-listen", {{"http_listen"}, Kind::Text}},
  };
  bool admin_keys_replaced = false;
  for (size_t i = 0; i < flags.size(); i += 2) {
    const std::string& flag = flags[i];
    if (i + 1 >= flags.size()) throw ConfigError("flag " + flag + " needs a value");
    const std::string& value = flags[i + 1];
    if (flag == "--admin-key") {
      if (!admin_keys_replaced) document["admin_public_keys"] = json::array();
      admin_keys_replaced = true;
      document["admin_public_keys"].push_back(value);
      continue;
    }
    auto found = known.find(flag);
    if (found == known.end()) throw ConfigError("unknown flag " + flag);
    json* target = &document;
    for (const std::string& key : found->second.path) target = &(*target)[key];
    if (found->second.kind == Kind::Text) {
      *target = value;
      continue;
    }
    size_t used = 0;
    uint64_t number = 0;
    try {
      number = std::stoull(value, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used == 0 || used != value.size() || value.front() == '-')
      throw ConfigError("flag " + flag + " needs a non-negative integer, not '" + value + "'");
    *target = number;
  }
}

}  // namespace tn::server
