// DeviceService (torchnative/federated/v1/device.proto) as the coordinator serves it. Every
// request is verified first (RequestVerifier); malformed payloads are INVALID_ARGUMENT by name.
// Updates travel on the round's data plane, except those of devices that checked in with
// ROUND_TRANSPORT_GRPC, which SubmitUpdate receives into the round's UpdateInbox.
//
// The unary methods are served with gRPC's callback API: a request waiting for its nonce to be
// durable, and a CheckIn's long poll (a hold on the DeviceBoard), hold no server thread, so a
// burst of a thousand devices is not a thousand threads. Their work after verification runs on
// the nonce ledger's thread and is short (a registration's one store write is the longest). The
// two streams are synchronous: each holds a thread while it streams.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "request_verifier.h"
#include "services.h"
#include "torchnative/federated/v1/device.grpc.pb.h"

namespace tn::server {

class DeviceServiceImpl final
    : public v1::DeviceService::WithCallbackMethod_Register<v1::DeviceService::WithCallbackMethod_CheckIn<
          v1::DeviceService::WithCallbackMethod_FetchTask<v1::DeviceService::WithCallbackMethod_Heartbeat<
              v1::DeviceService::WithCallbackMethod_SecAggStage<v1::DeviceService::Service>>>>> {
 public:
  DeviceServiceImpl(Services services, const RequestVerifier& verifier);

  // Proof of possession of the key; idempotent (a key always gets the id derived from it).
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  // Held until the device is assigned a round, the wait bound passes or the caller hangs up.
  grpc::ServerUnaryReactor* CheckIn(grpc::CallbackServerContext* context, const v1::CheckInRequest* request,
                                    v1::CheckInResponse* response) override;
  // The round's configuration, with its data plane, for a device assigned to it.
  grpc::ServerUnaryReactor* FetchTask(grpc::CallbackServerContext* context,
                                      const v1::FetchTaskRequest* request,
                                      v1::FetchTaskResponse* response) override;
  grpc::Status FetchModel(grpc::ServerContext* context, const v1::FetchModelRequest* request,
                          grpc::ServerWriter<v1::ModelStream>* writer) override;
  // SubmitUpdate, its stream read as bytes (ClientStream) so that a message that does not parse
  // is refused as malformed, as in any other method. The header is checked (signature, the
  // device's assignment in a round it takes part in over gRPC, the model version, the tensor
  // table, the example count, the size) before any chunk is read; the update is then assembled,
  // packed into the round's contribution layout (refusing NaN and infinity) and delivered.
  grpc::Status SubmitUpdateFromBytes(grpc::ServerContext* context,
                                     grpc::ServerReader<grpc::ByteBuffer>* reader,
                                     v1::SubmitUpdateResponse* response);
  // The device's state is noted; abandon_round says whether the round it trains for has closed.
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  // A secure round's stage message (SecureExchange): held until the coordinator closes the stage,
  // then answered with the device's input for the next one.
  grpc::ServerUnaryReactor* SecAggStage(grpc::CallbackServerContext* context,
                                        const v1::SecAggStageRequest* request,
                                        v1::SecAggStageResponse* response) override;

 private:
  // A device call of the callback API, answered by `answer` with the request's Payload once the
  // request is verified (on the nonce ledger's thread) and its payload parses, or refused with the
  // status of the verification or the parse.
  template <typename Payload, typename Request, typename Response>
  grpc::ServerUnaryReactor* answer_once_verified(
      grpc::CallbackServerContext* context, const char* method_name, const Request* request,
      Response* response,
      grpc::Status (DeviceServiceImpl::*answer)(const Request&, const Payload&, Response&));
  // What each method does once its request is verified.
  grpc::Status complete_registration(const v1::RegisterPayload& payload, v1::RegisterResponse& response);
  grpc::Status answer_fetch_task(const v1::FetchTaskRequest& request, const v1::FetchTaskPayload& payload,
                                 v1::FetchTaskResponse& response);
  // A CheckIn answered without work: how many tasks run, and which of `followed` (the tasks the
  // device took part in) have ended, so that the device can tell its work is over.
  void describe_no_work(const std::vector<std::string>& followed, v1::NoWork& no_work);
  // The answer to a CheckIn that should not be held: no task runs and some of `followed` have
  // ended, or the device saw a task running (`saw_running_task`): it checked in after the end of
  // the work, which answered the holds then.
  std::optional<v1::NoWork> work_already_ended(const std::vector<std::string>& followed,
                                               bool saw_running_task);
  // SecAggStage once verified: handed to its round's exchange, which answers it; a refusal
  // before that is returned, for the caller to answer.
  grpc::Status take_stage(const v1::SecAggStageRequest& request, v1::SecAggStageResponse& response,
                          grpc::ServerUnaryReactor* reactor);
  grpc::Status answer_heartbeat(const v1::HeartbeatRequest& request, const v1::HeartbeatPayload& payload,
                                v1::HeartbeatResponse& response);

  Services services_;
  const RequestVerifier& verifier_;
};

}  // namespace tn::server
