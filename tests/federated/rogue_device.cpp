// federated_rogue_device: a device that misbehaves on purpose, for tests/federated/test_round_failures.py
// and test_secure_aggregation.py (a device that dies at a given stage of a secure round).
// It sends what the real client never would (its own checks stop it), so the tests can show that
// the coordinator refuses each by name and keeps serving. One JSON object on stdout says what the
// coordinator answered.
//
//   federated_rogue_device --server HOST:PORT --key FILE MODE [ARGUMENT]
//
// `federated_rogue_device --help` lists the modes, `federated_rogue_device help MODE` what one does.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/arguments.h"
#include "client/data_plane.h"
#include "client/device.h"
#include "client/secure_stages.h"
#include "distributed/process_group.h"
#include "federated/contribution.h"
#include "proto/model_transfer.h"
#include "proto/protocol.h"
#include "proto/secure_aggregation_messages.h"
#include "proto/signing.h"
#include "server/hex.h"
#include "torchnative/federated/v1/admin.pb.h"

namespace {

namespace v1 = ::torchnative::federated::v1;
using nlohmann::json;
using Milliseconds = std::chrono::milliseconds;
using SystemClock = std::chrono::system_clock;

constexpr const char* kCheckIn = "/torchnative.federated.v1.DeviceService/CheckIn";
// Long enough for a test to start the other devices of the round.
constexpr auto kSelectionWait = std::chrono::seconds(60);

struct Options {
  std::string server, key_file, mode, argument;
  uint64_t oversized_bytes = 0;
  v1::RoundTransport secagg_transport = v1::ROUND_TRANSPORT_GRPC;
};

Options parse(tn::cli::Command& program, int argc, char** argv) {
  Options o;
  program.flag("--server", "HOST:PORT", "the coordinator's gRPC address").required().into(o.server);
  program
      .flag("--key", "FILE", "the device's key (an administrator's for garbage-chunk), created on first use")
      .required()
      .into(o.key_file);
  program
      .flag(
          "--secagg-transport", "grpc|data-plane",
          "how the secagg modes check in: data-plane takes the model from the hub's broadcast and sends the "
          "masked input into its reduce (secagg-long-input: one word too many there)")
      .choice(o.secagg_transport,
              {{"grpc", v1::ROUND_TRANSPORT_GRPC}, {"data-plane", v1::ROUND_TRANSPORT_DATA_PLANE}});
  auto mode = [&](const char* name, const char* summary) -> tn::cli::Command& {
    return program.subcommand(name, summary);
  };
  // A mode whose one argument is text, kept in o.argument.
  auto mode_of = [&](const char* name, const char* summary, const char* placeholder, const char* meaning) {
    mode(name, summary).positional(placeholder, meaning).into(o.argument);
  };
  mode_of("check-in", "registers, sends one signed CheckIn, saves the request in FILE", "FILE",
          "where the request is saved");
  mode_of("replay", "sends the request saved in FILE again, byte for byte", "FILE",
          "a request check-in saved");
  mode_of("garbage", "a call of DeviceService's METHOD whose message does not parse", "METHOD",
          "a method of DeviceService");
  mode_of("garbage-stream", "a client stream of SERVICE's METHOD whose first message does not parse",
          "SERVICE/METHOD", "a client-streaming method");
  mode_of("empty-stream", "a client stream of SERVICE's METHOD whose first message is empty (parses)",
          "SERVICE/METHOD", "a client-streaming method");
  mode("garbage-chunk",
       "a CreateTask whose header, signed by --key as an administrator key, announces a streamed model, "
       "followed by a chunk message that does not parse");
  mode("oversized", "a signed CheckIn whose payload is BYTES long")
      .positional("BYTES", "the payload's size")
      .into(o.oversized_bytes);
  mode("contribute", "takes part in the next round it is selected for and contributes POISON")
      .positional("POISON",
                  "nan (a NaN in the first tensor), short (one element too few) or long (one too many)")
      .choice(o.argument, {{"nan", "nan"}, {"short", "short"}, {"long", "long"}});
  mode(
      "secagg-quit-after",
      "takes part honestly in the next secure aggregation round it is selected for, its update every value "
      "+0.005, prints its quantised words, and kills itself (SIGKILL) once the coordinator has answered its "
      "STAGE message (with --secagg-transport data-plane, mask: once the hub's reduce took its masked input)")
      .positional("STAGE", "advertise, share, mask or sign (the consistency check)")
      .choice(o.argument,
              {{"advertise", "advertise"}, {"share", "share"}, {"mask", "mask"}, {"sign", "sign"}});
  mode("secagg-long-input",
       "takes part honestly in the next secure aggregation round it is selected for until its masked input, "
       "whose last message it sends one word too long; prints the coordinator's answer");
  mode("secagg-wide-word",
       "with --secagg-transport data-plane: takes part honestly in the next secure aggregation round it is "
       "selected for until its masked input, whose first word it sends into the hub's reduce as 2^bits (the "
       "round's modulus, below 32 bits); prints the coordinator's answer to what follows");
  mode("secagg-leave-after",
       "as secagg-quit-after, but instead of dying it leaves the round alive: it checks in again "
       "(heartbeating) "
       "until it is stopped")
      .positional("STAGE", "advertise, share, mask or sign (the consistency check)")
      .choice(o.argument,
              {{"advertise", "advertise"}, {"share", "share"}, {"mask", "mask"}, {"sign", "sign"}});
  mode(
      "submit-refusals",
      "checks in for gRPC rounds (ROUND_TRANSPORT_GRPC); in the first round it is selected for, submits "
      "updates the coordinator must refuse (another model version, another tensor table, no examples, a NaN, "
      "chunks that do not hash to the header's digest), then an honest one, then that one again, then its "
      "signed header byte for byte; in the next round it is selected for, it waits past the round's deadline "
      "and submits. Prints each answer by name.");
  o.mode = program.parse_or_exit(argc, argv);
  return o;
}

json status_json(const grpc::Status& status) {
  return {{"code", int(status.error_code())}, {"message", status.error_message()}};
}

// A channel that sends whatever size it is given: the server's limit is what is being tested.
std::shared_ptr<grpc::Channel> unlimited_channel(const std::string& server) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(-1);
  arguments.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), arguments);
}

