#include "client/device.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cli/read_file.h"
#include "client/data_plane.h"
#include "client/secure_stages.h"
#include "distributed/process_group.h"
#include "federated/contribution.h"
#include "federated/validation.h"
#include "proto/model_transfer.h"
#include "proto/protocol.h"
#include "proto/secure_aggregation_messages.h"
#include "proto/signing.h"

namespace tn::client {

namespace {

using SystemClock = std::chrono::system_clock;

constexpr const char* kRegister = "/torchnative.federated.v1.DeviceService/Register";
constexpr const char* kCheckIn = "/torchnative.federated.v1.DeviceService/CheckIn";
constexpr const char* kFetchTask = "/torchnative.federated.v1.DeviceService/FetchTask";
constexpr const char* kHeartbeat = "/torchnative.federated.v1.DeviceService/Heartbeat";
constexpr const char* kFetchModel = "/torchnative.federated.v1.DeviceService/FetchModel";
constexpr const char* kSubmitUpdate = "/torchnative.federated.v1.DeviceService/SubmitUpdate";
constexpr const char* kSecAggStage = "/torchnative.federated.v1.DeviceService/SecAggStage";
constexpr Milliseconds kCallTimeout{60'000};
// Until the coordinator names its own: one that predates RegisterResponse.heartbeat_interval_ms
// has the same default.
constexpr Milliseconds kDefaultHeartbeatInterval{10'000};

// The longest gRPC waits before it reconnects a channel whose connection failed (open_channel).
constexpr Milliseconds kLongestReconnectBackoff{1'000};
// How long each registration attempt after the first waits for a connection (register_retrying).
constexpr Milliseconds kRegisterConnectWindow{5'000};
// CheckInPayload.followed_task_ids: the coordinator looks at this many.
constexpr size_t kMostFollowedTasks = 16;

// A call that came back with a gRPC error; transient ones are retried by run().
struct RpcError : std::runtime_error {
  RpcError(const char* method, const grpc::Status& status)
      : std::runtime_error(std::string(method) + " failed: " + std::to_string(int(status.error_code())) +
                           " " + status.error_message()),
        code(status.error_code()) {}
  grpc::StatusCode code;

  // gRPC reports a certificate that fails verification as UNAVAILABLE, like a coordinator that
  // is down; only its message tells them apart, and waiting cannot fix it.
  bool certificate_rejected() const {
    return code == grpc::StatusCode::UNAVAILABLE &&
           std::string_view(what()).find("certificate verify failed") != std::string_view::npos;
  }
  // The coordinator could not be reached or answer in time: down, restarting, overloaded.
  bool unreachable() const {
    return (code == grpc::StatusCode::UNAVAILABLE && !certificate_rejected()) ||
           code == grpc::StatusCode::DEADLINE_EXCEEDED;
  }
};

// Waits `wait`, or less when `stop` is requested first; false when it was.
bool pause(std::stop_token stop, Milliseconds wait) {
  std::mutex mutex;
  std::condition_variable_any never_notified;
  std::unique_lock lock(mutex);
  never_notified.wait_for(lock, stop, wait, [] { return false; });
  return !stop.stop_requested();
}

uint64_t unix_ms(SystemClock::time_point t) {
  return uint64_t(std::chrono::duration_cast<Milliseconds>(t.time_since_epoch()).count());
}

Milliseconds until_unix_ms(uint64_t when) {
  auto now = unix_ms(SystemClock::now());
  return Milliseconds(when > now ? int64_t(when - now) : 0);
}

std::string round_name(const v1::RoundConfig& round) { return "round " + std::to_string(round.round_id()); }

// Every size the round announces that this device would allocate for, checked against its limits
// before anything is allocated (or a connection made): the model table, which sizes the broadcast
// buffer, the trained model and the contribution (at most four times the model: float64 per
// float16 element), and the data plane's ranks, per which joining allocates.
void check_round_sizes(const v1::RoundConfig& round, const DeviceOptions& options) {
  const v1::DataPlane& plane = round.data_plane();
  const v1::ModelHeader& header = plane.model();
  if (header.total_bytes() > options.limits.max_total_bytes)
    throw std::runtime_error(round_name(round) + " announces a model of " +
                             std::to_string(header.total_bytes()) + " bytes, above this device's limit of " +
                             std::to_string(options.limits.max_total_bytes));
  if (header.blake2b_256() != round.model_blake2b_256())
    throw std::runtime_error(round_name(round) +
                             ": the data plane's model table and the round disagree on the model digest");
  try {
    // Names, dtypes, shapes against the limits, offsets back to back and the total; allocates
    // nothing.
    proto::ModelAssembler(options.limits).accept_header(header);
  } catch (const proto::TransferError& error) {
    throw std::runtime_error(round_name(round) + ": " + error.what());
  }
  if (plane.world_size() > options.max_data_plane_ranks)
    throw std::runtime_error(round_name(round) + " announces a data plane of " +
                             std::to_string(plane.world_size()) + " ranks, above this device's limit of " +
                             std::to_string(options.max_data_plane_ranks));
  if (plane.rank() == 0 || plane.rank() >= plane.world_size())
    throw std::runtime_error(round_name(round) + " puts this device at rank " + std::to_string(plane.rank()) +
                             " of a data plane of " + std::to_string(plane.world_size()) +
                             " ranks, rank 0 being the hub's");
}

// A secure round runs over gRPC alone: its masked words go by SecAggStage, since the hub's reduce
// sums float64 values and masked words must be added modulo 2^bits. A device that asked for the
// data plane is not moved to gRPC unasked (it may have asked for a reason: a proxy that passes the
// hub's traffic and not large gRPC streams, a quota): it refuses by name, and its operator decides.
void check_secure_transport(const v1::RoundConfig& round, const DeviceOptions& options) {
  if (round.has_data_plane()) {
    if (round.data_plane().contribution() == v1::CONTRIBUTION_KIND_MASKED_WORDS) return;
    throw std::runtime_error(
        round_name(round) + " of task " + round.task_id() +
        " is a secure aggregation round whose data plane carries contribution kind " +
        std::to_string(int(round.data_plane().contribution())) +
        ", not masked words: this device's masked input would be summed as something else");
  }
  if (options.round_transport == v1::ROUND_TRANSPORT_GRPC) return;
  throw std::runtime_error(
      round_name(round) + " of task " + round.task_id() +
      " is a secure aggregation round without a data plane (its masked words go over gRPC "
      "alone), and this device asked for the data plane: it takes part in such rounds only "
      "when it checks in with round_transport grpc (torchnative-device --round-transport "
      "grpc)");
}

std::string noise_words(double multiplier, uint32_t devices) {
  std::ostringstream words;
  words << "multiplier " << multiplier << " for sums of " << devices << " devices (a share of "
        << multiplier / std::sqrt(double(devices)) << " sensitivities)";
  return words.str();
}

// The noise a secure round asks of this device, checked against the device's own floor before it
// trains. The coordinator sets noise_multiplier z and noise_min_devices m, and the device adds a
// share of variance (z sensitivity)^2 / m: a coordinator that claims a larger m or a smaller z
// makes every device add less, and nothing the device fetches from that coordinator (the task
// included) can tell it otherwise. Its own floor (Z, M) can: the share it adds then has standard
// deviation at least Z / sqrt(M) sensitivities of its own contribution, whatever the round says
// (the sensitivity comes from the same clipping bound and fixed point the device quantises with,
// so inflating them inflates the noise with them). Compared as z^2 / m against Z^2 / M, the share
// itself: a round of larger z and m that asks for as much noise per device is as good. NaN fails.
void check_noise_floor(const v1::RoundConfig& round, const DeviceOptions& options) {
  if (!options.noise_floor) return;
  const NoiseFloor& floor = *options.noise_floor;
  const v1::SecAggRound& secure = round.secure_aggregation();
  const std::string floor_words =
      "this device's noise floor, " + noise_words(floor.multiplier, floor.devices);
  if (!secure.has_noise_multiplier())
    throw std::runtime_error(round_name(round) + " of task " + round.task_id() +
                             " adds no distributed DP noise, below " + floor_words);
  const double z = secure.noise_multiplier();
  const uint32_t m = secure.noise_min_devices();
  if (!(z * z * double(floor.devices) >= floor.multiplier * floor.multiplier * double(m)))
    throw std::runtime_error(round_name(round) + " of task " + round.task_id() +
                             " asks each device for noise of " + noise_words(z, m) + ", below " +
                             floor_words);
}

// The broadcast bytes, laid out as the round's table (check_round_sizes), as a model whose
// tensors share them, checked against the digest. Sharing instead of copying keeps a large model
// once in memory per device.
federated::Model model_from_broadcast(const v1::RoundConfig& round,
                                      std::shared_ptr<const std::string> bytes) {
  const v1::ModelHeader& header = round.data_plane().model();
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
    throw std::runtime_error(round_name(round) +
                             ": the model broadcast does not hash to the digest the round names");
  return model;
}

}  // namespace

std::unique_ptr<dist::ProcessGroup> join_data_plane(const v1::RoundConfig& round, Milliseconds timeout) {
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
  group_options.timeout = std::max(timeout, Milliseconds(1));
  return std::make_unique<dist::ProcessGroup>(store, int(plane.rank()), int(plane.world_size()),
                                              group_options);
}

// In the hub's pieces (DataPlane.broadcast_piece_bytes; 0 from a hub that sends the model whole),
// each received in place (model_from_broadcast).
federated::Model receive_model(dist::ProcessGroup& group, const v1::RoundConfig& round) {
  const v1::DataPlane& plane = round.data_plane();
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
  return model_from_broadcast(round, std::move(model_bytes));
}

// The reduce's deadline: the masked input stage closes at the latest a stage_timeout_ms for sharing
// and one for masking after the round's deadline, by which the keys are advertised.
void send_masked_words(dist::ProcessGroup& group, const v1::RoundConfig& round,
                       const std::vector<uint32_t>& masked) {
  auto words = std::make_shared<std::vector<uint32_t>>(masked);
  auto outcome = std::make_shared<dist::DeadlineReduceResult>();
  const Milliseconds stage_timeout(round.secure_aggregation().stage_timeout_ms());
  group
      .deadline_reduce(
          {words->data(), ScalarType::Int, int64_t(words->size()), words}, 0, dist::ReduceOp::Sum,
          std::max(until_unix_ms(round.deadline_unix_ms()), Milliseconds(0)) + 2 * stage_timeout, outcome)
      ->wait();
  if (outcome->contributors.empty())
    throw std::runtime_error(round_name(round) +
                             ": the hub closed the masked input stage before this device's "
                             "masked input was delivered");
}

namespace {

federated::ContributionKind contribution_kind(const v1::RoundConfig& round) {
  switch (round.data_plane().contribution()) {
    case v1::CONTRIBUTION_KIND_WEIGHTED:
      return federated::ContributionKind::WeightedSum;
    case v1::CONTRIBUTION_KIND_VALUES:
      return federated::ContributionKind::Values;
    default:  // a newer hub's kind: sending either would be aggregated as something else
      throw std::runtime_error(round_name(round) + ": contribution kind " +
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

// Sends the heartbeats of every device of the process from one thread, so that a thousand devices
// in one process cost no thread each. A device's next heartbeat is due at a uniformly random time
// between half its interval and its interval after the last one, never later than the
// coordinator asked and never in step with devices that registered together; a heartbeat goes as
// an asynchronous call, so a slow coordinator delays no other device's.
class HeartbeatScheduler {
 public:
  // Sends the device's heartbeat (or not, if its last one is still on its way) and returns the
  // interval the coordinator asks for.
  using Send = std::function<Milliseconds()>;

  static HeartbeatScheduler& instance() {
    static HeartbeatScheduler scheduler;
    return scheduler;
  }

  void add(const void* device, Send send, Milliseconds interval) {
    std::lock_guard lock(mutex_);
    senders_[device] = std::move(send);
    due_.emplace(SteadyClock::now() + jittered(interval), device);
    changed_.notify_one();
  }

  // Once this returns, the device's Send is not running and never runs again.
  void remove(const void* device) {
    std::lock_guard lock(mutex_);
    senders_.erase(device);
    std::erase_if(due_, [device](const auto& entry) { return entry.second == device; });
  }

 private:
  using SteadyClock = std::chrono::steady_clock;

  HeartbeatScheduler() : thread_([this](std::stop_token stop) { run(stop); }) {}

  Milliseconds jittered(Milliseconds interval) {
    return Milliseconds(
        std::uniform_int_distribution<int64_t>(interval.count() / 2, interval.count())(random_));
  }

  void run(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      if (due_.empty()) {
        changed_.wait(lock, stop, [&] { return !due_.empty(); });
        continue;
      }
      const auto next = due_.begin()->first;
      if (SteadyClock::now() < next) {
        // Until then, unless a device added meanwhile is due sooner.
        changed_.wait_until(lock, stop, next, [&] { return !due_.empty() && due_.begin()->first < next; });
        continue;
      }
      const void* device = due_.begin()->second;
      due_.erase(due_.begin());
      // Under the lock, so that remove() waits for it; it only starts a call.
      const Milliseconds interval = senders_.at(device)();
      due_.emplace(SteadyClock::now() + jittered(interval), device);
    }
  }

  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::map<const void*, Send> senders_;
  std::multimap<SteadyClock::time_point, const void*> due_;
  std::mt19937_64 random_{std::random_device{}()};
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

// One heartbeat on its way; deleted by its completion.
struct HeartbeatCall {
  grpc::ClientContext context;
  v1::HeartbeatRequest request;
  v1::HeartbeatResponse response;
  std::string task_id;  // the round it reported, which abandon_round is about
  uint64_t round_id = 0;
};

}  // namespace

std::shared_ptr<grpc::Channel> open_channel(const DeviceOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls_root_certificates_file) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = tn::cli::read_file(*options.tls_root_certificates_file, "TLS root certificates");
    credentials = grpc::SslCredentials(tls);
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(int(options.limits.max_message_bytes));
  arguments.SetMaxSendMessageSize(int(options.limits.max_message_bytes));
  // gRPC's own reconnection backoff grows to 120 s by default: a call waiting for a connection
  // (register_retrying's) would reach a coordinator back up only that late.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, int(options.backoff.initial.count()));
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, int(kLongestReconnectBackoff.count()));
  return grpc::CreateCustomChannel(options.server_address, credentials, arguments);
}

struct Device::Impl {
  DeviceOptions options;
  proto::SigningKey key;
  std::unique_ptr<v1::DeviceService::Stub> stub;
  std::string device_id;  // written under `mutex`: the heartbeat thread reads it
  std::mt19937_64 jitter{std::random_device{}()};

  // What the device's thread shares with the heartbeat thread and its calls' completions.
  std::mutex mutex;
  std::condition_variable heartbeat_finished;
  v1::HeartbeatPayload activity;  // what the next heartbeat reports
  Milliseconds heartbeat_interval = kDefaultHeartbeatInterval;
  HeartbeatCall* heartbeat_on_its_way = nullptr;
  bool heartbeats_scheduled = false;
  // The last round a heartbeat's answer said was stopped or closed (abandon_round).
  std::pair<std::string, uint64_t> abandoned_round;

  // On the device's thread: the tasks it took part in, oldest first, the last CheckIn's answer
  // when it had no work, whether any answer said a task was running, and whether the device has
  // said its work ended.
  std::vector<std::string> followed_tasks;
  std::optional<v1::NoWork> last_no_work;
  bool saw_running_task = false;
  bool said_work_ended = false;

  // The CheckIn a stop cancels (run()), and whether the stop came: a CheckIn begun after it is
  // cancelled as it starts.
  std::mutex check_in_mutex;
  grpc::ClientContext* held_check_in = nullptr;
  bool check_ins_cancelled = false;

  explicit Impl(DeviceOptions o)
      : options(std::move(o)),
        key(proto::SigningKey::load_or_create(options.key_file)),
        stub(v1::DeviceService::NewStub(options.channel ? options.channel : open_channel(options))) {
    activity.set_state(v1::DEVICE_STATE_IDLE);
  }

  ~Impl() {
    if (!heartbeats_scheduled) return;
    HeartbeatScheduler::instance().remove(this);
    std::unique_lock lock(mutex);
    if (heartbeat_on_its_way) heartbeat_on_its_way->context.TryCancel();
    heartbeat_finished.wait(lock, [&] { return heartbeat_on_its_way == nullptr; });
  }

  // Throws when the coordinator has said `round` is over: there is no point training for it or
  // sending what was trained.
  void check_not_abandoned(const v1::RoundConfig& round, const char* before) {
    std::lock_guard lock(mutex);
    if (abandoned_round == std::pair{round.task_id(), round.round_id()})
      throw std::runtime_error(round_name(round) +
                               ": the coordinator stopped or closed it (abandon_round), " +
                               "so this device left it before " + before);
  }

  void set_device_id(std::string id) {
    std::lock_guard lock(mutex);
    device_id = std::move(id);
  }

  // What the heartbeats report from now on: the state and, while in a round, which one.
  void report(v1::DeviceState state, const v1::RoundConfig* round = nullptr) {
    std::lock_guard lock(mutex);
    activity.set_state(state);
    activity.set_task_id(round ? round->task_id() : "");
    activity.set_round_id(round ? round->round_id() : 0);
  }

  // On the heartbeat thread (HeartbeatScheduler::Send).
  Milliseconds send_heartbeat() {
    std::unique_lock lock(mutex);
    if (heartbeat_on_its_way || device_id.empty()) return heartbeat_interval;  // unregistered for now
    auto* call = new HeartbeatCall;
    sign(call->request, kHeartbeat, activity);
    call->task_id = activity.task_id();
    call->round_id = activity.round_id();
    call->context.set_deadline(SystemClock::now() + heartbeat_interval);
    heartbeat_on_its_way = call;
    const Milliseconds interval = heartbeat_interval;
    lock.unlock();  // the completion may run on this thread, and takes the lock
    stub->async()->Heartbeat(&call->context, &call->request, &call->response,
                             [this, call](const grpc::Status& status) {
                               std::lock_guard lock(mutex);
                               if (status.ok() && call->response.next_heartbeat_ms() > 0)
                                 heartbeat_interval = Milliseconds(call->response.next_heartbeat_ms());
                               if (status.ok() && call->response.abandon_round())
                                 abandoned_round = {call->task_id, call->round_id};
                               delete call;
                               heartbeat_on_its_way = nullptr;
                               heartbeat_finished.notify_all();
                             });
    return interval;
  }

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

  // `connect_within`: the call waits that long for a connection (gRPC reconnects the channel on
  // its own) instead of failing at once while the channel's last connection attempt failed.
  void register_device(std::optional<Milliseconds> connect_within = std::nullopt) {
    v1::RegisterPayload payload;
    payload.set_protocol_version(proto::kProtocolVersion);
    payload.set_public_key(key.public_key());
    *payload.mutable_metadata() = options.metadata;
    v1::RegisterRequest request;
    set_device_id("");  // Register is signed under the key in its own payload
    sign(request, kRegister, payload);
    v1::RegisterResponse response;
    auto call = context(connect_within.value_or(kCallTimeout));
    call->set_wait_for_ready(connect_within.has_value());
    grpc::Status status = stub->Register(call.get(), request, &response);
    if (connect_within && status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      status = grpc::Status(status.error_code(), "no connection to " + options.server_address + " within " +
                                                     std::to_string(connect_within->count()) + " ms");
    if (!status.ok()) {
      // All gRPC tells a plaintext client of a TLS port; a coordinator going down between
      // accepting and answering ends alike, so this is a hint, and the call is retried.
      if (!options.tls_root_certificates_file && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
          status.error_message().find("Socket closed") != std::string::npos)
        status = grpc::Status(status.error_code(),
                              status.error_message() +
                                  " (this device speaks plaintext: a coordinator serving TLS closes its "
                                  "connections this way; give the device the coordinator's CA)");
      throw RpcError("Register", status);
    }
    set_device_id(response.device_id());
    if (!heartbeats_scheduled) {
      if (response.heartbeat_interval_ms() > 0) {
        std::lock_guard lock(mutex);
        heartbeat_interval = Milliseconds(response.heartbeat_interval_ms());
      }
      HeartbeatScheduler::instance().add(
          this, [this] { return send_heartbeat(); }, heartbeat_interval);
      heartbeats_scheduled = true;
    }
  }

  // The stored model `version` by FetchModel, checked against `digest` (when not empty) as soon
  // as its header arrives; nullopt when the coordinator has no such version (NOT_FOUND).
  std::optional<federated::Model> fetch_model(const std::string& version, const std::string& digest,
                                              SystemClock::time_point deadline) {
    v1::FetchModelPayload payload;
    payload.set_model_version(version);
    v1::FetchModelRequest request;
    sign(request, kFetchModel, payload);
    grpc::ClientContext context;
    context.set_deadline(deadline);
    std::unique_ptr<grpc::ClientReader<v1::ModelStream>> reader = stub->FetchModel(&context, request);
    // The assembler checks the header against this device's limits before it allocates anything.
    proto::ModelAssembler assembler(options.limits);
    v1::ModelStream message;
    bool header_checked = false;
    while (reader->Read(&message)) {
      assembler.accept(message);
      if (!header_checked && !digest.empty() && assembler.header().blake2b_256() != digest) {
        context.TryCancel();
        throw std::runtime_error("FetchModel streams a model version '" + version +
                                 "' whose digest is not the one expected");
      }
      header_checked = true;
    }
    grpc::Status status = reader->Finish();
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::nullopt;
    if (!status.ok()) throw RpcError("FetchModel", status);
    return assembler.finish();  // every byte arrived (and hashes to the digest its header gives)
  }

  void follow(const std::string& task_id) {
    if (std::ranges::find(followed_tasks, task_id) != followed_tasks.end()) return;
    followed_tasks.push_back(task_id);
    if (followed_tasks.size() > kMostFollowedTasks) followed_tasks.erase(followed_tasks.begin());
  }

  // The work this device came for is over when the coordinator says no task is running, once
  // this device took part in a task or saw one running, or, before it first said its work ended,
  // waited in a CheckIn through one (a device started before its task waits for it). Said once:
  // the device then waits for a task it takes part in or is told is running. Not for a CheckIn
  // held through an end of the work after that (work_ended_while_held): an end of tasks it was
  // neither in nor told of ended no work of its own, and a coordinator that recorded a task's end
  // in its store before it counted it on its board (before 2026-12-07) held a device told of the
  // end by one CheckIn in its next one through that same end.
  std::optional<WorkEnded> work_ended() {
    if (!last_no_work || !last_no_work->has_running_tasks()) return std::nullopt;  // an older coordinator
    const bool held_through_an_end = last_no_work->work_ended_while_held() && !said_work_ended;
    if (last_no_work->running_tasks() > 0 || held_through_an_end) saw_running_task = true;
    if (last_no_work->running_tasks() > 0 || (followed_tasks.empty() && !saw_running_task))
      return std::nullopt;
    followed_tasks.clear();
    saw_running_task = false;
    said_work_ended = true;
    return WorkEnded{{last_no_work->ended_tasks().begin(), last_no_work->ended_tasks().end()}};
  }

  // The CheckIn call, which set_check_ins_cancelled(true) cancels while it is held.
  grpc::Status cancellable_check_in(grpc::ClientContext& context, const v1::CheckInRequest& request,
                                    v1::CheckInResponse& response) {
    {
      std::lock_guard lock(check_in_mutex);
      held_check_in = &context;
      if (check_ins_cancelled) context.TryCancel();
    }
    const grpc::Status status = stub->CheckIn(&context, request, &response);
    std::lock_guard lock(check_in_mutex);
    held_check_in = nullptr;
    return status;
  }

  void set_check_ins_cancelled(bool cancelled) {
    std::lock_guard lock(check_in_mutex);
    check_ins_cancelled = cancelled;
    if (cancelled && held_check_in) held_check_in->TryCancel();
  }

  Milliseconds backoff(int failures) { return options.backoff.wait(failures, jitter); }
};

Milliseconds Backoff::wait(int failures, std::mt19937_64& random) const {
  auto ceiling = initial.count() << std::clamp(failures, 0, 20);
  ceiling = std::min<int64_t>(ceiling, maximum.count());
  return Milliseconds(std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(ceiling, 0))(random));
}

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
  payload.set_round_transport(impl_->options.round_transport);
  for (const std::string& task_id : impl_->followed_tasks) payload.add_followed_task_ids(task_id);
  // So that a CheckIn made after the last task ended (this device between two CheckIns then) is
  // answered at once rather than held for its wait.
  payload.set_saw_running_task(impl_->saw_running_task);
  v1::CheckInRequest request;
  impl_->sign(request, kCheckIn, payload);
  v1::CheckInResponse response;
  // The server holds the call up to the wait; the deadline leaves it room to answer.
  const std::unique_ptr<grpc::ClientContext> context =
      impl_->context(impl_->options.check_in_wait + kCallTimeout);
  const grpc::Status status = impl_->cancellable_check_in(*context, request, response);
  if (!status.ok()) throw RpcError("CheckIn", status);
  impl_->last_no_work.reset();
  if (response.has_assignment()) {
    impl_->follow(response.assignment().task_id());
    return response.assignment();
  }
  impl_->last_no_work = response.no_work();
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

std::optional<std::string> Device::register_retrying(std::stop_token stop, Milliseconds give_up_after,
                                                     const RegisterRetry& on_retry) {
  const auto give_up_at = std::chrono::steady_clock::now() + give_up_after;
  for (int failures = 0;;) {
    try {
      if (failures == 0) return device_id();  // fails at once, with the reason, when unreachable
      // Later attempts wait for a connection, so that a coordinator back up is reached at once.
      Milliseconds window = kRegisterConnectWindow;
      if (give_up_after > Milliseconds(0))
        window = std::min(
            window, std::chrono::duration_cast<Milliseconds>(give_up_at - std::chrono::steady_clock::now()));
      impl_->register_device(std::max(window, Milliseconds(1)));
      return impl_->device_id;
    } catch (const RpcError& error) {
      if (!error.unreachable()) throw;
      const Milliseconds wait = impl_->backoff(failures++);
      if (give_up_after > Milliseconds(0) && std::chrono::steady_clock::now() + wait >= give_up_at) throw;
      if (on_retry) on_retry(error, failures, wait);
      if (!pause(stop, wait)) return std::nullopt;
    }
  }
}

std::optional<federated::Model> Device::fetch_model(const std::string& version) {
  device_id();
  return impl_->fetch_model(version, "", SystemClock::now() + kCallTimeout);
}

RoundReport Device::participate(const v1::RoundConfig& round, const Trainer& trainer) {
  RoundReport report{round.task_id(), round.round_id(), false, {}, {}};
  struct BackToIdle {
    Impl& impl;
    ~BackToIdle() { impl.report(v1::DEVICE_STATE_IDLE); }
  } back_to_idle{*impl_};
  try {
    if (round.has_secure_aggregation()) {
      participate_securely(round, trainer, report);
      return report;
    }
    if (!round.has_data_plane()) {
      participate_over_grpc(round, trainer, report);
      return report;
    }
    check_round_sizes(round, impl_->options);
    impl_->report(v1::DEVICE_STATE_FETCHING_MODEL, &round);
    // Every operation of the round must be over by the round's deadline.
    const std::unique_ptr<dist::ProcessGroup> plane =
        join_data_plane(round, until_unix_ms(round.deadline_unix_ms()));
    dist::ProcessGroup& group = *plane;
    federated::Model global = receive_model(group, round);
    report.bytes_received = global.total_bytes();

    const TrainingSlot slot(impl_->options.training_slots.get(), round.deadline_unix_ms(), round.round_id());
    impl_->check_not_abandoned(round, "training");
    impl_->report(v1::DEVICE_STATE_TRAINING, &round);
    report.result = trainer(global, round);
    federated::ContributionLayout layout(global.spec(), contribution_kind(round));
    global = {};  // the broadcast's memory, while the contribution takes twice the model's
    auto contribution = std::make_shared<std::vector<double>>(layout.elements());
    layout.pack(report.result.model, report.result.num_examples, federated::UpdateLimits{}, *contribution);
    impl_->report(v1::DEVICE_STATE_UPLOADING, &round);
    auto outcome = std::make_shared<dist::DeadlineReduceResult>();
    group
        .deadline_reduce(
            {contribution->data(), ScalarType::Double, int64_t(contribution->size()), contribution}, 0,
            dist::ReduceOp::Sum, std::max(until_unix_ms(round.deadline_unix_ms()), Milliseconds(1)), outcome)
        ->wait();
    // Delivered whole before the hub closed the round (the hub may still have refused it).
    report.contributed = !outcome->contributors.empty();
    if (report.contributed) report.bytes_sent = contribution->size() * sizeof(double);
    if (!report.contributed) report.error = "the hub closed the round before this contribution was delivered";
  } catch (const std::exception& error) {
    report.error = error.what();
  }
  return report;
}

void Device::fetch_train_and(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report,
                             const std::function<void(federated::Model& global)>& send) {
  const auto deadline = SystemClock::time_point(Milliseconds(round.deadline_unix_ms()));
  impl_->report(v1::DEVICE_STATE_FETCHING_MODEL, &round);
  std::optional<federated::Model> fetched =
      impl_->fetch_model(round.model_version(), round.model_blake2b_256(), deadline);
  if (!fetched)
    throw std::runtime_error(round_name(round) + ": the coordinator has no model version '" +
                             round.model_version() + "'");
  train_and(round, trainer, report, std::move(*fetched), send);
}

void Device::train_and(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report,
                       federated::Model global, const std::function<void(federated::Model& global)>& send) {
  report.bytes_received = global.total_bytes();

  const TrainingSlot slot(impl_->options.training_slots.get(), round.deadline_unix_ms(), round.round_id());
  impl_->check_not_abandoned(round, "training");
  impl_->report(v1::DEVICE_STATE_TRAINING, &round);
  report.result = trainer(global, round);
  // The checks the coordinator makes, made first: names, dtypes, shapes, finite values.
  federated::validate_update(
      {impl_->device_id, round.round_id(), 0, report.result.num_examples, report.result.model}, global.spec(),
      round.round_id(), 0, federated::UpdateLimits{});
  send(global);
}

void Device::participate_over_grpc(const v1::RoundConfig& round, const Trainer& trainer,
                                   RoundReport& report) {
  fetch_train_and(round, trainer, report, [&](federated::Model& global) {
    global = {};
    upload_over_grpc(round, report);
  });
}

void Device::upload_over_grpc(const v1::RoundConfig& round, RoundReport& report) {
  const auto deadline = SystemClock::time_point(Milliseconds(round.deadline_unix_ms()));
  impl_->check_not_abandoned(round, "sending its update");

  impl_->report(v1::DEVICE_STATE_UPLOADING, &round);
  proto::ModelChunker chunker(report.result.model, round.model_version(), impl_->options.limits);
  v1::SubmitUpdateHeader header;
  header.set_task_id(round.task_id());
  header.set_round_id(round.round_id());
  header.set_model_version(round.model_version());
  header.set_example_count(uint64_t(report.result.num_examples));
  for (const auto& [name, value] : report.result.metrics) (*header.mutable_metrics())[name] = value;
  *header.mutable_update() = chunker.header();
  grpc::ClientContext context;
  context.set_deadline(deadline);
  v1::SubmitUpdateResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitUpdateRequest>> writer =
      impl_->stub->SubmitUpdate(&context, &response);
  v1::SubmitUpdateRequest message;
  impl_->sign(*message.mutable_signed_header(), kSubmitUpdate, header);
  // A write fails once the coordinator has answered (a refusal): Finish() then says why.
  bool writing = writer->Write(message);
  v1::ModelChunk chunk;
  while (writing && chunker.next_chunk(chunk)) {
    message.Clear();
    *message.mutable_chunk() = std::move(chunk);
    writing = writer->Write(message);
  }
  if (writing) writer->WritesDone();
  if (grpc::Status status = writer->Finish(); !status.ok()) throw RpcError("SubmitUpdate", status);
  report.contributed = true;
  report.bytes_sent = chunker.header().total_bytes();
}

void Device::participate_securely(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report) {
  check_secure_transport(round, impl_->options);
  check_noise_floor(round, impl_->options);
  const auto quantise = [&](federated::Model& global) {
    impl_->check_not_abandoned(round, "masking its update");
    report.quantised = quantised_update(round.secure_aggregation(), global, report.result);
  };
  // On the data plane the model comes by the hub's broadcast and the masked input goes into its
  // reduce; the stages' other messages go by SecAggStage either way.
  std::unique_ptr<dist::ProcessGroup> plane;
  MaskedInputDelivery deliver_on_plane;
  if (round.has_data_plane()) {
    check_round_sizes(round, impl_->options);
    impl_->report(v1::DEVICE_STATE_FETCHING_MODEL, &round);
    plane = join_data_plane(round, until_unix_ms(round.deadline_unix_ms()));
    train_and(round, trainer, report, receive_model(*plane, round), quantise);
    deliver_on_plane = [&](const std::vector<uint32_t>& masked) { send_masked_words(*plane, round, masked); };
  } else {
    fetch_train_and(round, trainer, report, quantise);
  }
  impl_->report(v1::DEVICE_STATE_UPLOADING, &round);
  // Each call is held until its stage closes: by the round's deadline for the first (the others'
  // training), within stage_timeout_ms of its opening for each later one.
  const Milliseconds stage_timeout(round.secure_aggregation().stage_timeout_ms());
  run_secure_stages(
      round, noised_input(round.secure_aggregation(), report.quantised), proto::signer_of(impl_->key),
      [&](const v1::SecAggStagePayload& payload) {
        v1::SecAggStageRequest request;
        impl_->sign(request, kSecAggStage, payload);
        grpc::ClientContext context;
        context.set_deadline(std::max(SystemClock::now() + stage_timeout,
                                      SystemClock::time_point(Milliseconds(round.deadline_unix_ms()))) +
                             kCallTimeout);
        v1::SecAggStageResponse response;
        if (grpc::Status status = impl_->stub->SecAggStage(&context, request, &response); !status.ok())
          throw RpcError("SecAggStage", status);
        return response;
      },
      deliver_on_plane);
  report.contributed = true;
  report.bytes_sent = report.quantised.size() * sizeof(uint32_t);
}

void Device::run(const Trainer& trainer, std::stop_token stop,
                 const std::function<void(const RoundReport&)>& on_round,
                 const std::function<void(const WorkEnded&)>& on_work_ended) {
  impl_->set_check_ins_cancelled(false);  // a previous run's stop
  const std::stop_callback cancel_check_in(stop, [this] { impl_->set_check_ins_cancelled(true); });
  int failures = 0;
  while (!stop.stop_requested()) {
    try {
      std::optional<v1::Assignment> assignment = check_in();
      failures = 0;
      if (!assignment) {
        if (std::optional<WorkEnded> ended = impl_->work_ended()) {
          if (on_work_ended) on_work_ended(*ended);
          if (!impl_->options.wait_for_next_task) return;
        }
        continue;
      }
      RoundReport report = participate(fetch_task(*assignment), trainer);
      if (on_round) on_round(report);
    } catch (const RpcError& error) {
      if (error.certificate_rejected()) throw;
      // An unknown or forgotten identity registers again; everything else is waited out.
      if (error.code == grpc::StatusCode::UNAUTHENTICATED) impl_->set_device_id("");
      pause(stop, impl_->backoff(failures++));
    } catch (const std::exception&) {
      pause(stop, impl_->backoff(failures++));
    }
  }
}

}  // namespace tn::client
