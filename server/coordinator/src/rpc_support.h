// What every gRPC handler of the coordinator shares: method paths as signatures cover them,
// payload parsing, and turning any exception into a status so that bad input never takes the
// daemon down.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

namespace tn::server {

// "/torchnative.federated.v1.DeviceService/CheckIn" for (service_full_name(), "CheckIn").
std::string rpc_method(std::string_view service, std::string_view name);

// OK when `bytes` parse as `message`; INVALID_ARGUMENT naming its type otherwise.
grpc::Status parse_payload(const std::string& bytes, google::protobuf::Message& message);

// The status for the exception being handled: a MalformedRequest is its refusal; the state
// store's and the federated library's refusals map to INVALID_ARGUMENT, NOT_FOUND or FAILED_PRECONDITION with
// their message; anything unforeseen is INTERNAL and logged.
grpc::Status status_from_current_exception(std::string_view method);

template <typename Body>
grpc::Status serve(std::string_view method, Body&& body) {
  try {
    return body();
  } catch (...) {
    return status_from_current_exception(method);
  }
}

}  // namespace tn::server