tn::client::Device registered_device(const Options& options,
                                     v1::RoundTransport transport = v1::ROUND_TRANSPORT_DATA_PLANE) {
  tn::client::DeviceOptions device_options;
  device_options.server_address = options.server;
  device_options.key_file = options.key_file;
  device_options.metadata.set_platform("rogue");
  device_options.check_in_wait = Milliseconds(1000);
  device_options.round_transport = transport;
  return tn::client::Device(device_options);
}

v1::CheckInRequest signed_check_in(const std::string& device_id, const std::string& key_file,
                                   const std::string& payload) {
  v1::CheckInRequest request;
  request.set_payload(payload);
  *request.mutable_auth() =
      tn::proto::sign_request(kCheckIn, device_id, payload, tn::proto::SigningKey::load_or_create(key_file));
  return request;
}

grpc::Status call_check_in(const std::string& server, const v1::CheckInRequest& request) {
  auto stub = v1::DeviceService::NewStub(unlimited_channel(server));
  grpc::ClientContext context;
  context.set_deadline(SystemClock::now() + std::chrono::seconds(30));
  v1::CheckInResponse response;
  return stub->CheckIn(&context, request, &response);
}

std::string short_wait_check_in_payload() {
  v1::CheckInPayload payload;
  payload.set_protocol_version(tn::proto::kProtocolVersion);
  payload.set_max_wait_ms(1);  // answered at once, so the device is never selected
  return payload.SerializeAsString();
}

json check_in_and_save(const Options& options) {
  tn::client::Device device = registered_device(options);
  v1::CheckInRequest request =
      signed_check_in(device.device_id(), options.key_file, short_wait_check_in_payload());
  std::ofstream(options.argument, std::ios::binary) << request.SerializeAsString();
  json out = status_json(call_check_in(options.server, request));
  out["device_id"] = device.device_id();
  return out;
}

