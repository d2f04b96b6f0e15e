// The coordinator daemon's configuration: a JSON file, with command-line flags overriding it.
//
//   {
//     "listen": "0.0.0.0:7400",                  gRPC address (port 0: any free port)
//     "tls": {"certificate_chain": "cert.pem",   optional: serve TLS with these PEM files
//             "private_key": "key.pem"},
//     "state_directory": "/var/lib/torchnative", required (server/state_store.h)
//     "admin_public_keys": ["<64 hex digits>"],  required; an admin call's key_id is the key in hex
//     "data_plane": {"enabled": true,            false: every device takes part over gRPC alone
//                                                (FetchModel, SubmitUpdate), whatever its CheckIn
//                                                asked, so that TLS covers every byte of a round
//                    "host": "127.0.0.1",        where each round's TCP store and hub listen
//                    "join_window_ms": 30000,    how long selected devices have to join a round
//                    "spool_bytes": 268435456,   contributions the hub keeps in memory; past
//                                                this it spools them to disk, into
//                    "spool_directory": "/var/tmp"},  this directory (default $TMPDIR or /tmp;
//                                                it should be on disk, not tmpfs)
//     "request_timestamp_window_ms": 300000,     requests signed further from now are refused
//     "check_in_wait_bound_ms": 20000,           the longest a CheckIn is held
//     "heartbeat_interval_ms": 10000,            what devices are told to keep to; one not
//                                                heard from for kHeartbeatsUntilGone intervals
//                                                is presumed gone
//     "transfer_limits": {"max_message_bytes", "max_chunk_bytes", "max_tensors", "max_total_bytes"},
//     "update_limits": {"max_update_bytes", "max_examples"},
//     "http_listen": "127.0.0.1:9400"            /healthz and /metrics; "" turns them off
//   }
//
// Every key but state_directory and admin_public_keys is optional. Unknown keys are refused by
// name, so a misspelt setting is never silently ignored.
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "federated/validation.h"
#include "proto/model_transfer.h"

namespace tn::server {

// A device that heartbeats every interval, or sooner (the client jitters below it), may lose one
// heartbeat and be late with the next before it is presumed gone.
inline constexpr int kHeartbeatsUntilGone = 3;

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TlsFiles {
  std::string certificate_chain;  // PEM
  std::string private_key;        // PEM
};

struct CoordinatorConfig {
  std::string listen = "127.0.0.1:7400";
  std::optional<TlsFiles> tls;
  std::filesystem::path state_directory;
  std::vector<std::string> admin_public_keys;  // 32 bytes each
  // Off: no round opens a store or a hub; every device goes over gRPC (TLS when configured).
  bool data_plane_enabled = true;
  std::string data_plane_host = "127.0.0.1";
  std::chrono::milliseconds join_window{30'000};
  // dist::ProcessGroupOptions::deadline_reduce_spool_bytes of the rounds' hub.
  uint64_t spool_bytes = uint64_t{256} << 20;
  // dist::ProcessGroupOptions::deadline_reduce_spool_directory; empty: $TMPDIR or /tmp.
  std::string spool_directory;
  std::chrono::milliseconds request_timestamp_window{std::chrono::minutes(5)};
  std::chrono::milliseconds check_in_wait_bound{20'000};
  std::chrono::milliseconds heartbeat_interval{10'000};
  proto::TransferLimits transfer_limits;
  federated::UpdateLimits update_limits;
  std::string http_listen = "127.0.0.1:9400";
};

// Refuses (ConfigError naming the key) unknown keys, values of the wrong type or out of range,
// admin keys that are not 64 hex digits, and a chunk size that does not fit a message.
CoordinatorConfig parse_config(const nlohmann::json& document);

// The command-line flags, each written into `document` at its key before parse_config:
//   --listen ADDR  --tls-cert FILE  --tls-key FILE  --state-dir DIR  --admin-key HEX (repeatable;
//   replaces the file's list)  --data-plane-host HOST  --join-window-ms MS
//   --timestamp-window-ms MS  --check-in-wait-ms MS  --max-message-bytes N  --http-listen ADDR
// Refuses (ConfigError) an unknown flag, a missing value and a number that does not parse.
void apply_flags(nlohmann::json& document, const std::vector<std::string>& flags);

}  // namespace tn::server
