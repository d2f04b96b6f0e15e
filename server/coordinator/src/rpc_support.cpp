#include "rpc_support.h"

#include "federated/errors.h"
#include "json_log.h"
#include "malformed_requests.h"
#include "proto/model_transfer.h"
#include "server/state_errors.h"

namespace tn::server {

std::string rpc_method(std::string_view service, std::string_view name) {
  return "/" + std::string(service) + "/" + std::string(name);
}

grpc::Status parse_payload(const std::string& bytes, google::protobuf::Message& message) {
  if (message.ParseFromString(bytes)) return grpc::Status::OK;
  return {grpc::StatusCode::INVALID_ARGUMENT, "the payload is not a valid serialized " +
                                                  message.GetTypeName() + " (" +
                                                  std::to_string(bytes.size()) + " bytes)"};
}

grpc::Status status_from_current_exception(std::string_view method) {
  try {
    throw;
  } catch (const MalformedRequest& error) {
    return error.status();
  } catch (const server::NotFound& error) {
    return {grpc::StatusCode::NOT_FOUND, error.what()};
  } catch (const server::Conflict& error) {
    return {grpc::StatusCode::FAILED_PRECONDITION, error.what()};
  } catch (const server::InvalidArgument& error) {
    return {grpc::StatusCode::INVALID_ARGUMENT, error.what()};
  } catch (const federated::Refused& error) {
    return {grpc::StatusCode::INVALID_ARGUMENT, error.what()};
  } catch (const proto::TransferError& error) {
    return {grpc::StatusCode::INVALID_ARGUMENT, error.what()};
  } catch (const std::exception& error) {
    log_event(LogLevel::Error, "rpc_failed", {{"method", method}, {"error", error.what()}});
    return {grpc::StatusCode::INTERNAL, std::string(method) + " failed: " + error.what()};
  } catch (...) {
    log_event(LogLevel::Error, "rpc_failed", {{"method", method}, {"error", "unknown exception"}});
    return {grpc::StatusCode::INTERNAL, std::string(method) + " failed"};
  }
}

}  // namespace tn::server
