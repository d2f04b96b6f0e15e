// torchnative-coordinator: the federated coordinator daemon.
//
//   torchnative-coordinator [--config FILE] [flags overriding it; --help lists them]
//
// Logs JSON lines to stderr; the first, "listening", gives the ports actually bound. SIGTERM or
// SIGINT: no further round starts, rounds in progress finish, the servers stop, exit status 0.
#include <csignal>
#include <iostream>
#include <vector>

#include "cli/arguments.h"
#include "cli/read_file.h"
#include "distributed/process_group.h"
#include "json_log.h"
#include "server/coordinator.h"

namespace {

nlohmann::json read_config_file(const std::string& path) {
  std::string text;
  try {
    text = tn::cli::read_file(path, "configuration");
  } catch (const std::runtime_error& error) {
    throw tn::server::ConfigError(error.what());
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw tn::server::ConfigError("the configuration file " + path + " is not JSON: " + error.what());
  }
}

// The flags, for --help and to check each is known and has its value; apply_flags then writes
// them, in the order given, over the configuration file's settings.
void declare_flags(tn::cli::Command& command, std::string& config_path, std::vector<std::string>& overrides) {
  const tn::server::CoordinatorConfig defaults;
  command
      .flag("--config", "FILE",
            "the JSON configuration (server/coordinator_config.h); the flags below override it")
      .into(config_path);
  auto override_flag = [&](const std::string& name, const std::string& placeholder,
                           const std::string& meaning, const std::string& default_text) -> tn::cli::Flag& {
    return command.flag(name, placeholder, meaning)
        .default_text(default_text)
        .handle([&, name](const std::string& value) {
          overrides.push_back(name);
          overrides.push_back(value);
        });
  };
  auto ms = [](std::chrono::milliseconds duration) { return std::to_string(duration.count()); };
  override_flag("--listen", "ADDR", "the gRPC address (port 0: any free port)", defaults.listen);
  override_flag("--state-dir", "DIR",
                "where tasks, models and devices are kept (required here or in the file)", "");
  override_flag("--admin-key", "HEX",
                "an administrator's public key, 64 hex digits; replaces the file's list", "")
      .repeatable();
  override_flag("--tls-cert", "FILE", "serve TLS with this PEM certificate chain (with --tls-key)", "");
  override_flag("--tls-key", "FILE", "the PEM private key of --tls-cert", "");
  override_flag("--data-plane-host", "HOST", "where each round's TCP store and hub listen",
                defaults.data_plane_host);
  override_flag("--join-window-ms", "MS", "how long selected devices have to join a round",
                ms(defaults.join_window));
  override_flag("--timestamp-window-ms", "MS", "requests signed further from now are refused",
                ms(defaults.request_timestamp_window));
  override_flag("--check-in-wait-ms", "MS", "the longest a CheckIn is held",
                ms(defaults.check_in_wait_bound));
  override_flag("--max-message-bytes", "N", "the largest gRPC message, and so the largest model chunk",
                std::to_string(defaults.transfer_limits.max_message_bytes));
  override_flag("--http-listen", "ADDR", "/healthz and /metrics; \"\" turns them off", defaults.http_listen);
}

tn::server::CoordinatorConfig configure(tn::cli::Command& command, int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> overrides;  // flag, value, flag, value...
  declare_flags(command, config_path, overrides);
  command.parse_or_exit(argc, argv);
  nlohmann::json document = config_path.empty() ? nlohmann::json::object() : read_config_file(config_path);
  tn::server::apply_flags(document, overrides);
  return tn::server::parse_config(document);
}

}  // namespace

int main(int argc, char** argv) {
  using tn::server::log_event;
  using tn::server::LogLevel;
  // Blocked before any thread starts, so every thread inherits the mask and the signals wait
  // for sigwait below instead of interrupting whatever thread they land on.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  tn::cli::Command command(
      "torchnative-coordinator",
      "The federated coordinator daemon. Logs JSON lines to stderr; the first, "
      "\"listening\", gives the ports actually bound. SIGTERM or SIGINT: no further round "
      "starts, rounds in progress finish, the servers stop, exit status 0. Each flag "
      "overrides the configuration file; a default applies when neither sets it.");
  tn::server::CoordinatorConfig config;
  try {
    config = configure(command, argc, argv);
  } catch (const tn::server::ConfigError& error) {
    command.fail(error.what());
  }
  // A round of k devices holds about 2k descriptors (the store's connections and the hub's).
  const uint64_t open_files_limit = tn::dist::raise_open_files_limit();
  try {
    tn::server::Coordinator coordinator(config);
    log_event(LogLevel::Info, "listening",
              {{"grpc_port", coordinator.grpc_port()},
               {"http_port", coordinator.http_port()},
               {"state_directory", config.state_directory.string()},
               {"tls", config.tls.has_value()},
               {"open_files_limit", open_files_limit}});
    int received = 0;
    sigwait(&signals, &received);
    log_event(LogLevel::Info, "signal", {{"signal", received == SIGTERM ? "SIGTERM" : "SIGINT"}});
    coordinator.shutdown();
  } catch (const std::exception& error) {
    log_event(LogLevel::Error, "fatal", {{"error", error.what()}});
    return 1;
  }
  return 0;
}