json replay(const Options& options) {
  std::ifstream in(options.argument, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  v1::CheckInRequest request;
  if (!request.ParseFromString(bytes.str()))
    throw tn::cli::UsageError("no saved CheckInRequest in " + options.argument);
  return status_json(call_check_in(options.server, request));
}

// A field tag whose varint never ends: no protobuf parser accepts it.
const std::string kGarbage(16, '\xff');

grpc::ByteBuffer byte_buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

json garbage(const Options& options) {
  grpc::ByteBuffer request = byte_buffer(kGarbage), response;
  grpc::GenericStub stub(unlimited_channel(options.server));
  grpc::ClientContext context;
  context.set_deadline(SystemClock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> finished;
  stub.UnaryCall(&context, "/torchnative.federated.v1.DeviceService/" + options.argument, grpc::StubOptions(),
                 &request, &response,
                 [&finished](grpc::Status status) { finished.set_value(std::move(status)); });
  return status_json(finished.get_future().get());
}

// A client stream that sends `messages` and is then left open (no WritesDone): what the server
// answers is its answer to the messages themselves, since the end of the stream never comes
// before the deadline.
class OpenStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  OpenStream(const std::string& server, const std::string& method, const std::vector<std::string>& messages)
      : stub_(unlimited_channel(server)) {
    for (const std::string& message : messages) messages_.push_back(byte_buffer(message));
    context_.set_deadline(SystemClock::now() + std::chrono::seconds(20));
    stub_.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
  }

  grpc::Status answer() {
    StartRead(&response_);
    write_next();
    StartCall();
    return done_.get_future().get();
  }

  void OnWriteDone(bool ok) override {
    if (ok) write_next();
  }
  void OnDone(const grpc::Status& status) override { done_.set_value(status); }

 private:
  void write_next() {
    if (next_ < messages_.size()) StartWrite(&messages_[next_++]);
  }

  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  std::vector<grpc::ByteBuffer> messages_;
  size_t next_ = 0;
  grpc::ByteBuffer response_;
  std::promise<grpc::Status> done_;
};

std::string qualified_method(const std::string& service_and_method) {
  return "/torchnative.federated.v1." + service_and_method;
}

json garbage_chunk(const Options& options) {
  // A header the coordinator accepts, so that the chunk that follows is what it refuses.
  const std::vector<float> values = {1.0f, 2.0f};
  tn::federated::Model model;
  model.tensors.push_back(
      tn::federated::copy_tensor("weight", tn::ScalarType::Float, {2}, std::as_bytes(std::span(values))));
  v1::CreateTaskHeader header;
  header.set_strategy("fedavg");
  header.set_strategy_parameters_json("{}");
  header.set_rounds(1);
  header.mutable_selection()->set_devices_per_round(1);
  header.set_min_updates(1);
  header.set_round_timeout_ms(1000);
  *header.mutable_streamed_model() = tn::proto::ModelChunker(model, "garbage-chunk").header();
  const std::string payload = header.SerializeAsString();

  const std::string method = qualified_method("AdminService/CreateTask");
  const tn::proto::SigningKey key = tn::proto::SigningKey::load_or_create(options.key_file);
  v1::CreateTaskRequest first;
  first.mutable_signed_header()->set_payload(payload);
  // An administrator's key id is its public key in hex.
  *first.mutable_signed_header()->mutable_auth() =
      tn::proto::sign_request(method, tn::server::to_hex(key.public_key()), payload, key);
  return status_json(OpenStream(options.server, method, {first.SerializeAsString(), kGarbage}).answer());
}

json oversized(const Options& options) {
  tn::client::Device device = registered_device(options);
  const std::string payload(options.oversized_bytes, 'x');
  return status_json(
      call_check_in(options.server, signed_check_in(device.device_id(), options.key_file, payload)));
}

Milliseconds until_unix_ms(uint64_t when) {
  const auto now =
      uint64_t(std::chrono::duration_cast<Milliseconds>(SystemClock::now().time_since_epoch()).count());
  return Milliseconds(std::max<int64_t>(when > now ? int64_t(when - now) : 0, 1));
}

// The broadcast bytes as the model the round's table describes, as the real client reads them.
tn::federated::Model model_from_broadcast(const v1::ModelHeader& header, const std::string& bytes) {
  tn::proto::ModelAssembler assembler;
  assembler.accept_header(header);
  const size_t chunk = tn::proto::TransferLimits{}.max_chunk_bytes;
  v1::ModelChunk message;
  for (size_t offset = 0, sequence = 0; offset < bytes.size(); offset += chunk, ++sequence) {
    message.set_sequence(sequence);
    message.set_offset(offset);
    message.set_data(bytes.substr(offset, chunk));
    assembler.accept_chunk(message);
  }
  return assembler.finish();
}

json contribute(const Options& options) {
  const std::string& poison = options.argument;
  tn::client::Device device = registered_device(options);
  json out = {{"device_id", device.device_id()}};
  std::optional<v1::Assignment> assignment;
  for (auto give_up = SystemClock::now() + kSelectionWait; !assignment && SystemClock::now() < give_up;)
    assignment = device.check_in();
  if (!assignment) throw std::runtime_error("not selected for any round");
  const v1::RoundConfig round = device.fetch_task(*assignment);
  out["round_id"] = round.round_id();
  const v1::DataPlane& plane = round.data_plane();

  tn::dist::TCPStoreOptions store_options;
  store_options.host = plane.store_host();
  store_options.port = uint16_t(plane.store_port());
  store_options.wait_for_workers = false;
  store_options.timeout = until_unix_ms(plane.join_deadline_unix_ms());
  auto store = tn::dist::make_prefix_store(plane.store_prefix(), tn::dist::make_tcp_store(store_options));
  tn::dist::ProcessGroupOptions group_options;
  group_options.topology = tn::dist::Topology::Star;
  group_options.hub = 0;
  group_options.timeout = until_unix_ms(round.deadline_unix_ms());
  tn::dist::ProcessGroup group(store, int(plane.rank()), int(plane.world_size()), group_options);
  auto model_bytes = std::make_shared<std::string>(plane.model().total_bytes(), '\0');
  group.broadcast({model_bytes->data(), tn::ScalarType::Byte, int64_t(model_bytes->size()), model_bytes}, 0)
      ->wait();
  const tn::federated::Model global = model_from_broadcast(plane.model(), *model_bytes);

  // The global model itself, from one example, is a contribution the hub would accept; the
  // poison is applied after pack(), whose checks would refuse it.
  const tn::federated::ContributionLayout layout(global.spec());
  std::vector<double> honest(layout.elements());
  layout.pack(global, 1, tn::federated::UpdateLimits{}, honest);
  if (poison == "nan") honest[0] = std::nan("");
  if (poison == "short") honest.pop_back();
  if (poison == "long") honest.push_back(1.0);
  auto contribution = std::make_shared<std::vector<double>>(std::move(honest));
  auto outcome = std::make_shared<tn::dist::DeadlineReduceResult>();
  try {
    group
        .deadline_reduce(
            {contribution->data(), tn::ScalarType::Double, int64_t(contribution->size()), contribution}, 0,
            tn::dist::ReduceOp::Sum, until_unix_ms(round.deadline_unix_ms()), outcome)
        ->wait();
    out["delivered"] = !outcome->contributors.empty();
  } catch (const tn::dist::DistError& error) {
    out["delivered"] = false;
    out["error"] = error.what();
  }
  return out;
}

constexpr const char* kFetchModel = "/torchnative.federated.v1.DeviceService/FetchModel";
constexpr const char* kSubmitUpdate = "/torchnative.federated.v1.DeviceService/SubmitUpdate";

v1::RoundConfig next_round(tn::client::Device& device) {
  std::optional<v1::Assignment> assignment;
  for (auto give_up = SystemClock::now() + kSelectionWait; !assignment && SystemClock::now() < give_up;)
    assignment = device.check_in();
  if (!assignment) throw std::runtime_error("not selected for any round");
  return device.fetch_task(*assignment);
}

tn::federated::Model fetch_model(v1::DeviceService::Stub& stub, const std::string& id,
                                 const tn::proto::SigningKey& key, const std::string& version) {
  v1::FetchModelPayload payload;
  payload.set_model_version(version);
  v1::FetchModelRequest request;
  request.set_payload(payload.SerializeAsString());
  *request.mutable_auth() = tn::proto::sign_request(kFetchModel, id, request.payload(), key);
  grpc::ClientContext context;
  context.set_deadline(SystemClock::now() + std::chrono::seconds(30));
  auto reader = stub.FetchModel(&context, request);
  tn::proto::ModelAssembler assembler;
  v1::ModelStream message;
  while (reader->Read(&message)) assembler.accept(message);
  if (grpc::Status status = reader->Finish(); !status.ok())
    throw std::runtime_error("FetchModel failed: " + status.error_message());
  return assembler.finish();
}

// One SubmitUpdate: the signed header (`first`, signed here unless already), then `chunks`.
grpc::Status submit(v1::DeviceService::Stub& stub, v1::SubmitUpdateRequest& first,
                    const std::vector<v1::ModelChunk>& chunks) {
  grpc::ClientContext context;
  context.set_deadline(SystemClock::now() + std::chrono::seconds(30));
  v1::SubmitUpdateResponse response;
  auto writer = stub.SubmitUpdate(&context, &response);
  bool writing = writer->Write(first);
  v1::SubmitUpdateRequest message;
  for (size_t i = 0; writing && i < chunks.size(); ++i) {
    *message.mutable_chunk() = chunks[i];
    writing = writer->Write(message);
  }
  if (writing) writer->WritesDone();
  return writer->Finish();
}

json submit_refusals(const Options& options) {
  tn::client::DeviceOptions device_options;
  device_options.server_address = options.server;
  device_options.key_file = options.key_file;
  device_options.metadata.set_platform("rogue");
  device_options.check_in_wait = Milliseconds(1000);
  device_options.round_transport = v1::ROUND_TRANSPORT_GRPC;
  tn::client::Device device(device_options);
  const std::string id = device.device_id();
  const tn::proto::SigningKey key = tn::proto::SigningKey::load_or_create(options.key_file);
  auto stub = v1::DeviceService::NewStub(unlimited_channel(options.server));
  json out = {{"device_id", id}};

  const v1::RoundConfig round = next_round(device);
  out["round_id"] = round.round_id();
  out["has_data_plane"] = round.has_data_plane();
  const tn::federated::Model global = fetch_model(*stub, id, key, round.model_version());
  // An update of `model` for `to`: the signed header (`change` alters it first), then the chunks.
  auto attempt = [&](const v1::RoundConfig& to, const tn::federated::Model& model,
                     const std::function<void(v1::SubmitUpdateHeader&)>& change,
                     v1::SubmitUpdateRequest* sent = nullptr) {
    tn::proto::ModelChunker chunker(model, to.model_version());
    v1::SubmitUpdateHeader header;
    header.set_task_id(to.task_id());
    header.set_round_id(to.round_id());
    header.set_model_version(to.model_version());
    header.set_example_count(1);
    *header.mutable_update() = chunker.header();
    change(header);
    std::vector<v1::ModelChunk> chunks;
    for (v1::ModelChunk chunk; chunker.next_chunk(chunk);) chunks.push_back(chunk);
    v1::SubmitUpdateRequest first;
    first.mutable_signed_header()->set_payload(header.SerializeAsString());
    *first.mutable_signed_header()->mutable_auth() =
        tn::proto::sign_request(kSubmitUpdate, id, first.signed_header().payload(), key);
    if (sent) *sent = first;
    return status_json(submit(*stub, first, chunks));
  };
  auto unchanged = [](v1::SubmitUpdateHeader&) {};
  out["other_version"] =
      attempt(round, global, [](v1::SubmitUpdateHeader& h) { h.set_model_version(h.model_version() + "0"); });
  out["other_table"] = attempt(round, global, [](v1::SubmitUpdateHeader& h) {
    v1::TensorEntry& tensor = *h.mutable_update()->mutable_tensors(0);
    int64_t elements = 1;
    for (int64_t size : tensor.shape()) elements *= size;
    tensor.mutable_shape()->Clear();  // the same bytes as a column: same size, another shape
    tensor.add_shape(elements);
    tensor.add_shape(1);
  });
  out["no_examples"] = attempt(round, global, [](v1::SubmitUpdateHeader& h) { h.set_example_count(0); });
  tn::federated::Model poisoned = global;
  {
    const tn::federated::NamedTensor& first = global.tensors.front();
    std::vector<float> values(first.nbytes / sizeof(float));
    std::memcpy(values.data(), first.data.get(), first.nbytes);
    values[0] = std::nanf("");
    poisoned.tensors.front() =
        tn::federated::copy_tensor(first.name, first.dtype, first.shape, std::as_bytes(std::span(values)));
  }
  out["nan"] = attempt(round, poisoned, unchanged);
  out["digest"] = attempt(round, global, [](v1::SubmitUpdateHeader& h) {
    h.mutable_update()->set_blake2b_256(std::string(32, 'x'));
  });
  v1::SubmitUpdateRequest honest_first;
  out["honest"] = attempt(round, global, unchanged, &honest_first);
  out["again"] = attempt(round, global, unchanged);
  out["replayed_header"] = status_json(submit(*stub, honest_first, {}));

  const v1::RoundConfig later = next_round(device);
  out["late_round_id"] = later.round_id();
  std::this_thread::sleep_until(SystemClock::time_point(Milliseconds(later.deadline_unix_ms())) +
                                Milliseconds(1500));
  out["late"] = attempt(later, global, unchanged);
  return out;
}

constexpr const char* kSecAggStage = "/torchnative.federated.v1.DeviceService/SecAggStage";

// `global` with every float32 value moved by +0.005, on one example.
tn::client::TrainResult shifted(const tn::federated::Model& global) {
  tn::client::TrainResult trained{global, 1, {}};
  for (tn::federated::NamedTensor& tensor : trained.model.tensors) {
    if (tensor.dtype != tn::ScalarType::Float) continue;
    std::vector<float> values(tensor.nbytes / sizeof(float));
    std::memcpy(values.data(), tensor.data.get(), tensor.nbytes);
    for (float& value : values) value += 0.005f;
    tensor =
        tn::federated::copy_tensor(tensor.name, tensor.dtype, tensor.shape, std::as_bytes(std::span(values)));
  }
  return trained;
}

const char* stage_name(const v1::SecAggStagePayload& payload) {
  switch (payload.message_case()) {
    case v1::SecAggStagePayload::kAdvertisement:
      return "advertise";
    case v1::SecAggStagePayload::kShares:
      return "share";
    case v1::SecAggStagePayload::kMaskedInput:
    case v1::SecAggStagePayload::kMaskedInputOnDataPlane:
      return "mask";
    case v1::SecAggStagePayload::kSurvivorsSignature:
      return "sign";
    default:
      return "unmask";
  }
}

// Thrown to leave a round alive (secagg-leave-after), and for a call the coordinator refused.
struct LeftTheRound {};
struct Refused {
  json status;
};

// Its words go out on stdout before the stages, since it does not live to the end. Mode
// secagg-quit-after: SIGKILL after the stage; secagg-leave-after: it leaves the round and checks in
// again until it is stopped; secagg-long-input: its last masked input message carries one word too
// many, and the refusal is its answer.
json secagg_rogue(const Options& options) {
  tn::client::Device device = registered_device(options, options.secagg_transport);
  const std::string id = device.device_id();
  const tn::proto::SigningKey key = tn::proto::SigningKey::load_or_create(options.key_file);
  auto stub = v1::DeviceService::NewStub(unlimited_channel(options.server));
  const v1::RoundConfig round = next_round(device);
  if (!round.has_secure_aggregation())
    throw std::runtime_error("round " + std::to_string(round.round_id()) +
                             " is not a secure aggregation round");
  std::unique_ptr<tn::dist::ProcessGroup> plane;
  tn::client::MaskedInputDelivery deliver_on_plane;
  tn::federated::Model global;
  if (round.has_data_plane()) {
    plane = tn::client::join_data_plane(round, std::chrono::seconds(60));
    global = tn::client::receive_model(*plane, round);
    deliver_on_plane = [&](const std::vector<uint32_t>& masked) {
      std::vector<uint32_t> sent = masked;
      if (options.mode == "secagg-long-input") sent.push_back(0);
      if (options.mode == "secagg-wide-word") {
        if (round.secure_aggregation().bits() >= 32)
          throw std::runtime_error("secagg-wide-word needs bits below 32");
        sent[0] = uint32_t{1} << round.secure_aggregation().bits();
      }
      tn::client::send_masked_words(*plane, round, sent);
      // Its words are in the hub's reduce; it dies before it can say so by SecAggStage.
      if (options.mode == "secagg-quit-after" && options.argument == "mask") std::raise(SIGKILL);
    };
  } else {
    global = fetch_model(*stub, id, key, round.model_version());
  }
  const tn::client::TrainResult trained = shifted(global);
  const std::vector<uint32_t> words =
      tn::client::quantised_update(round.secure_aggregation(), global, trained);
  std::cout << json{{"device_id", id}, {"round_id", round.round_id()}, {"quantised", words}}.dump()
            << std::endl;
  const std::vector<uint32_t> input = tn::client::noised_input(round.secure_aggregation(), words);
  try {
    tn::client::run_secure_stages(
        round, input, tn::proto::signer_of(key),
        [&](const v1::SecAggStagePayload& payload) {
          v1::SecAggStagePayload sent = payload;
          const bool last_words =
              payload.has_masked_input() &&
              payload.masked_input().offset() + uint64_t(payload.masked_input().words_size()) == words.size();
          if (options.mode == "secagg-long-input" && last_words) sent.mutable_masked_input()->add_words(0);
          v1::SecAggStageRequest request;
          request.set_payload(sent.SerializeAsString());
          *request.mutable_auth() = tn::proto::sign_request(kSecAggStage, id, request.payload(), key);
          grpc::ClientContext context;
          context.set_deadline(SystemClock::now() + std::chrono::seconds(60));
          v1::SecAggStageResponse response;
          if (grpc::Status status = stub->SecAggStage(&context, request, &response); !status.ok())
            throw Refused{status_json(status)};
          if (stage_name(payload) == options.argument && !response.chunk_taken()) {
            if (options.mode == "secagg-quit-after") std::raise(SIGKILL);
            throw LeftTheRound{};
          }
          return response;
        },
        deliver_on_plane);
  } catch (const LeftTheRound&) {
    for (;;) device.check_in();  // alive and back in a CheckIn, as a device whose round failed
  } catch (const Refused& refused) {
    if (options.mode == "secagg-long-input" || options.mode == "secagg-wide-word")
      return {{"device_id", id}, {"refused", refused.status}};
    throw std::runtime_error("SecAggStage failed: " + refused.status.dump());
  }
  throw std::runtime_error("the round ended before stage " + options.argument);
}

}  // namespace

