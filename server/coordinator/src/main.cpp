// torchnative-coordinator: the federated coordinator daemon.
//
//   torchnative-coordinator [--config FILE] [flags overriding it, see coordinator_config.h]
//
// Logs JSON lines to stderr; the first, "listening", gives the ports actually bound. SIGTERM or
// SIGINT: no further round starts, rounds in progress finish, the servers stop, exit status 0.
#include <csignal>
#include <fstream>
#include <iostream>
#include <vector>

#include "distributed/process_group.h"
#include "json_log.h"
#include "server/coordinator.h"

namespace {

constexpr const char* kUsage =
    "usage: torchnative-coordinator [--config FILE] [--listen ADDR] [--state-dir DIR] [--admin-key HEX]...\n"
    "       [--tls-cert FILE --tls-key FILE] [--data-plane-host HOST] [--join-window-ms MS]\n"
    "       [--timestamp-window-ms MS] [--check-in-wait-ms MS] [--max-message-bytes N] [--http-listen "
    "ADDR]\n";

nlohmann::json read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw tn::server::ConfigError("cannot read the configuration file " + path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw tn::server::ConfigError("the configuration file " + path + " is not JSON: " + error.what());
  }
}

tn::server::CoordinatorConfig configure(int argc, char** argv) {
  nlohmann::json document = nlohmann::json::object();
  std::vector<std::string> flags;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--help" || argument == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (argument == "--config") {
      if (i + 1 >= argc) throw tn::server::ConfigError("flag --config needs a value");
      document = read_config_file(argv[++i]);
      continue;
    }
    flags.push_back(argument);
  }
  tn::server::apply_flags(document, flags);
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

  tn::server::CoordinatorConfig config;
  try {
    config = configure(argc, argv);
  } catch (const tn::server::ConfigError& error) {
    std::cerr << "torchnative-coordinator: " << error.what() << "\n" << kUsage;
    return 2;
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
