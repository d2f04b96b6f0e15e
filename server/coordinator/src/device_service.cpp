#include "device_service.h"

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <variant>

#include "device_metadata.h"
#include "federated/errors.h"
#include "malformed_requests.h"
#include "model_versions.h"
#include "proto/protocol.h"
#include "proto/signing.h"
#include "rpc_support.h"
#include "server/hex.h"

namespace tn::server {

namespace {

std::string device_method(const char* name) { return rpc_method(v1::DeviceService::service_full_name(), name); }

// CheckInPayload.followed_task_ids beyond these are not looked at: a device names the tasks it
// took part in, and a bound keeps a forged list from costing the coordinator a scan per id.
constexpr size_t kMostFollowedTasks = 16;

// "dev-" and 32 hex digits of the key's BLAKE2b: the same key always gets the same id, and ids
// are short, fixed-length and safe in paths and logs.
federated::DeviceId device_id_for(const std::string& public_key) {
  unsigned char digest[16];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(public_key.data()),
                     public_key.size(), nullptr, 0);
  return "dev-" + to_hex({reinterpret_cast<const char*>(digest), sizeof digest});
}

// A CheckIn held on the board: answered by the board (an assignment, the wait passed, the board
// closed) or withdrawn when the caller hangs up, whichever comes first. It is held once its
// request is verified, on the nonce ledger's thread, possibly after the caller hung up.
class HeldCheckIn final : public grpc::ServerUnaryReactor {
 public:
  HeldCheckIn(DeviceBoard& board, federated::DeviceId device, v1::CheckInResponse* response)
      : board_(board), device_(std::move(device)), response_(response) {}

  // `describe_no_work` fills the answer when no assignment came; `endings_seen` is the board's
  // endings() before the tasks were looked at.
  void hold(const nlohmann::json& metadata, std::chrono::milliseconds wait, v1::RoundTransport transport,
            uint64_t endings_seen, std::function<void(v1::NoWork&)> describe_no_work) {
    if (cancelled()) {  // nobody would receive an assignment
      Finish(grpc::Status::CANCELLED);
      return;
    }
    const uint64_t ticket = board_.hold(
        device_, metadata, wait,
        [this, endings_seen,
         describe_no_work = std::move(describe_no_work)](std::optional<v1::Assignment> assignment) {
          if (assignment) {
            *response_->mutable_assignment() = std::move(*assignment);
          } else {
            v1::NoWork& no_work = *response_->mutable_no_work();
            no_work.set_retry_after_ms(0);  // the long poll has done the waiting
            no_work.set_work_ended_while_held(board_.endings() != endings_seen);
            describe_no_work(no_work);
          }
          Finish(grpc::Status::OK);
        },
        transport, endings_seen);
    {
      std::lock_guard lock(mutex_);
      ticket_ = ticket;
    }
    if (cancelled()) withdraw(ticket);  // the caller hung up while it was being held
  }

  // Answered without being held: the device's work has already ended.
  void answer_without_work(v1::NoWork no_work) {
    *response_->mutable_no_work() = std::move(no_work);
    Finish(grpc::Status::OK);
  }

  // An assignment given to a caller that hung up would be lost; withdrawn in time, the device's
  // next CheckIn is answered instead.
  void OnCancel() override {
    uint64_t ticket = 0;
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
      ticket = ticket_;
    }
    if (ticket != 0) withdraw(ticket);
  }

  // gRPC is done with it once it has finished, but the thread that held it may still be in
  // hold() (the board can answer at once): the last of the two deletes it.
  void OnDone() override { release(); }
  void release() {
    if (references_.fetch_sub(1) == 1) delete this;
  }

 private:
  bool cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }
  void withdraw(uint64_t ticket) {
    if (board_.withdraw(device_, ticket)) Finish(grpc::Status::CANCELLED);
  }

  DeviceBoard& board_;
  const federated::DeviceId device_;
  v1::CheckInResponse* const response_;
  std::atomic<int> references_ = 2;  // gRPC's, until OnDone, and the verification's
  std::mutex mutex_;
  uint64_t ticket_ = 0;
  bool cancelled_ = false;
};

}  // namespace

