#include "grpc_log.h"

#include <grpc/support/log.h>

#include <mutex>
#include <string>
#include <string_view>

#include "json_log.h"

namespace tn::server {

namespace {

// How ssl_transport_security.cc begins the line of a handshake that failed on the server's side;
// the rest names the TLS error.
constexpr std::string_view kHandshakeFailed = "Handshake failed with fatal error ";

std::mutex route_mutex;
Metrics* route_metrics = nullptr;  // guarded by route_mutex

void log_grpc_line(gpr_log_func_args* args) {
  const std::string_view message = args->message ? args->message : "";
  const std::string source = std::string(args->file ? args->file : "?") + ":" + std::to_string(args->line);
  if (message.starts_with(kHandshakeFailed)) {
    log_event(LogLevel::Warning, "tls_handshake_failed",
              {{"error", message.substr(kHandshakeFailed.size())}, {"source", source}});
    std::lock_guard lock(route_mutex);
    if (route_metrics) route_metrics->count_refusal("tls_handshake_failed");
    return;
  }
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR ? LogLevel::Error : LogLevel::Info;
  log_event(level, "grpc", {{"message", message}, {"source", source}});
}

}  // namespace

GrpcLogRoute::GrpcLogRoute(Metrics& metrics) : metrics_(&metrics) {
  static std::once_flag installed;
  std::call_once(installed, [] { gpr_set_log_function(log_grpc_line); });
  std::lock_guard lock(route_mutex);
  route_metrics = metrics_;
}

GrpcLogRoute::~GrpcLogRoute() {
  std::lock_guard lock(route_mutex);
  if (route_metrics == metrics_) route_metrics = nullptr;
}

}  // namespace tn::server
