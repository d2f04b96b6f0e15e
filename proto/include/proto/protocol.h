// The protocol version this build speaks, and the refusal of any other.
#pragma once

#include <grpcpp/support/status.h>

#include "torchnative/federated/v1/common.pb.h"

namespace tn::proto {

inline constexpr ::torchnative::federated::v1::ProtocolVersion kProtocolVersion =
    ::torchnative::federated::v1::PROTOCOL_VERSION_1;

// OK for kProtocolVersion; otherwise FAILED_PRECONDITION naming the version received and ours.
// Takes the raw number: a newer peer may send a value this build's enum does not list.
grpc::Status check_protocol_version(int received);

}  // namespace tn::proto