DeviceServiceImpl::DeviceServiceImpl(Services services, const RequestVerifier& verifier)
    : services_(services), verifier_(verifier) {
  MarkMethodStreamed(method_index(v1::DeviceService::service_full_name(), "SubmitUpdate"),
                     byte_stream_handler(this, &DeviceServiceImpl::SubmitUpdateFromBytes));
}

grpc::ServerUnaryReactor* DeviceServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  const std::string name = device_method("Register");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto payload = std::make_shared<v1::RegisterPayload>();
  grpc::Status checked = serve(name, [&] {
    if (grpc::Status parsed = parse_payload(request->payload(), *payload); !parsed.ok()) return parsed;
    if (payload->public_key().size() != proto::kPublicKeyBytes)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "public_key is " + std::to_string(payload->public_key().size()) +
                              " bytes; an Ed25519 public key is " + std::to_string(proto::kPublicKeyBytes));
    return grpc::Status::OK;
  });
  if (!checked.ok()) {
    reactor->Finish(checked);
    return reactor;
  }
  // Registration is rare (once per key) and its store write is short: it runs on the ledger's
  // thread rather than hold a server thread for the nonce's sync.
  verifier_.registration(name, request->auth(), request->payload(), payload->public_key(),
                         [this, name, reactor, payload, response](grpc::Status verified) {
                           reactor->Finish(!verified.ok() ? verified : serve(name, [&] {
                             return complete_registration(*payload, *response);
                           }));
                         });
  return reactor;
}

grpc::Status DeviceServiceImpl::complete_registration(const v1::RegisterPayload& payload,
                                                      v1::RegisterResponse& response) {
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
  response.set_device_id(id);
  response.set_check_in_wait_bound_ms(uint32_t(services_.config.check_in_wait_bound.count()));
  response.set_heartbeat_interval_ms(uint32_t(services_.config.heartbeat_interval.count()));
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* DeviceServiceImpl::CheckIn(grpc::CallbackServerContext*,
                                                     const v1::CheckInRequest* request,
                                                     v1::CheckInResponse* response) {
  const std::string name = device_method("CheckIn");
  auto* held = new HeldCheckIn(services_.board, request->auth().key_id(), response);
  verifier_.device(
      name, request->auth(), request->payload(), [this, name, held, request](grpc::Status verified) {
        const grpc::Status status = !verified.ok() ? verified : serve(name, [&] {
          v1::CheckInPayload payload;
          if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok()) return parsed;
          if (grpc::Status version = proto::check_protocol_version(payload.protocol_version()); !version.ok())
            return version;
          if (!v1::RoundTransport_IsValid(payload.round_transport()))
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "round_transport " + std::to_string(payload.round_transport()) +
                                    " is not one this coordinator knows (data plane 0, gRPC 1)");
          const federated::DeviceId& id = request->auth().key_id();
          std::chrono::milliseconds wait = services_.config.check_in_wait_bound;
          if (payload.max_wait_ms() > 0)
            wait = std::min(wait, std::chrono::milliseconds(payload.max_wait_ms()));
          // Its last_seen is the board's (heard from by hold()), stored in batches by the coordinator.
          const nlohmann::json metadata =
              services_.state.with([&](StateStore& store) { return store.device(id)->metadata; });
          std::vector<std::string> followed(payload.followed_task_ids().begin(),
                                            payload.followed_task_ids().end());
          followed.resize(std::min(followed.size(), kMostFollowedTasks));
          // Read before the tasks are looked at, so that a task ending from here on answers the hold.
          const uint64_t endings = services_.board.endings();
          if (std::optional<v1::NoWork> ended = work_already_ended(followed, payload.saw_running_task())) {
            held->answer_without_work(std::move(*ended));
            return grpc::Status::OK;
          }
          held->hold(metadata, wait, payload.round_transport(), endings,
                     [this, followed = std::move(followed)](v1::NoWork& no_work) {
                       describe_no_work(followed, no_work);
                     });
          return grpc::Status::OK;
        });
        if (!status.ok()) held->Finish(status);  // refused before it was held
        held->release();
      });
  return held;
}

