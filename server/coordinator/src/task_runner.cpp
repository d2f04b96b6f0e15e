#include "task_runner.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "distributed/process_group.h"
#include "federated/contribution.h"
#include "federated/errors.h"
#include "json_log.h"
#include "model_versions.h"
#include "request_verifier.h"
#include "secure_exchange.h"
#include "update_inbox.h"

namespace tn::server {

namespace {

using federated::DeviceId;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a loop waiting for devices looks at its deadline (a stop or a drain wakes it at once).
constexpr milliseconds kIdlePoll{250};
// The model is broadcast in pieces of this size (DataPlane.broadcast_piece_bytes), each copied
// out of the tensors into one staging buffer: the hub holds the model once plus one piece.
constexpr uint64_t kBroadcastPieceBytes = uint64_t{64} << 20;
// A wait for devices is logged once it has lasted this long (rounds that follow each other while
// devices check in again are not), then when its counts change, at most this often,
constexpr milliseconds kWaitLogAfter{1'000};
constexpr milliseconds kWaitLogChangedEvery{5'000};
// and this often while they do not.
constexpr milliseconds kWaitLogRepeat{60'000};

milliseconds until(SteadyClock::time_point when) {
  return std::max(std::chrono::duration_cast<milliseconds>(when - SteadyClock::now()), milliseconds(1));
}

// The strategy's fit configuration as the protocol's typed values; objects, arrays and null,
// which ConfigValue cannot hold, travel as their JSON text.
void put_fit_config(const nlohmann::json& config, v1::RoundConfig& round) {
  for (const auto& [key, value] : config.items()) {
    v1::ConfigValue& out = (*round.mutable_fit_config())[key];
    if (value.is_boolean())
      out.set_bool_value(value.get<bool>());
    else if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
      out.set_double_value(value.get<double>());
    else if (value.is_number_integer())
      out.set_int_value(value.get<int64_t>());
    else if (value.is_number_float())
      out.set_double_value(value.get<double>());
    else if (value.is_string())
      out.set_string_value(value.get<std::string>());
    else
      out.set_string_value(value.dump());
  }
}

// The devices behind the ranks a failed rendezvous names ("rank(s) 2, 5 never connected", as
// distributed/ words it), so that the operator learns which devices to look at.
std::string absent_devices(const std::string& message, const std::vector<DeviceId>& selected) {
  const std::string marker = "rank(s) ";
  const size_t at = message.find(marker);
  if (at == std::string::npos) return {};
  std::string named;
  const char* position = message.data() + at + marker.size();
  const char* end = message.data() + message.size();
  for (;;) {
    size_t rank = 0;
    auto parsed = std::from_chars(position, end, rank);
    if (parsed.ec != std::errc()) break;
    if (rank >= 1 && rank <= selected.size())
      named += (named.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + " = device " +
               selected[rank - 1];
    position = parsed.ptr;
    if (end - position < 2 || std::memcmp(position, ", ", 2) != 0) break;
    position += 2;
  }
  return named;
}

// What round_started and round_waiting log of a task's selection parameters: how many devices a
// round needs before it starts (the larger of min_available and min_updates), and why.
nlohmann::json selection_fields(const RoundParams& params, size_t available, size_t eligible) {
  const size_t needed = params.devices_to_wait_for();
  return {{"available", available},
          {"eligible", eligible},
          {"devices_per_round", params.devices_per_round},
          {"min_available", params.min_available_devices},
          {"min_updates", params.min_updates},
          {"needed", needed},
          {"over_selection", params.task_config("", {}).selection.over_selection}};
}

// Where the number of devices a round needs comes from.
std::string needed_words(const RoundParams& params) {
  return "the larger of min_available " + std::to_string(params.min_available_devices) + " and min_updates " +
         std::to_string(params.min_updates);
}

// What a round waits for: the round_waiting line's and the ROUND_WAITING_FOR_DEVICES event's why.
// `on_data_plane`: of the devices not eligible, those that asked for the data plane, which a
// secure task's rounds do not have when the coordinator runs without one (run_round).
std::string waiting_words(const RoundParams& params, size_t available, size_t eligible,
                          size_t on_data_plane) {
  std::string why = "waiting for " + std::to_string(params.devices_to_wait_for()) + " eligible devices (" +
                    needed_words(params) + "): " + std::to_string(eligible) + " eligible of " +
                    std::to_string(available) + " waiting";
  if (available > eligible + on_data_plane)
    why += " (" + std::to_string(available - eligible - on_data_plane) +
           " lack the task's required labels or memory)";
  if (on_data_plane > 0)
    why +=
        "; " + std::to_string(on_data_plane) +
        " asked for the hub's data plane (round_transport data-plane), which this coordinator runs without "
        "(data_plane.enabled false): a secure aggregation task's masked words then go over gRPC alone, and a "
        "device takes part only when it checks in with round_transport grpc (torchnative-device "
        "--round-transport grpc)";
  return why;
}

// The round_started line's account of the selection: the fields above, how many were selected,
// the rule that decided and the sentence that says it.
nlohmann::json started_fields(const RoundParams& params, size_t available, size_t eligible, size_t selected) {
  nlohmann::json fields = selection_fields(params, available, eligible);
  fields["selected"] = selected;
  const std::string head = "started with " + std::to_string(selected) + " of " +
                           std::to_string(params.devices_per_round) +
                           " requested: " + std::to_string(eligible) + " eligible device" +
                           (eligible == 1 ? " was" : "s were") + " waiting";
  if (selected >= params.devices_per_round) {
    fields["rule"] = "devices_per_round";
    fields["why"] =
        head + (eligible > selected ? ", " + std::to_string(selected) +
                                          " chosen among them at random (seeded per task and round)"
                                    : ", all selected");
  } else {
    fields["rule"] = "needed_waiting";
    fields["why"] =
        head + " and " + std::to_string(params.devices_to_wait_for()) + " were needed (" +
        needed_words(params) +
        "); a round starts as soon as the needed devices wait and does not wait for devices_per_round"
        " (min_available " +
        std::to_string(params.devices_per_round) + " would make it)";
  }
  // How the round ends: min_updates decides whether it completes, never when it closes, since
  // nothing beyond devices_per_round is selected (over_selection 1).
  fields["closes"] = "closes once each of the " + std::to_string(selected) +
                     " selected devices has contributed or been given up (silent past the liveness "
                     "window), or at its deadline, round_timeout_ms " +
                     std::to_string(params.round_timeout.count()) +
                     " after it started; completed with at least min_updates " +
                     std::to_string(params.min_updates) +
                     " contributions, abandoned with fewer (and retried from the same model version); no "
                     "device beyond devices_per_round is selected (over_selection 1), so it never closes "
                     "early on min_updates";
  return fields;
}

std::string join_ids(const std::vector<DeviceId>& ids) {
  std::string text;
  for (const DeviceId& id : ids) text += (text.empty() ? "" : ", ") + id;
  return text.empty() ? "none" : text;
}

// Bytes [offset, offset + length) of the model's tensors laid back to back in table order: what
// the broadcast carries and what devices check against the ModelHeader (and its digest) their
// round configuration names.
void copy_model_bytes(const federated::Model& model, uint64_t offset, uint64_t length, uint8_t* out) {
  uint64_t start = 0;  // of the tensor in the concatenation
  for (const federated::NamedTensor& tensor : model.tensors) {
    const uint64_t end = start + tensor.nbytes;
    if (end > offset && start < offset + length) {
      const uint64_t from = std::max(offset, start), to = std::min(offset + length, end);
      std::memcpy(out + (from - offset), reinterpret_cast<const uint8_t*>(tensor.data.get()) + (from - start),
                  to - from);
    }
    start = end;
  }
}

}  // namespace

struct TaskRunner::Hosted {
  std::vector<DeviceId> contributors;  // sorted: ranks ascend with device ids
  // When the round may be aggregated, one of these, as the strategy's contribution kind says.
  std::optional<federated::WeightedSumReader> sum;
  std::optional<federated::UpdatesReader> updates;
  std::string abandon_reason;  // when it may not
  // Central DP: what clipping found, and the round's secret noise seed (never stored).
  std::optional<CentralDp::Clipped> clipped;
  federated::secagg::Bytes32 noise_seed{};
  // Once the reduce is over: its phases' wall times and bytes for the round_data_plane log line,
  // and the time the aggregation spends folding or reading the contributions as it reads them.
  nlohmann::json data_plane;
  std::shared_ptr<double> fold_seconds = std::make_shared<double>(0);

  static Hosted abandoned(std::string reason) {
    Hosted hosted;
    hosted.abandon_reason = std::move(reason);
    return hosted;
  }
};

TaskRunner::TaskRunner(Services services, federated::Task task, RoundParams params, uint64_t rounds_planned,
                       uint64_t next_round_id, std::optional<double> clip_norm)
    : services_(services),
      task_(std::move(task)),
      params_(std::move(params)),
      rounds_planned_(rounds_planned),
      next_round_id_(next_round_id) {
  if (const std::optional<CentralDpParams> charged = params_.charged_dp()) {
    dp_.emplace(*charged, params_.devices_per_round, task_.model_version(), clip_norm);
    services_.metrics.set_task_epsilon(task_.name(), dp_->spent().epsilon());
  }
  thread_ = std::thread([this] { run(); });
}

TaskRunner::~TaskRunner() {
  drain();
  join();
}

void TaskRunner::stop(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!stop_reason_) stop_reason_ = reason;
  }
  services_.board.wake();  // a loop waiting for devices stops now, not at its next look
}

void TaskRunner::drain() {
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
  }
  services_.board.wake();
}

void TaskRunner::join() {
  if (thread_.joinable()) thread_.join();
}

TaskRunner::Phase TaskRunner::phase() const {
  std::lock_guard lock(mutex_);
  return phase_;
}

void TaskRunner::set_phase(v1::RoundState state, uint64_t round_id) {
  std::lock_guard lock(mutex_);
  phase_ = {state, round_id, unix_now_ms()};
}

bool TaskRunner::halted(std::string* stop_reason) const {
  std::lock_guard lock(mutex_);
  if (stop_reason && stop_reason_) *stop_reason = *stop_reason_;
  return draining_ || stop_reason_.has_value();
}

void TaskRunner::run() {
  const std::string& id = task_.name();
  log_event(LogLevel::Info, "task_running",
            {{"task", id}, {"model_version", task_.model_version()}, {"rounds_planned", rounds_planned_}});
  try {
    for (;;) {
      std::string stop_reason;
      if (halted(&stop_reason)) {
        if (!stop_reason.empty()) end_task(TaskState::Stopped, stop_reason);
        break;
      }
      if (params_.deadline_unix_ms != 0 && unix_now_ms() >= int64_t(params_.deadline_unix_ms)) {
        end_task(TaskState::Stopped, "the task's deadline (" + std::to_string(params_.deadline_unix_ms) +
                                         " ms since the epoch) passed with " +
                                         std::to_string(task_.model_version()) + " of " +
                                         std::to_string(rounds_planned_) + " rounds completed");
        break;
      }
      if (std::optional<std::string> over_budget = dp_ ? dp_->budget_refusal() : std::nullopt) {
        end_task(TaskState::Stopped, *over_budget);
        break;
      }
      if (!run_round()) break;
    }
  } catch (const std::exception& error) {
    // Nothing above should throw; if something does, the task stops here and the state store
    // still holds its last committed round for the next start.
    log_event(LogLevel::Error, "task_loop_failed", {{"task", id}, {"error", error.what()}});
  }
  set_phase(v1::ROUND_STATE_UNSPECIFIED, 0);
  finished_ = true;
}

bool TaskRunner::run_round() {
  // Of the waiting devices, those that asked for ROUND_TRANSPORT_GRPC (all of them when the data
  // plane is off).
  std::set<DeviceId> over_grpc;
  size_t available = 0, eligible_count = 0, on_data_plane = 0;  // when the board was last looked at
  std::vector<DeviceId> selected =
      services_.board.reserve([&](const std::vector<DeviceBoard::Waiting>& waiting) {
        std::vector<DeviceId> eligible;
        available = waiting.size();
        on_data_plane = 0;
        for (const DeviceBoard::Waiting& device : waiting) {
          if (!params_.eligible(device.metadata)) continue;
          // A secure round's masked words go into the hub's reduce for the devices that asked for
          // the data plane (host_secure_round). Without a data plane, such a device is not put on
          // gRPC unasked: it is not selected, and the waiting line says why (a device handed such a
          // round anyway refuses it by name: client/src/device.cpp, check_secure_transport).
          if (params_.secure_aggregation && device.transport != v1::ROUND_TRANSPORT_GRPC &&
              !services_.config.data_plane_enabled) {
            ++on_data_plane;
            continue;
          }
          eligible.push_back(device.id);
          if (device.transport == v1::ROUND_TRANSPORT_GRPC || !services_.config.data_plane_enabled)
            over_grpc.insert(device.id);
        }
        eligible_count = eligible.size();
        if (eligible.size() < params_.devices_to_wait_for()) return std::vector<DeviceId>{};
        return task_.start_round(std::move(eligible)).devices;  // empty when it selected nobody
      });
  if (selected.empty()) {
    note_waiting(available, eligible_count, on_data_plane);
    log_waiting(available, eligible_count, on_data_plane);
    // The board's lock is taken before the runner's (halted), never the other way round.
    services_.board.wait_for_arrival(kIdlePoll, [this] { return halted(); });
    return true;
  }
  waiting_since_.reset();
  wait_logged_at_.reset();
  set_phase(v1::ROUND_STATE_UNSPECIFIED, 0);  // the stored round says TRAINING
  const federated::RoundPlan plan = task_.current_round()->plan();
  next_round_id_ = plan.round_id + 1;
  const auto started = SteadyClock::now();
  const int64_t deadline_unix_ms = unix_now_ms() + until(plan.deadline).count();
  const std::string& id = task_.name();
  try {
    services_.state.with([&](StateStore& store) {
      return store.begin_round(id, {plan.round_id, plan.model_version, plan.selected, deadline_unix_ms});
    });
  } catch (const std::exception& error) {
    services_.board.release(selected);
    log_event(LogLevel::Error, "round_not_recorded",
              {{"task", id}, {"round", plan.round_id}, {"error", error.what()}});
    return false;  // the store and the task disagree: resume from the store at the next start
  }
  std::vector<EventLog::Draft> events{{v1::EVENT_KIND_ROUND_STARTED, id, plan.round_id, "",
                                       std::to_string(selected.size()) +
                                           " devices selected to train model version " +
                                           std::to_string(plan.model_version) + "; deadline " +
                                           std::to_string(deadline_unix_ms) + " ms since the epoch",
                                       started_fields(params_, available, eligible_count, selected.size())}};
  for (const DeviceId& device : selected)
    events.push_back({v1::EVENT_KIND_DEVICE_SELECTED, id, plan.round_id, device, ""});
  services_.events.publish(events);  // one sync for the round's start, however many devices
  Hosted hosted;
  try {
    std::erase_if(over_grpc, [&](const DeviceId& device) {
      return !std::binary_search(plan.selected.begin(), plan.selected.end(), device);
    });
    hosted = host_round(plan, deadline_unix_ms, over_grpc);
  } catch (const std::exception& error) {
    hosted = Hosted::abandoned(std::string("the coordinator could not host the round: ") + error.what());
  }
  services_.board.release(selected);
  return close_round(plan, std::move(hosted), started);
}

namespace {

// Closes a round's gRPC inbox, however hosting ends: SubmitUpdate then finds it no more.
struct InboxCloser {
  UpdateInboxes& inboxes;
  const std::shared_ptr<UpdateInbox>& inbox;
  const std::string& task;
  uint64_t round;
  ~InboxCloser() {
    if (!inbox) return;
    inbox->close();
    inboxes.remove(task, round);
  }
};

}  // namespace

// What one round's phases hand on to the next while it is hosted; it lives as long as host_round.
struct TaskRunner::Round {
  using Source = std::function<void(uint64_t first, uint64_t count, double* out)>;

