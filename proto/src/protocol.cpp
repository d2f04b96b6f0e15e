#include "proto/protocol.h"

#include <string>

namespace tn::proto {

grpc::Status check_protocol_version(int received) {
  if (received == kProtocolVersion) return grpc::Status::OK;
  const std::string ours = "this server speaks torchnative.federated.v1 protocol version " +
                           std::to_string(static_cast<int>(kProtocolVersion));
  if (received == ::torchnative::federated::v1::PROTOCOL_VERSION_UNSPECIFIED) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "protocol version refused: the request does not state one; " + ours);
  }
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "protocol version " + std::to_string(received) + " refused: " + ours);
}

}  // namespace tn::proto