void DeviceServiceImpl::describe_no_work(const std::vector<std::string>& followed, v1::NoWork& no_work) {
  const std::vector<TaskRecord> tasks =
      services_.state.with([](StateStore& store) { return store.list_tasks(); });
  uint32_t running = 0;
  for (const TaskRecord& task : tasks) {
    if (task.state == TaskState::Running) {
      ++running;
    } else if (std::ranges::find(followed, task.definition.id) != followed.end()) {
      v1::EndedTask& ended = *no_work.add_ended_tasks();
      ended.set_task_id(task.definition.id);
      ended.set_state(task_state_name(task.state));
      ended.set_reason(task.state_reason);
    }
  }
  no_work.set_running_tasks(running);
}

std::optional<v1::NoWork> DeviceServiceImpl::work_already_ended(const std::vector<std::string>& followed,
                                                                bool saw_running_task) {
  // A device new to the work costs no look at the tasks.
  if (followed.empty() && !saw_running_task) return std::nullopt;
  v1::NoWork no_work;
  describe_no_work(followed, no_work);
  if (no_work.running_tasks() > 0 || (no_work.ended_tasks().empty() && !saw_running_task))
    return std::nullopt;
  return no_work;
}

template <typename Payload, typename Request, typename Response>
grpc::ServerUnaryReactor* DeviceServiceImpl::answer_once_verified(
    grpc::CallbackServerContext* context, const char* method_name, const Request* request, Response* response,
    grpc::Status (DeviceServiceImpl::*answer)(const Request&, const Payload&, Response&)) {
  const std::string name = device_method(method_name);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  verifier_.device(name, request->auth(), request->payload(),
                   [this, name, reactor, request, response, answer](grpc::Status verified) {
                     reactor->Finish(!verified.ok() ? verified : serve(name, [&] {
                       Payload payload;
                       if (grpc::Status parsed = parse_payload(request->payload(), payload); !parsed.ok())
                         return parsed;
                       return (this->*answer)(*request, payload, *response);
                     }));
                   });
  return reactor;
}

grpc::ServerUnaryReactor* DeviceServiceImpl::FetchTask(grpc::CallbackServerContext* context,
                                                       const v1::FetchTaskRequest* request,
                                                       v1::FetchTaskResponse* response) {
  return answer_once_verified(context, "FetchTask", request, response, &DeviceServiceImpl::answer_fetch_task);
}

grpc::Status DeviceServiceImpl::answer_fetch_task(const v1::FetchTaskRequest& request,
                                                  const v1::FetchTaskPayload& payload,
                                                  v1::FetchTaskResponse& response) {
  const federated::DeviceId& id = request.auth().key_id();
  services_.board.heard_from(id);
  std::optional<v1::RoundConfig> round =
      services_.board.round_config(id, payload.task_id(), payload.round_id());
  if (!round)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "device " + id + " has no assignment in round " + std::to_string(payload.round_id()) +
                            " of task '" + payload.task_id().substr(0, 300) +
                            "': it was not selected, or the round has closed");
  *response.mutable_round() = std::move(*round);
  return grpc::Status::OK;
}

grpc::Status DeviceServiceImpl::FetchModel(grpc::ServerContext*, const v1::FetchModelRequest* request,
                                           grpc::ServerWriter<v1::ModelStream>* writer) {
  const std::string name = device_method("FetchModel");
  return serve(name, [&] {
    v1::FetchModelPayload payload;
    if (grpc::Status admitted = verifier_.device_payload(name, request->auth(), request->payload(), payload);
        !admitted.ok())
      return admitted;
    // A running round's model, shared with the round (its gRPC devices fetch it at once); any
    // other version from the state store.
    if (std::optional<federated::Model> model = services_.inboxes.find_model(payload.model_version()))
      return stream_model(std::move(*model), payload.model_version(), services_.config.transfer_limits,
                          writer);
    return stream_model_version(services_.state, payload.model_version(), "",
                                services_.config.transfer_limits, writer);
  });
}

