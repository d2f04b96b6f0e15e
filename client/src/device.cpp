#include "client/device.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "distributed/process_group.h"
#include "federated/contribution.h"
#include "proto/model_transfer.h"
#include "proto/protocol.h"
#include "proto/signing.h"

namespace tn::client {

namespace {

using SystemClock = std::chrono::system_clock;

constexpr const char* kRegister = "/torchnative.federated.v1.DeviceService/Register";
constexpr const char* kCheckIn = "/torchnative.federated.v1.DeviceService/CheckIn";
constexpr const char* kFetchTask = "/torchnative.federated.v1.DeviceService/FetchTask";
constexpr Milliseconds kCallTimeout{60'000};

// A call that came back with a gRPC error; transient ones are retried by run().
struct RpcError : std::runtime_error {
  RpcError(const char* method, const grpc::Status& status)
      : std::runtime_error(std::string(method) + " failed: " + std::to_string(int(status.error_code())) +
                           " " + status.error_message()),
        code(status.error_code()) {}
  grpc::StatusCode code;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t unix_ms(SystemClock::time_point t) {
  return uint64_t(std::chrono::duration_cast<Milliseconds>(t.time_since_epoch()).count());
}

Milliseconds until_unix_ms(uint64_t when) {
  auto now = unix_ms(SystemClock::now());
  return Milliseconds(when > now ? int64_t(when - now) : 0);
}

// The broadcast bytes as a model whose tensors share them, checked against the table and digest
// the round announced: the table as a transfer's header is checked, the model it describes
// against the digest. Sharing instead of copying keeps a large model once in memory per device.
federated::Model model_from_broadcast(const v1::RoundConfig& round,
                                      std::shared_ptr<const std::string> bytes) {
  const v1::ModelHeader& header = round.data_plane().model();
  if (header.blake2b_256() != round.model_blake2b_256())
    throw std::runtime_error("round " + std::to_string(round.round_id()) +
                             ": the data plane's model table and the round disagree on the model digest");
  // Names, dtypes, shapes, offsets back to back and the total; allocates nothing.
  proto::ModelAssembler().accept_header(header);
  if (header.total_bytes() != bytes->size())
    throw std::runtime_error("round " + std::to_string(round.round_id()) + ": the model broadcast has " +
                             std::to_string(bytes->size()) + " bytes, its table " +
                             std::to_string(header.total_bytes()));
  federated::Model model;
  for (const v1::TensorEntry& entry : header.tensors()) {
    const federated::TensorSpec spec{entry.name(), ScalarType(entry.dtype()),
                                     Shape(entry.shape().begin(), entry.shape().end())};
    std::shared_ptr<const std::byte> data(bytes,
                                          reinterpret_cast<const std::byte*>(bytes->data()) + entry.offset());
    model.tensors.push_back(
        federated::wrap_tensor(spec.name, spec.dtype, spec.shape, std::move(data), spec.nbytes()));
  }
  if (proto::ModelChunker(model, header.model_version()).header().blake2b_256() != header.blake2b_256())
    throw std::runtime_error("round " + std::to_string(round.round_id()) +
                             ": the model broadcast does not hash to the digest the round names");
  return model;
}

federated::ContributionKind contribution_kind(const v1::RoundConfig& round) {
  switch (round.data_plane().contribution()) {
    case v1::CONTRIBUTION_KIND_WEIGHTED:
      return federated::ContributionKind::WeightedSum;
    case v1::CONTRIBUTION_KIND_VALUES:
      return federated::ContributionKind::Values;
    default:  // a newer hub's kind: sending either would be aggregated as something else
      throw std::runtime_error("round " + std::to_string(round.round_id()) + ": contribution kind " +
                               std::to_string(int(round.data_plane().contribution())) +
                               " is not one this device knows");
  }
}

// Holds one of the process's training slots (DeviceOptions::training_slots) while in scope.
class TrainingSlot {
 public:
  TrainingSlot(std::counting_semaphore<>* slots, uint64_t round_deadline_unix_ms, uint64_t round_id)
      : slots_(slots) {
    if (slots_ && !slots_->try_acquire_until(SystemClock::time_point(Milliseconds(round_deadline_unix_ms))))
      throw std::runtime_error("round " + std::to_string(round_id) +
                               ": its deadline passed while this device waited for a training slot");
  }
  ~TrainingSlot() {
    if (slots_) slots_->release();
  }
  TrainingSlot(const TrainingSlot&) = delete;
  TrainingSlot& operator=(const TrainingSlot&) = delete;

 private:
  std::counting_semaphore<>* slots_;
};

}  // namespace

std::shared_ptr<grpc::Channel> open_channel(const DeviceOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls_root_certificates_file) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = read_file(*options.tls_root_certificates_file);
    credentials = grpc::SslCredentials(tls);
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(int(options.max_message_bytes));
  arguments.SetMaxSendMessageSize(int(options.max_message_bytes));
  return grpc::CreateCustomChannel(options.server_address, credentials, arguments);
}

struct Device::Impl {
  DeviceOptions options;
  proto::SigningKey key;
  std::unique_ptr<v1::DeviceService::Stub> stub;
  std::string device_id;
  std::mt19937_64 jitter{std::random_device{}()};

