#include "device_service.h"

#include <sodium.h>

#include "device_metadata.h"
#include "malformed_requests.h"
#include "model_versions.h"
#include "proto/protocol.h"
#include "proto/signing.h"
#include "rpc_support.h"
#include "server/hex.h"

namespace tn::server {

namespace {

std::string method(const char* name) { return rpc_method(v1::DeviceService::service_full_name(), name); }

// "dev-" and 32 hex digits of the key's BLAKE2b: the same key always gets the same id, and ids
// are short, fixed-length and safe in paths and logs.
federated::DeviceId device_id_for(const std::string& public_key) {
  unsigned char digest[16];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(public_key.data()),
                     public_key.size(), nullptr, 0);
  return "dev-" + to_hex({reinterpret_cast<const char*>(digest), sizeof digest});
}

// A CheckIn held on the board: answered by the board (an assignment, the wait passed, the board
// closed) or withdrawn when the caller hangs up, whichever comes first; gRPC deletes it once done.
class HeldCheckIn final : public grpc::ServerUnaryReactor {
 public:
  HeldCheckIn(DeviceBoard& board, federated::DeviceId device, v1::CheckInResponse* response)
      : board_(board), device_(std::move(device)), response_(response) {}

  void hold(const nlohmann::json& metadata, std::chrono::milliseconds wait) {
    ticket_ = board_.hold(device_, metadata, wait, [this](std::optional<v1::Assignment> assignment) {
      if (assignment)
        *response_->mutable_assignment() = std::move(*assignment);
      else
        response_->mutable_no_work()->set_retry_after_ms(0);  // the long poll has done the waiting
      Finish(grpc::Status::OK);
    });
  }

  // An assignment given to a caller that hung up would be lost; withdrawn in time, the device's
  // next CheckIn is answered instead.
  void OnCancel() override {
    if (board_.withdraw(device_, ticket_)) Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override { delete this; }

 private:
  DeviceBoard& board_;
  const federated::DeviceId device_;
  v1::CheckInResponse* const response_;
  uint64_t ticket_ = 0;
};

}  // namespace

DeviceServiceImpl::DeviceServiceImpl(Services services, const RequestVerifier& verifier)
    : services_(services), verifier_(verifier) {
  MarkMethodStreamed(method_index(v1::DeviceService::service_full_name(), "SubmitUpdate"),
                     byte_stream_handler(this, &DeviceServiceImpl::SubmitUpdateFromBytes));
}

grpc::Status DeviceServiceImpl::Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                                         v1::RegisterResponse* response) {
  const std::string name = method("Register");
  return serve(name, [&] {
    v1::RegisterPayload payload;
    if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok()) return parsed;
    if (payload.public_key().size() != proto::kPublicKeyBytes)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "public_key is " + std::to_string(payload.public_key().size()) +
                              " bytes; an Ed25519 public key is " + std::to_string(proto::kPublicKeyBytes));
    if (grpc::Status verified =
            verifier_.registration(name, request->auth(), request->payload(), payload.public_key());
        !verified.ok())
      return verified;
    if (grpc::Status version = proto::check_protocol_version(payload.protocol_version()); !version.ok())
      return version;
    bool created = false;
    uint64_t registered = 0;
    const federated::DeviceId id = services_.state.with([&](StateStore& store) {
      std::optional<Device> known = store.find_device_by_key(payload.public_key());
      if (!known) {
        known = store.register_device(device_id_for(payload.public_key()), payload.public_key(),
                                      metadata_to_json(payload.metadata()));
        created = true;
      }
      registered = store.list_devices().size();
      return known->id;
    });
    if (created) {
      services_.metrics.set_devices_registered(registered);
      services_.events.publish(v1::EVENT_KIND_DEVICE_REGISTERED, "", 0, id, payload.metadata().platform());
    }
    response->set_device_id(id);
    response->set_check_in_wait_bound_ms(uint32_t(services_.config.check_in_wait_bound.count()));
    response->set_heartbeat_interval_ms(uint32_t(services_.config.heartbeat_interval.count()));
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* DeviceServiceImpl::CheckIn(grpc::CallbackServerContext*,
                                                     const v1::CheckInRequest* request,
                                                     v1::CheckInResponse* response) {
  const std::string name = method("CheckIn");
  auto* held = new HeldCheckIn(services_.board, request->auth().key_id(), response);
  const grpc::Status status = serve(name, [&] {
    if (grpc::Status verified = verifier_.device(name, request->auth(), request->payload()); !verified.ok())
      return verified;
    v1::CheckInPayload payload;
    if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok()) return parsed;
    if (grpc::Status version = proto::check_protocol_version(payload.protocol_version()); !version.ok())
      return version;
    const federated::DeviceId& id = request->auth().key_id();
    std::chrono::milliseconds wait = services_.config.check_in_wait_bound;
    if (payload.max_wait_ms() > 0) wait = std::min(wait, std::chrono::milliseconds(payload.max_wait_ms()));
    // Its last_seen is the board's (heard from by hold()), stored in batches by the coordinator.
    const nlohmann::json metadata =
        services_.state.with([&](StateStore& store) { return store.device(id)->metadata; });
    held->hold(metadata, wait);
    return grpc::Status::OK;
  });
  if (!status.ok()) held->Finish(status);  // refused before it was held
  return held;
}