grpc::Status DeviceServiceImpl::SubmitUpdateFromBytes(grpc::ServerContext*,
                                                      grpc::ServerReader<grpc::ByteBuffer>* reader,
                                                      v1::SubmitUpdateResponse*) {
  const std::string name = device_method("SubmitUpdate");
  return serve(name, [&] {
    ClientStream<v1::SubmitUpdateRequest> stream(*reader, services_.metrics, name);
    v1::SubmitUpdateRequest first;
    if (!stream.read(first) || !first.has_signed_header())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "SubmitUpdate must open with its signed_header");
    const v1::SignedPayload& signed_header = first.signed_header();
    v1::SubmitUpdateHeader header;
    if (grpc::Status admitted =
            verifier_.device_payload(name, signed_header.auth(), signed_header.payload(), header);
        !admitted.ok())
      return admitted;
    const federated::DeviceId& id = signed_header.auth().key_id();
    services_.board.heard_from(id);
    const std::string round_name =
        "round " + std::to_string(header.round_id()) + " of task '" + header.task_id().substr(0, 300) + "'";
    auto refuse = [&](grpc::StatusCode code, const std::string& why) {
      return grpc::Status(code, "SubmitUpdate for " + round_name + " from device " + id + " refused: " + why);
    };
    const std::optional<v1::RoundConfig> round =
        services_.board.round_config(id, header.task_id(), header.round_id());
    if (round && round->has_secure_aggregation())
      return refuse(
          grpc::StatusCode::FAILED_PRECONDITION,
          "the round aggregates securely: its update goes masked, by SecAggStage, never in the clear");
    const std::shared_ptr<UpdateInbox> inbox = services_.inboxes.find(header.task_id(), header.round_id());
    if (!round || !inbox)
      return refuse(grpc::StatusCode::FAILED_PRECONDITION,
                    "the device was not selected for it, or it has closed (a late or replayed update)");
    if (round->has_data_plane())
      return refuse(grpc::StatusCode::FAILED_PRECONDITION,
                    "the device takes part over the round's data plane, which carries its contribution");

    if (header.model_version() != round->model_version())
      return refuse(grpc::StatusCode::FAILED_PRECONDITION,
                    "it was trained from model version '" + header.model_version().substr(0, 300) +
                        "', the round's is '" + round->model_version() + "'");
    auto begun = inbox->begin(id);
    if (auto* why = std::get_if<std::string>(&begun))
      return refuse(grpc::StatusCode::FAILED_PRECONDITION, *why);
    UpdateInbox::Submission& submission = *std::get<std::unique_ptr<UpdateInbox::Submission>>(begun);
    // Refused by what the header declares, before any chunk is read or memory set aside.
    if (auto mismatch = inbox->table_mismatch(header.update()))
      return refuse(grpc::StatusCode::INVALID_ARGUMENT, *mismatch);
    if (header.example_count() < 1 ||
        header.example_count() > uint64_t(services_.config.update_limits.max_examples))
      return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "example_count " + std::to_string(header.example_count()) + " is not in [1, " +
                        std::to_string(services_.config.update_limits.max_examples) + "]");
    if (header.update().total_bytes() > services_.config.update_limits.max_update_bytes)
      return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "the update is " + std::to_string(header.update().total_bytes()) +
                        " bytes, above the limit of " +
                        std::to_string(services_.config.update_limits.max_update_bytes));
    // The update is converted into the contribution as its chunks arrive (never held whole) and
    // refused at its first NaN or infinity, or at the end if it does not hash to its digest.
    if (!submission.admit(inbox->layout().bytes()))
      return refuse(grpc::StatusCode::DEADLINE_EXCEEDED,
                    "the round closed while the update waited for the coordinator's memory");
    std::vector<double> contribution(inbox->layout().elements());
    try {
      federated::StreamingPacker packer(inbox->layout(), id, int64_t(header.example_count()),
                                        services_.config.update_limits, contribution);
      proto::ModelAssembler assembler(
          services_.config.transfer_limits,
          [&packer](size_t tensor, uint64_t offset, std::span<const std::byte> bytes) {
            packer.add(tensor, offset, bytes);
          });
      assembler.accept_header(header.update());
      v1::SubmitUpdateRequest message;
      while (stream.read(message)) {
        if (!message.has_chunk())
          return refuse(grpc::StatusCode::INVALID_ARGUMENT,
                        "after the signed header only update chunks may follow");
        assembler.accept_chunk(message.chunk());
      }
      assembler.finish_streamed();
      packer.finish();
    } catch (const federated::UpdateRefused& error) {
      services_.metrics.count_refusal("contribution_refused");
      services_.events.publish(v1::EVENT_KIND_UPDATE_REFUSED, header.task_id(), header.round_id(), id,
                               error.what(), {{"transport", "grpc"}});
      return refuse(grpc::StatusCode::INVALID_ARGUMENT, error.what());
    }
    if (auto why = submission.deliver(contribution))
      return refuse(grpc::StatusCode::FAILED_PRECONDITION, *why);
    services_.events.publish(
        v1::EVENT_KIND_UPDATE_RECEIVED, header.task_id(), header.round_id(), id,
        "over gRPC, " + std::to_string(header.example_count()) + " examples",
        {{"transport", "grpc"},
         {"examples", header.example_count()},
         {"metrics", std::map<std::string, double>(header.metrics().begin(), header.metrics().end())}});
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* DeviceServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return answer_once_verified(context, "Heartbeat", request, response, &DeviceServiceImpl::answer_heartbeat);
}