int main(int argc, char** argv) {
  tn::cli::Command program("federated_rogue_device",
                           "A device that misbehaves on purpose, for tests/federated/test_round_failures.py. "
                           "One JSON object on stdout says what the coordinator answered.");
  const Options options = parse(program, argc, argv);
  try {
    json out;
    if (options.mode == "check-in")
      out = check_in_and_save(options);
    else if (options.mode == "replay")
      out = replay(options);
    else if (options.mode == "garbage")
      out = garbage(options);
    else if (options.mode == "garbage-stream")
      out = status_json(OpenStream(options.server, qualified_method(options.argument), {kGarbage}).answer());
    else if (options.mode == "empty-stream")
      out = status_json(OpenStream(options.server, qualified_method(options.argument), {""}).answer());
    else if (options.mode == "garbage-chunk")
      out = garbage_chunk(options);
    else if (options.mode == "oversized")
      out = oversized(options);
    else if (options.mode == "contribute")
      out = contribute(options);
    else if (options.mode.starts_with("secagg-"))
      out = secagg_rogue(options);
    else
      out = submit_refusals(options);
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const tn::cli::UsageError& error) {
    program.fail(error.what());
  } catch (const std::exception& error) {
    std::cerr << "federated_rogue_device: " << error.what() << "\n";
    return 1;
  }
}
