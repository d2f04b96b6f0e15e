#include "server/coordinator.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <thread>

#include "admin_service.h"
#include "cli/read_file.h"
#include "device_service.h"
#include "grpc_log.h"
#include "http_endpoint.h"
#include "json_log.h"
#include "malformed_requests.h"
#include "request_verifier.h"
#include "tasks.h"

namespace tn::server {

namespace {

// How often devices' last-seen times are stored (a crash loses at most this much of them; the
// board's own times are what liveness and ListDevices use while the coordinator runs), and how
// often used nonces that can no longer be replayed are forgotten.
constexpr std::chrono::seconds kLastSeenSaveInterval{10};
constexpr std::chrono::seconds kNoncePruneInterval{60};

std::shared_ptr<grpc::ServerCredentials> credentials(const CoordinatorConfig& config) {
  if (!config.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back(
      {tn::cli::read_file(config.tls->private_key, "TLS private key"),
       tn::cli::read_file(config.tls->certificate_chain, "TLS certificate chain")});
  return grpc::SslServerCredentials(options);
}

}  // namespace

struct Coordinator::Impl {
  CoordinatorConfig config;
  GuardedState state;
  Metrics metrics;
  GrpcLogRoute grpc_log{metrics};
  DeviceBoard board{config.heartbeat_interval * kHeartbeatsUntilGone};
  EventLog events{state};
  UpdateInboxes inboxes;
  SecureExchanges secure_exchanges;
  Services services{config, state, board, events, metrics, inboxes, secure_exchanges};
  RequestVerifier verifier;
  Tasks tasks{services};
  DeviceServiceImpl device_service{services, verifier};
  AdminServiceImpl admin_service{services, verifier, tasks};
  std::unique_ptr<grpc::Server> server;
  int grpc_port = 0;
  std::unique_ptr<HttpEndpoint> http;

  std::mutex mutex;
  std::condition_variable stopping_changed;
  bool stopping = false;
  std::thread housekeeping;

  explicit Impl(CoordinatorConfig c)
      : config(std::move(c)),
        state(StateStore::open(config.state_directory)),
        verifier(state, metrics, config.admin_public_keys, config.request_timestamp_window) {}

  void report_open() {
    const OpenReport& report = state.with([](StateStore& store) { return store.open_report(); });
    for (const std::string& path : report.removed_files)
      log_event(LogLevel::Warning, "state_file_removed",
                {{"path", path}, {"why", "no committed row names it"}});
    for (const FileProblem& problem : report.damaged_files)
      log_event(LogLevel::Error, "state_file_damaged",
                {{"path", problem.path}, {"problem", problem.problem}});
    for (const auto& [task, round] : report.interrupted_rounds)
      log_event(LogLevel::Warning, "round_interrupted", {{"task", task}, {"round", round}});
    metrics.set_devices_registered(state.with([](StateStore& store) { return store.list_devices().size(); }));
  }

  void start_servers() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(config.listen, credentials(config), &grpc_port);
    builder.SetMaxReceiveMessageSize(int(config.transfer_limits.max_message_bytes));
    builder.SetMaxSendMessageSize(int(config.transfer_limits.max_message_bytes));
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>(metrics));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    builder.RegisterService(&device_service);
    builder.RegisterService(&admin_service);
    server = builder.BuildAndStart();
    if (!server || grpc_port == 0) throw std::runtime_error("cannot serve gRPC on " + config.listen);
    if (!config.http_listen.empty())
      http = std::make_unique<HttpEndpoint>(config.http_listen, [this](const std::string& path) {
        std::optional<HttpResponse> response;
        if (path == "/healthz") response = HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
        if (path == "/metrics")
          response =
              HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics.render(board.waiting())};
        return response;
      });
  }

  void keep_house_until_stopped() {
    std::unique_lock lock(mutex);
    auto next_prune = std::chrono::steady_clock::now() + kNoncePruneInterval;
    while (!stopping_changed.wait_for(lock, kLastSeenSaveInterval, [&] { return stopping; })) {
      lock.unlock();
      save_last_seen();
      if (std::chrono::steady_clock::now() >= next_prune) {
        next_prune += kNoncePruneInterval;
        try {
          verifier.forget_expired_nonces();
        } catch (const std::exception& error) {
          log_event(LogLevel::Error, "nonce_pruning_failed", {{"error", error.what()}});
        }
      }
      lock.lock();
    }
  }

  void save_last_seen() {
    try {
      const auto seen = board.take_unsaved_last_heard();
      if (!seen.empty()) state.with([&](StateStore& store) { return store.record_last_seen(seen); });
    } catch (const std::exception& error) {
      log_event(LogLevel::Error, "last_seen_not_saved", {{"error", error.what()}});
    }
  }

  void shutdown() {
    {
      std::lock_guard lock(mutex);
      if (stopping) return;
      stopping = true;
    }
    stopping_changed.notify_all();
    log_event(LogLevel::Info, "shutting_down",
              {{"why", "no further round starts; rounds in progress finish"}});
    // The servers keep serving while rounds finish: their devices still fetch configurations.
    tasks.drain_and_join();
    board.close();
    events.close();
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    http.reset();
    if (housekeeping.joinable()) housekeeping.join();
    save_last_seen();
    log_event(LogLevel::Info, "stopped");
  }
};

Coordinator::Coordinator(CoordinatorConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  impl_->report_open();
  impl_->start_servers();
  impl_->tasks.resume_all();
  impl_->housekeeping = std::thread([impl = impl_.get()] { impl->keep_house_until_stopped(); });
}

Coordinator::~Coordinator() { shutdown(); }

int Coordinator::grpc_port() const { return impl_->grpc_port; }

int Coordinator::http_port() const { return impl_->http ? impl_->http->port() : 0; }

void Coordinator::shutdown() { impl_->shutdown(); }

}  // namespace tn::server