grpc::ServerUnaryReactor* DeviceServiceImpl::SecAggStage(grpc::CallbackServerContext* context,
                                                         const v1::SecAggStageRequest* request,
                                                         v1::SecAggStageResponse* response) {
  const std::string name = device_method("SecAggStage");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  verifier_.device(name, request->auth(), request->payload(),
                   [this, name, reactor, request, response](grpc::Status verified) {
                     if (!verified.ok()) return reactor->Finish(verified);
                     // Answered by the exchange (held, or at once), or refused here.
                     const grpc::Status refused =
                         serve(name, [&] { return take_stage(*request, *response, reactor); });
                     if (!refused.ok()) reactor->Finish(refused);
                   });
  return reactor;
}

grpc::Status DeviceServiceImpl::take_stage(const v1::SecAggStageRequest& request,
                                           v1::SecAggStageResponse& response,
                                           grpc::ServerUnaryReactor* reactor) {
  v1::SecAggStagePayload payload;
  if (grpc::Status parsed = parse_payload(request.payload(), payload); !parsed.ok()) return parsed;
  const federated::DeviceId& id = request.auth().key_id();
  services_.board.heard_from(id);
  const std::shared_ptr<SecureExchange> exchange =
      services_.secure_exchanges.find(payload.task_id(), payload.round_id());
  if (!exchange) {
    if (payload.has_masked_input_on_data_plane())
      if (std::optional<std::string> why =
              services_.secure_exchanges.left_out_answer(payload.task_id(), payload.round_id(), id))
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, *why);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "SecAggStage from device " + id + ": no secure round " +
                            std::to_string(payload.round_id()) + " of task '" +
                            payload.task_id().substr(0, 300) + "' is running (it has closed, or never was)");
  }
  // A message the round refuses (malformed, or refused by the session: the device is then out of
  // the round) is an update refused, named in the event log as SubmitUpdate's are.
  auto finish = [this, reactor, id, task = payload.task_id(),
                 round = payload.round_id()](const grpc::Status& status) {
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      services_.metrics.count_refusal("contribution_refused");
      services_.events.publish(v1::EVENT_KIND_UPDATE_REFUSED, task, round, id, status.error_message(),
                               {{"transport", "secagg"}});
    }
    reactor->Finish(status);
  };
  exchange->take(id, payload, {&response, std::move(finish)});
  return grpc::Status::OK;
}

grpc::Status DeviceServiceImpl::answer_heartbeat(const v1::HeartbeatRequest& request,
                                                 const v1::HeartbeatPayload& payload,
                                                 v1::HeartbeatResponse& response) {
  const federated::DeviceId& id = request.auth().key_id();
  // In memory only: the heartbeats of a thousand devices would otherwise be as many more
  // database writes (ListDevices reports the later of this and the stored last_seen).
  services_.board.heard_from(id, payload.state());
  response.set_abandon_round(payload.round_id() != 0 &&
                             !services_.board.round_config(id, payload.task_id(), payload.round_id()));
  response.set_next_heartbeat_ms(uint32_t(services_.config.heartbeat_interval.count()));
  return grpc::Status::OK;
}

}  // namespace tn::server
