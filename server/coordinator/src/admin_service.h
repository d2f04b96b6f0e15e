// AdminService (torchnative/federated/v1/admin.proto) as the coordinator serves it. Every
// request is signed by a configured administrator key (RequestVerifier).
#pragma once

#include "request_verifier.h"
#include "services.h"
#include "tasks.h"
#include "torchnative/federated/v1/admin.grpc.pb.h"

namespace tn::server {

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  AdminServiceImpl(Services services, const RequestVerifier& verifier, Tasks& tasks);

  // CreateTask, its stream read as bytes so that a message that does not parse is refused as
  // malformed (ClientStream). The signed header is checked whole before the model stream is read.
  grpc::Status CreateTaskFromBytes(grpc::ServerContext* context, grpc::ServerReader<grpc::ByteBuffer>* reader,
                                   v1::CreateTaskResponse* response);
  grpc::Status StopTask(grpc::ServerContext* context, const v1::StopTaskRequest* request,
                        v1::StopTaskResponse* response) override;
  grpc::Status ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override;
  grpc::Status ListRounds(grpc::ServerContext* context, const v1::ListRoundsRequest* request,
                          v1::ListRoundsResponse* response) override;
  grpc::Status ListTasks(grpc::ServerContext* context, const v1::ListTasksRequest* request,
                         v1::ListTasksResponse* response) override;
  grpc::Status GetTask(grpc::ServerContext* context, const v1::GetTaskRequest* request,
                       v1::GetTaskResponse* response) override;
  grpc::Status FetchModelVersion(grpc::ServerContext* context, const v1::FetchModelVersionRequest* request,
                                 grpc::ServerWriter<v1::ModelStream>* writer) override;
  // Events from the moment of the call, or the stored ones after the sequence number the payload
  // gives and then those to come, until the caller cancels or the coordinator stops.
  grpc::Status StreamEvents(grpc::ServerContext* context, const v1::StreamEventsRequest* request,
                            grpc::ServerWriter<v1::Event>* writer) override;

 private:
  // An administrator's call: `body` runs on the request's Payload once it parses and is signed by
  // a configured administrator key; refusals, and exceptions from `body`, are its status (serve).
  template <typename Payload, typename Request, typename Body>
  grpc::Status serve_admin(const char* method_name, const Request& request, Body body);

  Services services_;
  const RequestVerifier& verifier_;
  Tasks& tasks_;
};

}  // namespace tn::server
