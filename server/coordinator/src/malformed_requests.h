// Requests whose message does not parse as their method's request type. gRPC's generated code
// refuses them before any handler runs, with an empty message and a code that depends on how the
// method is served (INTERNAL from a synchronous one, UNIMPLEMENTED from a callback one); this
// interceptor notices the failed parse and answers INVALID_ARGUMENT naming the method and the
// type instead, counting the refusal ("malformed_request"). One interceptor object per call, on
// the thread serving it: no thread of its own.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include "metrics.h"

namespace tn::server {

class MalformedRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MalformedRequestInterceptorFactory(Metrics& metrics) : metrics_(metrics) {}

  // Null for methods whose requests stream in (their handlers see a message that does not parse
  // as a failed read, and refuse by name what they lack).
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics& metrics_;
};

}  // namespace tn::server