  explicit Impl(DeviceOptions o)
      : options(std::move(o)),
        key(proto::SigningKey::load_or_create(options.key_file)),
        stub(v1::DeviceService::NewStub(options.channel ? options.channel : open_channel(options))) {}

  template <typename Request>
  void sign(Request& request, const char* method, const google::protobuf::Message& payload) {
    std::string bytes;
    payload.SerializeToString(&bytes);
    *request.mutable_auth() = proto::sign_request(method, device_id, bytes, key);
    request.set_payload(std::move(bytes));
  }

  std::unique_ptr<grpc::ClientContext> context(Milliseconds timeout) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(SystemClock::now() + timeout);
    return context;
  }

  void register_device() {
    v1::RegisterPayload payload;
    payload.set_protocol_version(proto::kProtocolVersion);
    payload.set_public_key(key.public_key());
    *payload.mutable_metadata() = options.metadata;
    v1::RegisterRequest request;
    device_id.clear();  // Register is signed under the key in its own payload
    sign(request, kRegister, payload);
    v1::RegisterResponse response;
    grpc::Status status = stub->Register(context(kCallTimeout).get(), request, &response);
    if (!status.ok()) throw RpcError("Register", status);
    device_id = response.device_id();
  }

  Milliseconds backoff(int failures) {
    auto ceiling = options.backoff.initial.count() << std::min(failures, 20);
    ceiling = std::min<int64_t>(ceiling, options.backoff.maximum.count());
    return Milliseconds(std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(ceiling, 0))(jitter));
  }
};