  Round(const federated::RoundPlan& plan, const std::set<DeviceId>& over_grpc, const std::string& task,
        const federated::Model& model, federated::ContributionKind kind, const Services& services)
      : plan(plan),
        over_grpc(over_grpc),
        task(task),
        model(model),
        join_by(std::min(SteadyClock::now() + services.config.join_window, plan.deadline)),
        version(model_version_name(task, plan.model_version)),
        chunker(model, version, services.config.transfer_limits),
        kind(kind),
        layout(model.spec(), kind),
        look_every(std::clamp<milliseconds>(services.config.heartbeat_interval, milliseconds(50),
                                            std::chrono::seconds(1))),
        inbox_closer{services.inboxes, inbox, task, plan.round_id} {}

  // Each phase's wall time goes into the round_data_plane log line (the benchmark reads it).
  double seconds_of_phase() {
    const auto now = SteadyClock::now();
    return std::chrono::duration<double>(now - std::exchange(phase_start, now)).count();
  }
  void log_dropped(const DeviceId& device) const {
    log_event(LogLevel::Warning, "device_dropped",
              {{"task", task},
               {"round", plan.round_id},
               {"device", device},
               {"reason", "no heartbeat within the liveness window"}});
  }

  const federated::RoundPlan& plan;
  const std::set<DeviceId>& over_grpc;
  const std::string& task;
  const federated::Model& model;
  const SteadyClock::time_point join_by;
  const std::string version;
  const proto::ModelChunker chunker;
  const federated::ContributionKind kind;
  const federated::ContributionLayout layout;
  const milliseconds look_every;  // how often a wait for devices looks for silent ones
  v1::RoundConfig common;         // what every selected device is told
  std::map<DeviceId, v1::RoundConfig> configs;
  std::shared_ptr<UpdateInbox> inbox;  // when some devices take part over gRPC
  InboxCloser inbox_closer;
  std::vector<DeviceId> on_plane;  // the data plane's ranks 1..k, in device-id order
  std::shared_ptr<dist::Store> store;
  std::shared_ptr<dist::Store> master;
  int world = 1;
  SteadyClock::time_point phase_start;
  Hosted hosted;
  std::vector<DeviceId> missing;
  std::string refused;  // device: why, ...
  // Per contributor, in device-id order once sorted: where its contribution is read from.
  std::vector<std::pair<DeviceId, Source>> sources;
  std::shared_ptr<dist::DeferredReduction> deferred;  // the data plane's, when it had contributors
};

TaskRunner::Hosted TaskRunner::host_round(const federated::RoundPlan& plan, int64_t deadline_unix_ms,
                                          const std::set<DeviceId>& over_grpc) {
  const federated::Model& model = task_.global_model();
  Round round(plan, over_grpc, task_.name(), model, federated::contribution_kind_for(task_.strategy()),
              services_);
  round.common.set_task_id(round.task);
  round.common.set_round_id(plan.round_id);
  round.common.set_model_version(round.version);
  round.common.set_model_blake2b_256(round.chunker.header().blake2b_256());
  put_fit_config(task_.fit_config(), round.common);
  round.common.set_deadline_unix_ms(uint64_t(deadline_unix_ms));
  round.phase_start = SteadyClock::now();
  if (params_.secure_aggregation) return host_secure_round(round);
  open_grpc_inbox(round);
  open_data_plane_store(round);
  services_.board.assign(round.configs);

  round.hosted.data_plane = {{"task", round.task},
                             {"round", plan.round_id},
                             {"devices", plan.selected.size()},
                             {"model_bytes", model.total_bytes()},
                             {"grpc_devices", over_grpc.size()}};
  if (!round.on_plane.empty())
    if (std::optional<std::string> failure =
            host_data_plane(round, [&](dist::ProcessGroup& group, const WaitForWork& wait) {
              return reduce_contributions(round, group, wait);
            }))
      return Hosted::abandoned(*failure);
  const size_t plane_contributors = round.sources.size();
  collect_grpc_updates(round);
  return aggregate(round, plane_contributors);
}

void TaskRunner::open_grpc_inbox(Round& round) {
  // The gRPC devices fetch the model and submit their updates by RPC; SubmitUpdate finds this
  // inbox by task and round, and finds it no more once the round stops taking updates.
  if (round.over_grpc.empty()) return;
  const CoordinatorConfig& config = services_.config;
  round.inbox = std::make_shared<UpdateInbox>(
      round.layout, round.model, round.chunker.header(), round.over_grpc, round.plan.deadline,
      UpdateInbox::Options{config.spool_bytes, config.spool_directory});
  services_.inboxes.open(round.task, round.plan.round_id, round.inbox);
  for (const DeviceId& device : round.over_grpc) round.configs[device] = round.common;
}

void TaskRunner::open_data_plane_store(Round& round) {
  // The others are the data plane's ranks 1..k, in device-id order.
  for (const DeviceId& device : round.plan.selected)
    if (!round.over_grpc.contains(device)) round.on_plane.push_back(device);
  if (round.on_plane.empty()) return;
  // A fresh store per attempt on a free port, and a prefix naming the attempt, so that a device
  // still holding an earlier attempt's configuration can never join this one.
  const CoordinatorConfig& config = services_.config;
  round.world = int(round.on_plane.size()) + 1;
  dist::TCPStoreOptions store_options;
  store_options.host = config.data_plane_host;
  store_options.is_master = true;
  store_options.wait_for_workers = false;
  store_options.timeout = until(round.join_by);
  round.master = dist::make_tcp_store(store_options);
  const std::string prefix = "torchnative/" + round.task + "/round/" + std::to_string(round.plan.round_id);
  round.store = dist::make_prefix_store(prefix, round.master);
  v1::DataPlane& plane = *round.common.mutable_data_plane();
  plane.set_store_host(config.data_plane_host);
  plane.set_store_port(dist::tcp_store_port(*round.master));
  plane.set_store_prefix(prefix);
  plane.set_world_size(uint32_t(round.world));
  plane.set_join_deadline_unix_ms(uint64_t(unix_now_ms() + until(round.join_by).count()));
  *plane.mutable_model() = round.chunker.header();
  plane.set_broadcast_piece_bytes(kBroadcastPieceBytes);
  plane.set_contribution(round.kind == federated::ContributionKind::Values ? v1::CONTRIBUTION_KIND_VALUES
                                                                           : v1::CONTRIBUTION_KIND_WEIGHTED);
  for (size_t i = 0; i < round.on_plane.size(); ++i) {
    v1::RoundConfig& device_round = round.configs[round.on_plane[i]] = round.common;
    device_round.mutable_data_plane()->set_rank(uint32_t(i + 1));
  }
}

std::optional<std::string> TaskRunner::host_data_plane(Round& round, const OnDataPlane& then) {
  const CoordinatorConfig& config = services_.config;
  dist::ProcessGroupOptions options;
  options.host = config.data_plane_host;
  options.topology = dist::Topology::Star;
  options.hub = 0;
  options.timeout = until(round.join_by);
  options.deadline_reduce_spool_bytes = config.spool_bytes;
  options.deadline_reduce_spool_directory = config.spool_directory;
  std::unique_ptr<dist::ProcessGroup> group;
  try {
    group = std::make_unique<dist::ProcessGroup>(round.store, 0, round.world, options);
  } catch (const dist::DistError& error) {
    const std::string absent = absent_devices(error.what(), round.on_plane);
    return "not every selected device joined the round's data plane in time: " + std::string(error.what()) +
           (absent.empty() ? "" : " (" + absent + ")");
  }
  round.hosted.data_plane["join_seconds"] = round.seconds_of_phase();

  // A device whose heartbeats stop while its connections stay open (frozen, or cut off without
  // a reset) is dropped from the data plane once the board counts it gone, while the model goes
  // out or the contributions come in: the broadcast carries on without it and the reduce
  // settles it as missing, so the round ends with the devices still there instead of at its
  // deadline. One whose contribution landed whole keeps it.
  std::vector<bool> looked_at(round.on_plane.size());
  const WaitForWork wait_dropping_silent_devices = [&](dist::Work& work) {
    while (!work.wait(round.look_every)) {
      for (size_t i = 0; i < round.on_plane.size(); ++i) {
        if (looked_at[i] || services_.board.presence(round.on_plane[i]).alive) continue;
        looked_at[i] = true;  // once: a device that finished and left is not dropped
        if (group->disconnect(int(i) + 1, "(device " + round.on_plane[i] +
                                              ") sent no heartbeat within the coordinator's liveness window"))
          round.log_dropped(round.on_plane[i]);
      }
    }
  };
  if (std::optional<std::string> failure = broadcast_model(round, *group, wait_dropping_silent_devices))
    return failure;
  return then(*group, wait_dropping_silent_devices);
}

std::optional<std::string> TaskRunner::broadcast_model(Round& round, dist::ProcessGroup& group,
                                                       const WaitForWork& wait) {
  const uint64_t model_bytes = round.model.total_bytes();
  auto staging = std::make_shared<std::vector<uint8_t>>(std::min(kBroadcastPieceBytes, model_bytes));
  // Devices lost while the model went out (dead, or dropped above): the round goes on without
  // them, and the reduce lists them as missing.
  std::set<DeviceId> lost_in_broadcast;
  try {
    uint64_t offset = 0;
    do {  // once at least, as devices receive an empty model
      const uint64_t length = std::min(kBroadcastPieceBytes, model_bytes - offset);
      copy_model_bytes(round.model, offset, length, staging->data());
      // The wait also keeps the staging buffer untouched until every spoke has its piece.
      auto lost = std::make_shared<std::vector<int>>();
      wait(
          *group.broadcast_to_reachable({staging->data(), ScalarType::Byte, int64_t(length), staging}, lost));
      for (int rank : *lost) lost_in_broadcast.insert(round.on_plane[size_t(rank) - 1]);
      offset += length;
    } while (offset < model_bytes);
  } catch (const dist::DistError& error) {
    return std::string("the model broadcast failed: ") + error.what();
  }
  if (!lost_in_broadcast.empty())
    log_event(LogLevel::Warning, "devices_lost_in_broadcast",
              {{"task", round.task},
               {"round", round.plan.round_id},
               {"devices", std::vector<DeviceId>(lost_in_broadcast.begin(), lost_in_broadcast.end())}});
  services_.metrics.add_bytes_broadcast(model_bytes * (round.on_plane.size() - lost_in_broadcast.size()));
  staging.reset();
  round.hosted.data_plane["broadcast_seconds"] = round.seconds_of_phase();
  return std::nullopt;
}

std::optional<std::string> TaskRunner::reduce_contributions(Round& round, dist::ProcessGroup& group,
                                                            const WaitForWork& wait) {
  // The hub never holds the float64 sum, twice a float32 model, nor the contributions as whole
  // models: it keeps them as they land (in memory, or spooled to disk past
  // deadline_reduce_spool_bytes) and the strategy reads them a piece at a time, folded into the
  // sum (WeightedSum: the hub contributes nothing itself, so the sum has exactly the bits of
  // sum_i n_i x_i in device order) or each contribution apart (Values).
  auto reduced = std::make_shared<dist::DeadlineReduceResult>();
  // Every contribution is checked segment by segment as it lands, before it can count: a NaN,
  // an infinity or a bad example count leaves that device out, named, and the round goes on.
  const federated::ContributionLayout& layout = round.layout;
  const federated::UpdateLimits& limits = services_.config.update_limits;
  dist::ContributionCheck check = [&layout, &limits](int, uint64_t offset, const void* data, uint64_t bytes) {
    return layout.check_part(offset / sizeof(double),
                             {static_cast<const double*>(data), size_t(bytes / sizeof(double))}, limits);
  };
  try {
    wait(*group.deadline_reduce_deferred(ScalarType::Double, int64_t(layout.elements()), 0,
                                         dist::ReduceOp::Sum, until(round.plan.deadline), reduced, check));
  } catch (const dist::DistError& error) {
    return std::string("the reduce of the contributions failed: ") + error.what();
  }
  std::vector<EventLog::Draft> events;  // stored in one transaction, however many devices
  for (int rank : reduced->contributors)
    if (rank != 0) {
      const DeviceId& device = round.on_plane[size_t(rank) - 1];
      round.sources.emplace_back(
          device, [deferred = reduced->deferred, rank](uint64_t first, uint64_t count, double* out) {
            deferred->read(rank, first, count, out);
          });
      events.push_back({v1::EVENT_KIND_UPDATE_RECEIVED,
                        round.task,
                        round.plan.round_id,
                        device,
                        "over the data plane",
                        {{"transport", "data-plane"}}});
    }
  for (int rank : reduced->missing) round.missing.push_back(round.on_plane[size_t(rank) - 1]);
  for (const auto& [device, why] : note_refused(round, *reduced, events))
    round.refused += (round.refused.empty() ? "" : "; ") + device + ": " + why;
  if (!events.empty()) services_.events.publish(events);
  round.hosted.data_plane["reduce_seconds"] = round.seconds_of_phase();
  round.hosted.data_plane["spooled_bytes"] = reduced->spooled_bytes;
  round.deferred = reduced->deferred;
  return std::nullopt;
}

std::map<DeviceId, std::string> TaskRunner::note_refused(const Round& round,
                                                         const dist::DeadlineReduceResult& reduced,
                                                         std::vector<EventLog::Draft>& events) {
  std::map<DeviceId, std::string> refused;
  for (const auto& [rank, why] : reduced.refused) {
    const DeviceId& device = round.on_plane[size_t(rank) - 1];
    refused[device] = why;
    services_.metrics.count_refusal("contribution_refused");
    events.push_back({v1::EVENT_KIND_UPDATE_REFUSED,
                      round.task,
                      round.plan.round_id,
                      device,
                      why,
                      {{"transport", "data-plane"}}});
  }
  return refused;
}

void TaskRunner::collect_grpc_updates(Round& round) {
  if (!round.inbox) return;
  // A gRPC device that falls silent is given up as a data-plane one is dropped, so the round
  // ends with the devices still there instead of at its deadline.
  round.inbox->wait([&](const DeviceId& device) { return !services_.board.presence(device).alive; },
                    [&round](const DeviceId& device) { round.log_dropped(device); }, round.look_every);
  const std::vector<DeviceId> delivered = round.inbox->close();
  for (const DeviceId& device : delivered)
    round.sources.emplace_back(device,
                               [inbox = round.inbox, device](uint64_t first, uint64_t count, double* out) {
                                 inbox->read(device, first, count, out);
                               });
  std::set_difference(round.over_grpc.begin(), round.over_grpc.end(), delivered.begin(), delivered.end(),
                      std::back_inserter(round.missing));
  round.hosted.data_plane["grpc_wait_seconds"] = round.seconds_of_phase();
  round.hosted.data_plane["grpc_spooled_bytes"] = round.inbox->spooled_bytes();
}

namespace {

// A secure round's masked input goes in SecAggMaskedInput messages of as many words as a model
// chunk has bytes (transfer_limits.max_chunk_bytes, 1 MiB by default): the configuration already
// checks that such a chunk fits a message with its envelope.
uint32_t secure_words_per_message(const proto::TransferLimits& limits) {
  return uint32_t(std::clamp<size_t>(limits.max_chunk_bytes / sizeof(uint32_t), 1, UINT32_MAX));
}

// The round's name in its SecAgg+ signatures and envelopes, on both sides (SecAggRound.session).
std::string secure_session_name(const std::string& task, uint64_t round_id) {
  return task + "/" + std::to_string(round_id);
}

// Removes a secure round's exchange from SecAggStage's reach, however hosting ends.
struct ExchangeCloser {
  SecureExchanges& exchanges;
  const std::string& task;
  uint64_t round;
  ~ExchangeCloser() { exchanges.remove(task, round); }
};

}  // namespace

std::vector<v1::SecAggRound> TaskRunner::secure_round_configs(
    const Round& round, const std::map<DeviceId, std::string>& identities) const {
  const SecureAggregationParams& params = *params_.secure_aggregation;
  const federated::secagg::FixedPointParameters& fixed = params.fixed_point;
  v1::SecAggRound common;
  common.set_session(secure_session_name(round.task, round.plan.round_id));
  common.set_threshold(params.graph().threshold);
  common.set_bits(fixed.bits);
  common.set_clip_range(fixed.range);
  if (fixed.l2_bound) common.set_l2_bound(*fixed.l2_bound);
  common.set_levels(fixed.levels);
  common.set_max_weight(fixed.max_weight);
  common.set_max_devices(fixed.max_devices);
  common.set_words_per_message(secure_words_per_message(services_.config.transfer_limits));
  common.set_stage_timeout_ms(uint32_t(params_.round_timeout.count()));
  if (params.distributed_dp) {
    common.set_noise_multiplier(params.distributed_dp->noise_multiplier);
    common.set_noise_min_devices(params_.min_updates);
  }
  std::vector<v1::SecAggRound> configs(identities.size(), common);
  for (uint32_t index = 0; index < configs.size(); ++index) configs[index].set_device_index(index);
  return configs;
}

TaskRunner::Hosted TaskRunner::host_secure_round(Round& round) {
  const std::map<DeviceId, std::string> identities = services_.state.with([&](StateStore& store) {
    std::map<DeviceId, std::string> keys;
    for (const DeviceId& device : round.plan.selected) keys[device] = store.device(device).value().public_key;
    return keys;
  });
  auto secure = std::make_unique<SecureRound>(*params_.secure_aggregation,
                                              secure_session_name(round.task, round.plan.round_id),
                                              identities, round.layout);
  const std::vector<v1::SecAggRound> configs = secure_round_configs(round, identities);
  for (const DeviceId& device : round.over_grpc) round.configs[device] = round.common;  // no data plane
  open_data_plane_store(round);  // for the devices that asked for it, if any
  auto exchange = std::make_shared<SecureExchange>(
      std::move(secure), secure_words_per_message(services_.config.transfer_limits),
      std::set<DeviceId>(round.on_plane.begin(), round.on_plane.end()));
  services_.secure_exchanges.open(round.task, round.plan.round_id, exchange);
  const ExchangeCloser closer{services_.secure_exchanges, round.task, round.plan.round_id};
  for (size_t index = 0; index < configs.size(); ++index) {
    v1::RoundConfig& config = round.configs.at(exchange->round().devices()[index]);
    if (config.has_data_plane())
      config.mutable_data_plane()->set_contribution(v1::CONTRIBUTION_KIND_MASKED_WORDS);
    *config.mutable_secure_aggregation() = configs[index];
  }
  services_.board.assign(round.configs);
  round.hosted.data_plane = {{"task", round.task},
                             {"round", round.plan.round_id},
                             {"devices", round.plan.selected.size()},
                             {"model_bytes", round.model.total_bytes()},
                             {"secure_aggregation", true},
                             {"data_plane_devices", round.on_plane.size()}};
  std::optional<std::string> failure;
  if (round.on_plane.empty())
    failure = run_secure_stages(round, *exchange, {});
  else
    failure = host_data_plane(round, [&](dist::ProcessGroup& group, const WaitForWork& wait) {
      return run_secure_stages(round, *exchange, [&](std::chrono::steady_clock::time_point deadline) {
        return reduce_masked_inputs(round, group, wait, *exchange, deadline);
      });
    });
  if (failure) return Hosted::abandoned(*failure);
  round.hosted.sum = exchange->weighted_sum(round.model);
  return std::move(round.hosted);
}

std::optional<std::string> TaskRunner::run_secure_stages(Round& round, SecureExchange& exchange,
                                                         const PlaneSum& plane_sum) {
  // Training ends with the keys' advertisement, by the round's deadline; each later stage is
  // cryptography and messages alone, and has round_timeout of its own from when it opens.
  SteadyClock::time_point deadline = round.plan.deadline;
  // Given up: silent past the liveness window, or back in a CheckIn (it left the round: a stage it
  // could not go through, its call refused).
  const auto gone = [&](const DeviceId& device) {
    const DeviceBoard::Presence presence = services_.board.presence(device);
    return !presence.alive || presence.checking_in;
  };
  for (int stage = 0; stage < 5; ++stage) {
    const std::string name = exchange.stage_name();
    if (name == "masked input" && plane_sum)
      if (std::optional<std::string> failure = plane_sum(deadline)) return failure;
    for (const DeviceId& device : exchange.wait(deadline, gone, round.look_every))
      log_event(LogLevel::Warning, "device_dropped",
                {{"task", round.task},
                 {"round", round.plan.round_id},
                 {"device", device},
                 {"stage", name},
                 {"reason", "silent past the liveness window, or back in a CheckIn: it left the round"}});
    try {
      exchange.close_stage();
    } catch (const federated::Refused& error) {
      return "at its " + name + " stage: " + error.what();
    }
    round.hosted.data_plane[name + " seconds"] = round.seconds_of_phase();
    deadline = SteadyClock::now() + params_.round_timeout;
    // The masked inputs are in and their senders are the sum's contributors: fewer than
    // min_updates abandon the round before anything is unmasked, so that not even the coordinator
    // learns a sum holding fewer noise shares than distributed DP's calibration (or fewer inputs
    // than the task requires).
    if (name != "masked input") continue;
    round.hosted.contributors = exchange.contributors();
    if (round.hosted.contributors.size() < round.plan.min_updates)
      return "at its masked input stage: secure aggregation: " +
             std::to_string(round.hosted.contributors.size()) +
             " devices sent their masked inputs, fewer than min_updates " +
             std::to_string(round.plan.min_updates) + "; nothing was unmasked";
  }
  return std::nullopt;
}

std::optional<std::string> TaskRunner::reduce_masked_inputs(Round& round, dist::ProcessGroup& group,
                                                            const WaitForWork& wait, SecureExchange& exchange,
                                                            SteadyClock::time_point deadline) {
  // A device of the data plane already out of the round (it did not advertise or share its keys
  // in time, or a stage refused it) is disconnected: the reduce neither waits for it nor adds its
  // words, which no one could unmask.
  const std::set<DeviceId> in_stage = exchange.in_stage();
  for (size_t i = 0; i < round.on_plane.size(); ++i)
    if (!in_stage.contains(round.on_plane[i]))
      group.disconnect(int(i) + 1,
                       "(device " + round.on_plane[i] + ") left the secure round before its masked input");
  // Each word is checked below 2^bits as it lands, as a masked input by SecAggStage is (add_modular):
  // a larger one is no word of the protocol (the sum is taken modulo 2^bits, so it could not wrap
  // into the others', but a device sending it is not following the round). A device with one is
  // left out of the sum, named; one of another length is refused as it announces itself (a
  // collective mismatch).
  const unsigned bits = params_.secure_aggregation->fixed_point.bits;
  const dist::ContributionCheck check = [bits](int, uint64_t offset, const void* data,
                                               uint64_t bytes) -> std::optional<std::string> {
    const auto* words = static_cast<const uint32_t*>(data);
    for (uint64_t i = 0; bits < 32 && i < bytes / sizeof(uint32_t); ++i)
      if (words[i] >> bits)
        return "masked input word " + std::to_string(offset / sizeof(uint32_t) + i) + " is " +
               std::to_string(words[i]) + ", not below 2^" + std::to_string(bits);
    return std::nullopt;
  };
  auto reduced = std::make_shared<dist::DeadlineReduceResult>();
  std::vector<uint32_t> sum(round.layout.elements());
  try {
    wait(*group.deadline_reduce_deferred(ScalarType::Int, int64_t(sum.size()), 0, dist::ReduceOp::Sum,
                                         until(deadline), reduced, check));
    // The ranks the reduce lists as contributors are exactly those whose words the fold adds.
    if (std::any_of(reduced->contributors.begin(), reduced->contributors.end(),
                    [](int rank) { return rank != 0; }))
      reduced->deferred->fold(0, sum.size(), sum.data());
  } catch (const std::exception& error) {
    return std::string("at its masked input stage: the hub's reduce of the masked inputs failed: ") +
           error.what();
  }
  std::set<DeviceId> contributors;
  for (int rank : reduced->contributors)
    if (rank != 0) contributors.insert(round.on_plane[size_t(rank) - 1]);
  std::vector<EventLog::Draft> events;
  const std::map<DeviceId, std::string> refused = note_refused(round, *reduced, events);
  if (!events.empty()) services_.events.publish(events);
  round.hosted.data_plane["spooled_bytes"] = reduced->spooled_bytes;
  try {
    exchange.take_masked_sum(contributors, std::move(sum), refused);
  } catch (const federated::Refused& error) {
    return std::string("at its masked input stage: the hub's sum of masked inputs: ") + error.what();
  }
  return std::nullopt;
}

TaskRunner::Hosted TaskRunner::aggregate(Round& round, size_t plane_contributors) {
  auto& sources = round.sources;
  Hosted& hosted = round.hosted;
  std::sort(sources.begin(), sources.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(round.missing.begin(), round.missing.end());
  for (const auto& source : sources) hosted.contributors.push_back(source.first);
  hosted.data_plane["bytes_reduced"] = round.layout.bytes() * hosted.contributors.size();
  services_.metrics.add_bytes_reduced(round.layout.bytes() * hosted.contributors.size());
  if (hosted.contributors.size() < round.plan.min_updates) {
    hosted.abandon_reason =
        std::to_string(hosted.contributors.size()) + " of the " + std::to_string(round.plan.min_updates) +
        " contributions required arrived by the deadline; missing: " + join_ids(round.missing) +
        (round.refused.empty() ? "" : "; refused: " + round.refused);
    return std::move(hosted);
  }
  // A spool file that cannot be read back refuses the round's aggregate, abandoning the round.
  auto timed = [fold_seconds = hosted.fold_seconds](const auto& read) {
    const auto start = SteadyClock::now();
    try {
      read();
    } catch (const std::exception& error) {
      throw federated::Refused(std::string("the hub could not read the contributions back: ") + error.what());
    }
    *fold_seconds += std::chrono::duration<double>(SteadyClock::now() - start).count();
  };
  if (params_.central_dp) {  // each contribution clipped, then summed with the noise
    std::vector<ContributionSource> clipped_sources;
    for (const auto& source : sources)
      clipped_sources.push_back([read = source.second, timed](uint64_t first, uint64_t count, double* out) {
        timed([&] { read(first, count, out); });
      });
    hosted.noise_seed = random_noise_seed();
    hosted.clipped.emplace();
    hosted.sum = dp_->noised_sum(round.layout, round.model, std::move(clipped_sources), hosted.noise_seed,
                                 *hosted.clipped);
    return std::move(hosted);
  }
  if (round.kind == federated::ContributionKind::Values) {
    hosted.updates = round.layout.updates_reader(
        sources.size(), [sources, timed](size_t update, size_t first, std::span<double> out) {
          timed([&] { sources[update].second(first, out.size(), out.data()); });
        });
    return std::move(hosted);
  }
  // Each contribution is finite, but finite values can still add up past the largest double: the
  // strategy refuses a non-finite sum as it reads it, which abandons the round naming the element.
  if (plane_contributors == sources.size()) {  // all from the data plane: its own fold
    hosted.sum = round.layout.weighted_sum_reader(
        [deferred = round.deferred, timed](size_t first, std::span<double> out) {
          timed([&] { deferred->fold(first, out.size(), out.data()); });
        });
    return std::move(hosted);
  }
  // The same sum, in the same order, over contributions from both paths: the first one, then
  // each next one added, as the data plane's fold adds them.
  hosted.sum = round.layout.weighted_sum_reader([sources, timed](size_t first, std::span<double> out) {
    timed([&] {
      std::vector<double> next(out.size());
      sources.front().second(first, out.size(), out.data());
      for (size_t i = 1; i < sources.size(); ++i) {
        sources[i].second(first, next.size(), next.data());
        for (size_t j = 0; j < out.size(); ++j) out[j] += next[j];
      }
    });
  });
  return std::move(hosted);
}

bool TaskRunner::close_round(const federated::RoundPlan& plan, Hosted hosted,
                             SteadyClock::time_point started) {
  const std::string& id = task_.name();
  std::string reason = hosted.abandon_reason;
  std::optional<std::string> failure;
  bool completed = false;
  try {
    if (hosted.sum || hosted.updates) {
      set_phase(v1::ROUND_STATE_AGGREGATING, plan.round_id);
      services_.events.publish(v1::EVENT_KIND_ROUND_AGGREGATING, id, plan.round_id, "",
                               "aggregating " + std::to_string(hosted.contributors.size()) + " updates");
      const auto aggregation_start = SteadyClock::now();
      federated::RoundOutcome outcome =
          hosted.sum ? task_.close_round_from_weighted_sum(*hosted.sum, hosted.contributors)
                     : task_.close_round_from_updates(*hosted.updates, hosted.contributors);
      hosted.data_plane["aggregate_seconds"] =
          std::chrono::duration<double>(SteadyClock::now() - aggregation_start).count();
      completed = outcome.status == federated::RoundStatus::Completed;
      reason = outcome.reason;
    } else {
      // No update was submitted to the task, so this abandons the attempt and counts it against
      // the task's retries; the reason recorded is the coordinator's.
      task_.close_round();
    }
  } catch (const federated::TaskFailed& error) {
    const bool aggregated = hosted.sum || hosted.updates;
    failure = aggregated
                  ? std::string(error.what())
                  : "task '" + id + "' failed: more than max_retries " + std::to_string(params_.max_retries) +
                        " attempts in a row were abandoned; the last, round " +
                        std::to_string(plan.round_id) + ": " + reason;
    if (aggregated) reason = error.what();
  }

  RoundResult result;
  result.outcome = completed ? RoundState::Completed : RoundState::Abandoned;
  result.contributors = hosted.contributors;
  std::set_difference(plan.selected.begin(), plan.selected.end(), hosted.contributors.begin(),
                      hosted.contributors.end(), std::back_inserter(result.missing));
  std::string stop_reason;
  halted(&stop_reason);
  if (completed) {
    result.new_model = task_.global_model();
    result.strategy_state = task_.strategy().export_state();
    // Charged with the model it releases. An abandoned round is charged nothing, in either mode:
    // no model is committed, so its sum is never released.
    if (hosted.clipped) {  // central DP, and the next bound stored with it
      dp_->round_completed(*hosted.clipped, hosted.noise_seed);
      store_clip_norm(dp_->clip_norm(), *result.strategy_state);
    } else if (dp_) {
      // Distributed DP: the sum holds the noise shares of the devices whose masked inputs are in
      // it, at least min_updates of them (fewer abandon the round before unmasking), each of the
      // variance planned for min_updates shares (noise_min_devices). The charge is the noise of
      // min_updates shares (charged_dp's realised multiplier), not of the survivors observed: the
      // calibration guarantees that many and no more (a survivor colluding with the coordinator,
      // as corrupt_fraction allows, knows its own share or never added it, so the extra shares
      // cannot be counted on; the min_updates are taken as honest: docs/privacy.md, Next), and the
      // charge must be known before the round, for the budget check that lets it start.
      dp_->charge_round();
    }
    if (task_.model_version() >= rounds_planned_)
      result.task_end =
          TaskEnd{TaskState::Completed, "all " + std::to_string(rounds_planned_) + " rounds completed"};
  } else {
    result.abandon_reason = reason;
    if (failure) result.task_end = TaskEnd{TaskState::Failed, *failure};
  }
  if (!result.task_end && !stop_reason.empty()) result.task_end = TaskEnd{TaskState::Stopped, stop_reason};
  const auto commit_start = SteadyClock::now();
  std::vector<DeviceBoard::Answer> held;  // when the round ends the task
  try {
    services_.state.with([&](StateStore& store) {
      store.close_round(id, plan.round_id, result);
      if (result.task_end) held = end_work_if_no_task_runs(store, services_.board);
    });
  } catch (const std::exception& error) {
    // The task has moved on in memory but not on disk: stop here, and let the next start resume
    // from the last committed round (this one is then marked interrupted).
    log_event(LogLevel::Error, "round_not_recorded",
              {{"task", id}, {"round", plan.round_id}, {"error", error.what()}});
    return false;
  }
  set_phase(v1::ROUND_STATE_UNSPECIFIED, 0);  // the stored round says how it closed
  nlohmann::json round_fields = {{"model_version_in", plan.model_version},
                                 {"model_version", task_.model_version()},
                                 {"contributors", result.contributors},
                                 {"missing", result.missing}};
  std::string completed_words = "model version " + std::to_string(task_.model_version()) + " from " +
                                std::to_string(result.contributors.size()) + " contributions";
  if (completed && dp_)
    completed_words += "; " + report_privacy(hosted.clipped ? &*hosted.clipped : nullptr, round_fields);
  const auto now = SteadyClock::now();
  const double seconds = std::chrono::duration<double>(now - started).count();
  if (!hosted.data_plane.is_null()) {
    hosted.data_plane["fold_seconds"] = *hosted.fold_seconds;
    hosted.data_plane["commit_seconds"] = std::chrono::duration<double>(now - commit_start).count();
    log_event(LogLevel::Info, "round_data_plane", std::move(hosted.data_plane));
  }
  services_.metrics.count_round(completed ? "completed" : "abandoned", seconds);
  round_fields["seconds"] = seconds;
  services_.events.publish(completed ? v1::EVENT_KIND_ROUND_COMPLETED : v1::EVENT_KIND_ROUND_FAILED, id,
                           plan.round_id, "", completed ? completed_words : reason, std::move(round_fields));
  if (!result.task_end) return true;
  services_.events.publish(
      result.task_end->state == TaskState::Stopped ? v1::EVENT_KIND_TASK_STOPPED
                                                   : v1::EVENT_KIND_TASK_FINISHED,
      id, 0, "", std::string(task_state_name(result.task_end->state)) + ": " + result.task_end->reason);
  DeviceBoard::answer_with_no_work(std::move(held));
  return false;
}

std::string TaskRunner::report_privacy(const CentralDp::Clipped* clipped, nlohmann::json& fields) {
  const v1::PrivacySpent spent = dp_->spent();
  services_.metrics.set_task_epsilon(task_.name(), spent.epsilon());
  nlohmann::json& privacy = fields["privacy"] = {{"epsilon", spent.epsilon()},
                                                 {"delta", spent.delta()},
                                                 {"epsilon_budget", spent.epsilon_budget()},
                                                 {"order", spent.order()},
                                                 {"rounds_charged", spent.rounds_charged()}};
  if (clipped) {
    privacy["clip_norm"] = clipped->clip_norm;
    privacy["unclipped"] = clipped->unclipped;
    privacy["next_clip_norm"] = dp_->clip_norm();
  }
  return dp_->spent_words();
}

void TaskRunner::log_waiting(size_t available, size_t eligible, size_t on_data_plane) {
  const auto now = SteadyClock::now();
  if (!waiting_since_) waiting_since_ = now;
  if (now - *waiting_since_ < kWaitLogAfter) return;
  const std::pair<size_t, size_t> counts{available, eligible};
  if (wait_logged_at_ && !(counts != wait_logged_counts_ && now - *wait_logged_at_ >= kWaitLogChangedEvery) &&
      now - *wait_logged_at_ < kWaitLogRepeat)
    return;
  wait_logged_at_ = now;
  wait_logged_counts_ = counts;
  nlohmann::json fields = selection_fields(params_, available, eligible);
  fields["task"] = task_.name();
  fields["model_version"] = task_.model_version();
  fields["waited_seconds"] = std::chrono::duration<double>(now - *waiting_since_).count();
  fields["why"] = waiting_words(params_, available, eligible, on_data_plane);
  log_event(LogLevel::Info, "round_waiting", std::move(fields));
}

void TaskRunner::note_waiting(size_t available, size_t eligible, size_t on_data_plane) {
  if (phase().state == v1::ROUND_STATE_WAITING_FOR_DEVICES) return;
  set_phase(v1::ROUND_STATE_WAITING_FOR_DEVICES, next_round_id_);
  services_.events.publish(v1::EVENT_KIND_ROUND_WAITING_FOR_DEVICES, task_.name(), next_round_id_, "",
                           waiting_words(params_, available, eligible, on_data_plane),
                           selection_fields(params_, available, eligible));
}

void TaskRunner::end_task(TaskState state, const std::string& reason) {
  const std::string& id = task_.name();
  std::vector<DeviceBoard::Answer> held;
  try {
    services_.state.with([&](StateStore& store) {
      store.set_task_state(id, state, reason);
      held = end_work_if_no_task_runs(store, services_.board);
    });
  } catch (const std::exception& error) {
    log_event(LogLevel::Error, "task_state_not_recorded", {{"task", id}, {"error", error.what()}});
    return;
  }
  services_.events.publish(
      state == TaskState::Stopped ? v1::EVENT_KIND_TASK_STOPPED : v1::EVENT_KIND_TASK_FINISHED, id, 0, "",
      std::string(task_state_name(state)) + ": " + reason);
  DeviceBoard::answer_with_no_work(std::move(held));
}

std::vector<DeviceBoard::Answer> end_work_if_no_task_runs(StateStore& store, DeviceBoard& board) {
  const std::vector<TaskRecord> tasks = store.list_tasks();
  if (std::ranges::any_of(tasks, [](const TaskRecord& task) { return task.state == TaskState::Running; }))
    return {};
  return board.end_of_work();
}

}  // namespace tn::server
