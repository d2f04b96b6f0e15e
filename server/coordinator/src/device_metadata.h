// A device's metadata as the state store keeps it (JSON) and as the protocol carries it.
#pragma once

#include <nlohmann/json.hpp>

#include "torchnative/federated/v1/device.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

// {"platform": ..., "runtime_version": ..., "memory_bytes": ..., "labels": {...}}
nlohmann::json metadata_to_json(const v1::DeviceMetadata& metadata);
// The inverse; fields missing or of the wrong type are left empty.
v1::DeviceMetadata metadata_from_json(const nlohmann::json& stored);

}  // namespace tn::server