Device::Device(DeviceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Device::~Device() = default;

const std::string& Device::device_id() {
  if (impl_->device_id.empty()) impl_->register_device();
  return impl_->device_id;
}

std::optional<v1::Assignment> Device::check_in() {
  device_id();
  v1::CheckInPayload payload;
  payload.set_protocol_version(proto::kProtocolVersion);
  payload.set_max_wait_ms(uint32_t(impl_->options.check_in_wait.count()));
  v1::CheckInRequest request;
  impl_->sign(request, kCheckIn, payload);
  v1::CheckInResponse response;
  // The server holds the call up to the wait; the deadline leaves it room to answer.
  grpc::Status status = impl_->stub->CheckIn(
      impl_->context(impl_->options.check_in_wait + kCallTimeout).get(), request, &response);
  if (!status.ok()) throw RpcError("CheckIn", status);
  if (response.has_assignment()) return response.assignment();
  return std::nullopt;
}

v1::RoundConfig Device::fetch_task(const v1::Assignment& assignment) {
  device_id();
  v1::FetchTaskPayload payload;
  payload.set_task_id(assignment.task_id());
  payload.set_round_id(assignment.round_id());
  v1::FetchTaskRequest request;
  impl_->sign(request, kFetchTask, payload);
  v1::FetchTaskResponse response;
  grpc::Status status = impl_->stub->FetchTask(impl_->context(kCallTimeout).get(), request, &response);
  if (!status.ok()) throw RpcError("FetchTask", status);
  return response.round();
}

RoundReport Device::participate(const v1::RoundConfig& round, const Trainer& trainer) {
  RoundReport report{round.task_id(), round.round_id(), false, {}, {}};
  try {
    if (!round.has_data_plane())
      throw std::runtime_error("round " + std::to_string(round.round_id()) + " names no data plane");
    const v1::DataPlane& plane = round.data_plane();
    dist::TCPStoreOptions store_options;
    store_options.host = plane.store_host();
    store_options.port = uint16_t(plane.store_port());
    store_options.wait_for_workers = false;
    store_options.timeout = std::max(until_unix_ms(plane.join_deadline_unix_ms()), Milliseconds(1));
    auto store = dist::make_prefix_store(plane.store_prefix(), dist::make_tcp_store(store_options));
    dist::ProcessGroupOptions group_options;
    group_options.topology = dist::Topology::Star;
    group_options.hub = 0;
    // Every operation of the round must be over by the round's deadline.
    group_options.timeout = std::max(until_unix_ms(round.deadline_unix_ms()), Milliseconds(1));
    dist::ProcessGroup group(store, int(plane.rank()), int(plane.world_size()), group_options);

    // In the hub's pieces (DataPlane.broadcast_piece_bytes; 0 from a hub that sends the model
    // whole), each received in place.
    auto model_bytes = std::make_shared<std::string>(plane.model().total_bytes(), '\0');
    const uint64_t total = model_bytes->size();
    const uint64_t piece = plane.broadcast_piece_bytes() > 0 ? plane.broadcast_piece_bytes() : total;
    uint64_t offset = 0;
    do {
      const uint64_t length = std::min(piece, total - offset);
      group.broadcast({model_bytes->data() + offset, ScalarType::Byte, int64_t(length), model_bytes}, 0)
          ->wait();
      offset += length;
    } while (offset < total);
    federated::Model global = model_from_broadcast(round, std::move(model_bytes));

    const TrainingSlot slot(impl_->options.training_slots.get(), round.deadline_unix_ms(), round.round_id());
    report.result = trainer(global, round);
    federated::ContributionLayout layout(global.spec(), contribution_kind(round));
    global = {};  // the broadcast's memory, while the contribution takes twice the model's
    auto contribution = std::make_shared<std::vector<double>>(layout.elements());
    layout.pack(report.result.model, report.result.num_examples, federated::UpdateLimits{}, *contribution);
    auto outcome = std::make_shared<dist::DeadlineReduceResult>();
    group
        .deadline_reduce(
            {contribution->data(), ScalarType::Double, int64_t(contribution->size()), contribution}, 0,
            dist::ReduceOp::Sum, std::max(until_unix_ms(round.deadline_unix_ms()), Milliseconds(1)), outcome)
        ->wait();
    // Delivered whole before the hub closed the round (the hub may still have refused it).
    report.contributed = !outcome->contributors.empty();
    if (!report.contributed) report.error = "the hub closed the round before this contribution was delivered";
  } catch (const std::exception& error) {
    report.error = error.what();
  }
  return report;
}

void Device::run(const Trainer& trainer, std::stop_token stop,
                 const std::function<void(const RoundReport&)>& on_round) {
  int failures = 0;
  auto pause = [&](Milliseconds wait) {
    auto until = std::chrono::steady_clock::now() + wait;
    while (!stop.stop_requested() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::min<Milliseconds>(Milliseconds(50), wait));
  };
  while (!stop.stop_requested()) {
    try {
      std::optional<v1::Assignment> assignment = check_in();
      failures = 0;
      if (!assignment) continue;
      RoundReport report = participate(fetch_task(*assignment), trainer);
      if (on_round) on_round(report);
    } catch (const RpcError& error) {
      // An unknown or forgotten identity registers again; everything else is waited out.
      if (error.code == grpc::StatusCode::UNAUTHENTICATED) impl_->device_id.clear();
      pause(impl_->backoff(failures++));
    } catch (const std::exception&) {
      pause(impl_->backoff(failures++));
    }
  }
}

}  // namespace tn::client
