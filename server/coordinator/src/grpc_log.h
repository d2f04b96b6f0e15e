// gRPC's own diagnostics (gpr_log) are free text on stderr by default, which would break the
// coordinator's log of JSON lines. While a GrpcLogRoute lives they are events of that log
// instead ("grpc"), and a failed TLS handshake, which gRPC 1.51 reports through no API but this
// log, is its own event ("tls_handshake_failed") and a refusal in /metrics. Only what fails on
// the server's side counts (a plaintext client, no common TLS version): a client that refuses
// the server's certificate does so after the server has finished its part of a TLS 1.3
// handshake, and is to the server a connection that closed.
#pragma once

#include "metrics.h"

namespace tn::server {

class GrpcLogRoute {
 public:
  // gRPC's log function is one per process: the newest route counts, and once every route is
  // gone gRPC's lines are still JSON, counted nowhere.
  explicit GrpcLogRoute(Metrics& metrics);
  ~GrpcLogRoute();
  GrpcLogRoute(const GrpcLogRoute&) = delete;
  GrpcLogRoute& operator=(const GrpcLogRoute&) = delete;

 private:
  Metrics* const metrics_;
};

}  // namespace tn::server
