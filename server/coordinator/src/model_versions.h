// Model versions as the protocol names them: "<task id>/<version number>" (task ids contain no
// '/'), so that a name alone says which task's file to read.
#pragma once

#include <grpcpp/support/sync_stream.h>

#include <cstdint>
#include <string>

#include "guarded_state.h"
#include "proto/model_transfer.h"
#include "torchnative/federated/v1/tensor.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

std::string model_version_name(const std::string& task_id, uint64_t version);

// Stored version `name`. Refuses (InvalidArgument) a malformed name and (NotFound) an unknown
// version; the store refuses (CorruptFile) a file that is not as recorded.
federated::Model load_model_version(GuardedState& state, const std::string& name);

// Refuses (Conflict) a model whose header digest differs from `expected`, unless that is empty.
void check_digest(const v1::ModelHeader& header, const std::string& expected);

// Streams `model` as version `name`, its header then its chunks, refusing what check_digest
// refuses. CANCELLED when the caller stops reading.
grpc::Status stream_model(federated::Model model, const std::string& name,
                          const proto::TransferLimits& limits, grpc::ServerWriter<v1::ModelStream>* writer,
                          const std::string& expected_digest = "");

// Streams stored version `name`, its header then its chunks, refusing what load_model_version
// and check_digest refuse. CANCELLED when the caller stops reading.
grpc::Status stream_model_version(GuardedState& state, const std::string& name,
                                  const std::string& expected_digest, const proto::TransferLimits& limits,
                                  grpc::ServerWriter<v1::ModelStream>* writer);

}  // namespace tn::server