grpc::Status DeviceServiceImpl::FetchTask(grpc::ServerContext*, const v1::FetchTaskRequest* request,
                                          v1::FetchTaskResponse* response) {
  const std::string name = method("FetchTask");
  return serve(name, [&] {
    if (grpc::Status verified = verifier_.device(name, request->auth(), request->payload()); !verified.ok())
      return verified;
    v1::FetchTaskPayload payload;
    if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok()) return parsed;
    const federated::DeviceId& id = request->auth().key_id();
    services_.board.heard_from(id);
    std::optional<v1::RoundConfig> round =
        services_.board.round_config(id, payload.task_id(), payload.round_id());
    if (!round)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "device " + id + " has no assignment in round " +
                              std::to_string(payload.round_id()) + " of task '" +
                              payload.task_id().substr(0, 300) +
                              "': it was not selected, or the round has closed");
    *response->mutable_round() = std::move(*round);
    return grpc::Status::OK;
  });
}

grpc::Status DeviceServiceImpl::FetchModel(grpc::ServerContext*, const v1::FetchModelRequest* request,
                                           grpc::ServerWriter<v1::ModelStream>* writer) {
  const std::string name = method("FetchModel");
  return serve(name, [&] {
    if (grpc::Status verified = verifier_.device(name, request->auth(), request->payload()); !verified.ok())
      return verified;
    v1::FetchModelPayload payload;
    if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok()) return parsed;
    return stream_model_version(services_.state, payload.model_version(), "",
                                services_.config.transfer_limits, writer);
  });
}

grpc::Status DeviceServiceImpl::SubmitUpdateFromBytes(grpc::ServerContext*,
                                                      grpc::ServerReader<grpc::ByteBuffer>* reader,
                                                      v1::SubmitUpdateResponse*) {
  const std::string name = method("SubmitUpdate");
  return serve(name, [&] {
    v1::SubmitUpdateRequest first;
    ClientStream<v1::SubmitUpdateRequest>(*reader, services_.metrics, name).read(first);
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "SubmitUpdate is not served: rounds run on the data plane (RoundConfig.data_plane), where "
        "the hub deadline-reduces each device's contribution");
  });
}

grpc::Status DeviceServiceImpl::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  const std::string name = method("Heartbeat");
  return serve(name, [&] {
    if (grpc::Status verified = verifier_.device(name, request->auth(), request->payload()); !verified.ok())
      return verified;
    v1::HeartbeatPayload payload;
    if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok()) return parsed;
    const federated::DeviceId& id = request->auth().key_id();
    // In memory only: the heartbeats of a thousand devices would otherwise be as many more
    // database writes (ListDevices reports the later of this and the stored last_seen).
    services_.board.heard_from(id, payload.state());
    response->set_abandon_round(payload.round_id() != 0 &&
                                !services_.board.round_config(id, payload.task_id(), payload.round_id()));
    response->set_next_heartbeat_ms(uint32_t(services_.config.heartbeat_interval.count()));
    return grpc::Status::OK;
  });
}

}  // namespace tn::server
