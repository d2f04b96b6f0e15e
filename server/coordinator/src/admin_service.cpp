#include "admin_service.h"

#include <algorithm>
#include <chrono>

#include "device_metadata.h"
#include "malformed_requests.h"
#include "model_versions.h"
#include "proto/model_transfer.h"
#include "round_params.h"
#include "rpc_support.h"

namespace tn::server {

namespace {

std::string method(const char* name) { return rpc_method(v1::AdminService::service_full_name(), name); }

// The stored round's state, with the task loop's phase over it (an open round whose updates are
// being aggregated).
v1::RoundState round_state(const RoundRecord& round, const TaskRunner::Phase& phase) {
  switch (round.state) {
    case RoundState::Open:
      return phase.state == v1::ROUND_STATE_AGGREGATING && phase.round_id == round.round_number
                 ? v1::ROUND_STATE_AGGREGATING
                 : v1::ROUND_STATE_TRAINING;
    case RoundState::Completed:
      return v1::ROUND_STATE_COMPLETED;
    case RoundState::Abandoned:
      return round.interrupted ? v1::ROUND_STATE_INTERRUPTED : v1::ROUND_STATE_FAILED;
  }
  return v1::ROUND_STATE_UNSPECIFIED;
}

v1::TaskState task_state(TaskState state) {
  switch (state) {
    case TaskState::Running:
      return v1::TASK_STATE_RUNNING;
    case TaskState::Stopped:
      return v1::TASK_STATE_STOPPED;
    case TaskState::Failed:
      return v1::TASK_STATE_FAILED;
    case TaskState::Completed:
      return v1::TASK_STATE_COMPLETED;
  }
  return v1::TASK_STATE_UNSPECIFIED;
}

void fill_round_info(const RoundRecord& round, const TaskRunner::Phase& phase, v1::RoundInfo& info) {
  info.set_task_id(round.task_id);
  info.set_round_id(round.round_number);
  info.set_state(round_state(round, phase));
  info.set_input_model_version(model_version_name(round.task_id, round.model_version_in));
  if (round.model_version_out)
    info.set_output_model_version(model_version_name(round.task_id, *round.model_version_out));
  for (const auto& id : round.selected) info.add_selected_devices(id);
  for (const auto& id : round.contributors) info.add_contributors(id);
  for (const auto& id : round.missing) info.add_missing(id);
  info.set_started_unix_ms(uint64_t(round.started_at_ms));
  if (round.closed_at_ms) info.set_closed_unix_ms(uint64_t(*round.closed_at_ms));
}

// Where the task stands, from its record, its rounds (by number) and its loop's phase.
void fill_task_info(const TaskRecord& task, const std::vector<RoundRecord>& rounds,
                    const TaskRunner::Phase& phase, v1::TaskInfo& info) {
  const std::string& id = task.definition.id;
  info.set_task_id(id);
  info.set_strategy(task.definition.strategy);
  info.set_state(task_state(task.state));
  info.set_state_reason(task.state_reason);
  info.set_rounds_planned(task.definition.rounds_planned);
  // Read alone, so that a task whose other stored parameters no longer read back is still listed.
  info.set_devices_per_round(task.definition.round_params.value("devices_per_round", 0u));
  info.set_created_unix_ms(uint64_t(task.created_at_ms));
  uint64_t completed = 0, completed_ms = 0;
  for (const RoundRecord& round : rounds)
    if (round.state == RoundState::Completed) {
      ++completed;
      completed_ms += uint64_t(*round.closed_at_ms - round.started_at_ms);
    }
  info.set_rounds_completed(completed);
  info.set_latest_model_version(model_version_name(id, completed));
  if (completed) info.set_mean_completed_round_ms(completed_ms / completed);
  // Each completed round released one noised aggregate: the accountant's charge for them.
  if (const std::optional<CentralDpParams> dp = RoundParams::charged_dp_of(task.definition.round_params))
    *info.mutable_privacy() = dp->spent(completed);
  if (task.state == TaskState::Running && phase.state == v1::ROUND_STATE_WAITING_FOR_DEVICES) {
    // The round waited for is not recorded until it starts.
    v1::RoundInfo& waiting = *info.mutable_current_round();
    waiting.set_task_id(id);
    waiting.set_round_id(phase.round_id);
    waiting.set_state(phase.state);
    waiting.set_input_model_version(info.latest_model_version());
    waiting.set_started_unix_ms(uint64_t(phase.since_unix_ms));
  } else if (!rounds.empty()) {
    fill_round_info(rounds.back(), phase, *info.mutable_current_round());
  }
}

std::vector<RoundRecord> rounds_of(StateStore& store, const std::string& task_id) {
  if (!store.task(task_id)) throw NotFound("no task '" + task_id.substr(0, 300) + "'");
  return store.list_rounds(task_id);
}

}  // namespace

template <typename Payload, typename Request, typename Body>
grpc::Status AdminServiceImpl::serve_admin(const char* method_name, const Request& request, Body body) {
  const std::string name = method(method_name);
  return serve(name, [&] {
    Payload payload;
    if (grpc::Status admitted = verifier_.admin_payload(name, request.auth(), request.payload(), payload);
        !admitted.ok())
      return admitted;
    return body(payload);
  });
}

AdminServiceImpl::AdminServiceImpl(Services services, const RequestVerifier& verifier, Tasks& tasks)
    : services_(services), verifier_(verifier), tasks_(tasks) {
  MarkMethodStreamed(method_index(v1::AdminService::service_full_name(), "CreateTask"),
                     byte_stream_handler(this, &AdminServiceImpl::CreateTaskFromBytes));
}

grpc::Status AdminServiceImpl::CreateTaskFromBytes(grpc::ServerContext*,
                                                   grpc::ServerReader<grpc::ByteBuffer>* reader,
                                                   v1::CreateTaskResponse* response) {
  const std::string name = method("CreateTask");
  return serve(name, [&] {
    ClientStream<v1::CreateTaskRequest> stream(*reader, services_.metrics, name);
    v1::CreateTaskRequest first;
    if (!stream.read(first) || !first.has_signed_header())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "CreateTask must open with its signed_header");
    const v1::SignedPayload& signed_header = first.signed_header();
    v1::CreateTaskHeader header;
    if (grpc::Status admitted =
            verifier_.admin_payload(name, signed_header.auth(), signed_header.payload(), header);
        !admitted.ok())
      return admitted;
    tasks_.check(header);
    const proto::TransferLimits& limits = services_.config.transfer_limits;
    federated::Model model;
    if (header.has_streamed_model()) {
      proto::ModelAssembler assembler(limits);
      assembler.accept_header(header.streamed_model());
      v1::CreateTaskRequest message;
      while (stream.read(message)) {
        if (!message.has_chunk())
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "CreateTask: after the signed header only model chunks may follow");
        assembler.accept_chunk(message.chunk());
      }
      model = assembler.finish();
    } else if (header.has_stored_model()) {
      const std::string& version = header.stored_model().model_version();
      model = load_model_version(services_.state, version);
      check_digest(proto::ModelChunker(model, version, limits).header(), header.stored_model().blake2b_256());
    } else {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "CreateTask: the header names no initial model (streamed_model or stored_model)");
    }
    const std::string task_id = tasks_.create(header, std::move(model));
    response->set_task_id(task_id);
    response->set_initial_model_version(model_version_name(task_id, 0));
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::StopTask(grpc::ServerContext*, const v1::StopTaskRequest* request,
                                        v1::StopTaskResponse*) {
  return serve_admin<v1::StopTaskPayload>("StopTask", *request, [&](const auto& payload) {
    tasks_.stop(payload.task_id(), payload.reason());
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest* request,
                                           v1::ListDevicesResponse* response) {
  return serve_admin<v1::ListDevicesPayload>("ListDevices", *request, [&](const auto&) {
    for (const Device& device :
         services_.state.with([](StateStore& store) { return store.list_devices(); })) {
      v1::DeviceInfo& info = *response->add_devices();
      info.set_device_id(device.id);
      info.set_public_key(device.public_key);
      *info.mutable_metadata() = metadata_from_json(device.metadata);
      info.set_registered_unix_ms(uint64_t(device.registered_at_ms));
      const DeviceBoard::Presence presence = services_.board.presence(device.id);
      int64_t last_seen_ms = device.last_seen_ms;
      if (presence.last_heard)
        last_seen_ms = std::max<int64_t>(last_seen_ms, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                           presence.last_heard->time_since_epoch())
                                                           .count());
      info.set_last_seen_unix_ms(uint64_t(last_seen_ms));
      info.set_last_state(presence.last_state);
      info.set_alive(presence.alive);
    }
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::ListRounds(grpc::ServerContext*, const v1::ListRoundsRequest* request,
                                          v1::ListRoundsResponse* response) {
  return serve_admin<v1::ListRoundsPayload>("ListRounds", *request, [&](const auto& payload) {
    const TaskRunner::Phase phase = tasks_.phase(payload.task_id());
    for (const RoundRecord& round :
         services_.state.with([&](StateStore& store) { return rounds_of(store, payload.task_id()); }))
      fill_round_info(round, phase, *response->add_rounds());
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::ListTasks(grpc::ServerContext*, const v1::ListTasksRequest* request,
                                         v1::ListTasksResponse* response) {
  return serve_admin<v1::ListTasksPayload>("ListTasks", *request, [&](const auto&) {
    std::vector<std::pair<TaskRecord, std::vector<RoundRecord>>> listed;
    services_.state.with([&](StateStore& store) {
      for (TaskRecord& task : store.list_tasks()) {
        std::vector<RoundRecord> rounds = store.list_rounds(task.definition.id);
        listed.emplace_back(std::move(task), std::move(rounds));
      }
    });
    // Outside the state's lock: Tasks takes its own lock before the state's.
    for (const auto& [task, rounds] : listed)
      fill_task_info(task, rounds, tasks_.phase(task.definition.id), *response->add_tasks());
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::GetTask(grpc::ServerContext*, const v1::GetTaskRequest* request,
                                       v1::GetTaskResponse* response) {
  return serve_admin<v1::GetTaskPayload>("GetTask", *request, [&](const auto& payload) {
    const TaskRunner::Phase phase = tasks_.phase(payload.task_id());
    services_.state.with([&](StateStore& store) {
      std::vector<RoundRecord> rounds = rounds_of(store, payload.task_id());
      fill_task_info(*store.task(payload.task_id()), rounds, phase, *response->mutable_task());
      for (const RoundRecord& round : rounds) fill_round_info(round, phase, *response->add_rounds());
    });
    return grpc::Status::OK;
  });
}

grpc::Status AdminServiceImpl::FetchModelVersion(grpc::ServerContext*,
                                                 const v1::FetchModelVersionRequest* request,
                                                 grpc::ServerWriter<v1::ModelStream>* writer) {
  return serve_admin<v1::FetchModelVersionPayload>("FetchModelVersion", *request, [&](const auto& payload) {
    return stream_model_version(services_.state, payload.model_version(), payload.blake2b_256(),
                                services_.config.transfer_limits, writer);
  });
}

grpc::Status AdminServiceImpl::StreamEvents(grpc::ServerContext* context,
                                            const v1::StreamEventsRequest* request,
                                            grpc::ServerWriter<v1::Event>* writer) {
  return serve_admin<v1::StreamEventsPayload>("StreamEvents", *request, [&](const auto& payload) {
    uint64_t cursor = payload.has_after_sequence() ? payload.after_sequence() : services_.events.latest();
    while (!context->IsCancelled() && !services_.events.closed())
      for (const v1::Event& event :
           services_.events.follow(cursor, payload.task_id(), std::chrono::milliseconds(500)))
        if (!writer->Write(event)) return grpc::Status::OK;
    return grpc::Status::OK;
  });
}

}  // namespace tn::server
