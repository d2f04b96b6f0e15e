#include "model_versions.h"

#include <charconv>

#include "server/hex.h"

namespace tn::server {

std::string model_version_name(const std::string& task_id, uint64_t version) {
  return task_id + "/" + std::to_string(version);
}

federated::Model load_model_version(GuardedState& state, const std::string& name) {
  const size_t slash = name.rfind('/');
  uint64_t version = 0;
  const char* number_end = name.data() + name.size();
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
      std::from_chars(name.data() + slash + 1, number_end, version).ptr != number_end)
    throw InvalidArgument("model version '" + name.substr(0, 300) + "' is not '<task id>/<version number>'");
  return state.with([&](StateStore& store) { return store.load_model(name.substr(0, slash), version); });
}

void check_digest(const v1::ModelHeader& header, const std::string& expected) {
  if (!expected.empty() && header.blake2b_256() != expected)
    throw Conflict("model version '" + header.model_version() + "' has digest " +
                   to_hex(header.blake2b_256()) + ", not the " + to_hex(expected) + " asked for");
}

grpc::Status stream_model(federated::Model model, const std::string& name,
                          const proto::TransferLimits& limits, grpc::ServerWriter<v1::ModelStream>* writer,
                          const std::string& expected_digest) {
  proto::ModelChunker chunker(std::move(model), name, limits);
  check_digest(chunker.header(), expected_digest);
  v1::ModelStream message;
  while (chunker.next(message))
    if (!writer->Write(message)) return {grpc::StatusCode::CANCELLED, "the caller stopped reading"};
  return grpc::Status::OK;
}

grpc::Status stream_model_version(GuardedState& state, const std::string& name,
                                  const std::string& expected_digest, const proto::TransferLimits& limits,
                                  grpc::ServerWriter<v1::ModelStream>* writer) {
  return stream_model(load_model_version(state, name), name, limits, writer, expected_digest);
}

}  // namespace tn::server
