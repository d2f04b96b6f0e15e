// torchnative-coordinator as a library: the federated coordinator daemon minus its process
// concerns (flags, signals). See docs/DESIGN.md, "Federated rounds".
//
// Construction opens the state directory, resumes every running task at its last committed
// round, and starts serving DeviceService and AdminService over gRPC and /healthz and /metrics
// over HTTP. shutdown() starts no further round, lets rounds in progress finish (each is bounded
// by its deadline), then stops the servers.
#pragma once

#include <cstdint>
#include <memory>

#include "server/coordinator_config.h"

namespace tn::server {

class Coordinator {
 public:
  // Throws what StateStore::open throws, and std::runtime_error naming an address that cannot
  // be listened on or a TLS file that cannot be read.
  explicit Coordinator(CoordinatorConfig config);
  ~Coordinator();  // shutdown()
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The ports actually listened on (the configuration may ask for port 0); http_port() is 0
  // when the HTTP endpoint is off.
  int grpc_port() const;
  int http_port() const;

  // Idempotent; returns once every round in progress has closed and the servers have stopped.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tn::server
