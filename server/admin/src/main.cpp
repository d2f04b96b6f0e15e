// torchnative-admin: the operators' client of the coordinator's AdminService. Every call is
// signed with the administrator's Ed25519 key (created on first use; give its public key to the
// coordinator's admin_public_keys). Results are JSON on stdout; errors go to stderr, status 1.
//
//   torchnative-admin --key FILE public-key
//   torchnative-admin --server HOST:PORT --key FILE [--tls-ca FILE] COMMAND ...
//
// `torchnative-admin --help` lists the commands, `torchnative-admin help COMMAND` a command's flags.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/arguments.h"
#include "cli/read_file.h"
#include "proto/model_transfer.h"
#include "proto/signing.h"
#include "server/hex.h"
#include "server/safetensors.h"
#include "torch_file.h"
#include "torchnative/federated/v1/admin.grpc.pb.h"

namespace {

namespace v1 = ::torchnative::federated::v1;
using nlohmann::json;
using tn::cli::read_file;
using tn::cli::UsageError;

struct RpcFailed : std::runtime_error {
  RpcFailed(const std::string& method, const grpc::Status& status)
      : std::runtime_error(method + " failed with status " + std::to_string(int(status.error_code())) + ": " +
                           status.error_message()) {}
};

// What fetch-model writes: safetensors, a torch.save file, or as --out's extension says.
enum class ModelFormat { ByExtension, Safetensors, Torch };

struct CreateTaskFlags {
  std::string strategy, params = "{}";
  uint32_t rounds = 0, devices_per_round = 0, min_updates = 0, min_available = 0;
  uint64_t round_timeout_ms = 0, deadline_unix_ms = 0, min_memory_bytes = 0;
  std::map<std::string, std::string> labels;
  std::optional<std::string> model, stored_model;
  std::string digest;  // 32 bytes, or empty: not checked
  // Central DP (CreateTaskHeader.central_dp); NaN: not given.
  double dp_noise_multiplier = NAN, dp_clip_norm = NAN, dp_delta = NAN, dp_epsilon_budget = NAN;
  double dp_target_quantile = NAN, dp_clip_learning_rate = NAN, dp_count_stddev = NAN;
  // Secure aggregation (CreateTaskHeader.secure_aggregation); NaN, 0 or none: not given.
  double secagg_corrupt_fraction = NAN, secagg_dropout_fraction = NAN, secagg_clip_range = NAN;
  double secagg_l2_bound = NAN;
  uint32_t secagg_max_weight = 0, secagg_bits = 0, secagg_levels = 0;
  uint32_t secagg_security_bits = 0, secagg_correctness_bits = 0;
  std::optional<bool> secagg_active_coordinator;
};

// What the command line says, for every command.
struct Words {
  std::string server, key_file;
  std::optional<std::string> tls_ca;
  CreateTaskFlags create;
  std::string task_id, reason;                  // stop-task, rounds, status
  std::string model_version, out_path, digest;  // fetch-model
  ModelFormat out_format = ModelFormat::ByExtension;
  std::string events_task;
  uint64_t events_count = 0;
  std::optional<uint64_t> events_since;
  std::string follow_task;
};

void digest_flag(tn::cli::Command& command, std::string& digest, const std::string& meaning) {
  command.flag("--digest", "HEX", meaning).handle([&digest](const std::string& hex) {
    auto bytes = tn::server::from_hex(hex, 32);
    if (!bytes) throw UsageError("expected a BLAKE2b-256 digest in hex (64 digits), got '" + hex + "'");
    digest = *bytes;
  });
}

// The model of a --model file: safetensors, or a torch.save file of a state_dict, tried only once
// the file is refused as safetensors, so no safetensors file is mistaken for one. The legacy
// torch.save format is named, with the conversion that reads it.
tn::federated::Model read_model_file(const std::string& path) {
  const std::string bytes = read_file(path, "model");
  auto file = std::make_shared<std::vector<std::byte>>(
      reinterpret_cast<const std::byte*>(bytes.data()),
      reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
  try {
    return tn::server::decode_safetensors(file, path).model;
  } catch (const std::exception&) {
    if (tn::admin::is_zip_archive(bytes)) return tn::admin::decode_torch_file(bytes, path);
    if (!tn::admin::is_legacy_torch_file(bytes)) throw;
    throw std::runtime_error("model: " + path +
                             " is a torch.save file in the legacy format, not read here: convert it with "
                             "python -m torchnative.model_files from-torch " +
                             path + " MODEL.safetensors");
  }
}

void declare_central_dp(tn::cli::Command& command, CreateTaskFlags& flags) {
  const auto dp_flag = [&](const char* name, const char* placeholder, const char* meaning, double& target) {
    command.flag(name, placeholder, meaning).into(target).default_text("not given");
  };
  dp_flag(
      "--dp-noise-multiplier", "Z",
      "central DP (docs/privacy.md): the noise's standard deviation on the sum of clipped updates, in clip "
      "norms; with --dp-clip-norm, --dp-delta and --dp-epsilon-budget; with --secagg-*, distributed DP "
      "(secure_aggregation.distributed_dp, no adaptive clipping)",
      flags.dp_noise_multiplier);
  dp_flag("--dp-clip-norm", "C",
          "central DP: the L2 bound each update is clipped to (the initial one, adaptive)",
          flags.dp_clip_norm);
  dp_flag("--dp-delta", "D", "central DP: the delta epsilon is accounted at", flags.dp_delta);
  dp_flag("--dp-epsilon-budget", "E",
          "central DP: the task stops before a round would take epsilon past this", flags.dp_epsilon_budget);
  dp_flag(
      "--dp-target-quantile", "Q",
      "adaptive clipping (with --dp-clip-learning-rate): the quantile of the update norms the bound follows",
      flags.dp_target_quantile);
  dp_flag("--dp-clip-learning-rate", "ETA", "adaptive clipping: the bound's geometric step rate",
          flags.dp_clip_learning_rate);
  dp_flag("--dp-count-stddev", "S",
          "adaptive clipping: the noise on the count of unclipped updates (default devices per round / 20)",
          flags.dp_count_stddev);
}

// The header's central_dp from the --dp-* flags, when any is given: all four of central DP's, and
// both of adaptive clipping's when either is.
void put_central_dp(const CreateTaskFlags& flags, v1::CreateTaskHeader& header) {
  const std::pair<const char*, double> fixed[] = {{"--dp-noise-multiplier", flags.dp_noise_multiplier},
                                                  {"--dp-clip-norm", flags.dp_clip_norm},
                                                  {"--dp-delta", flags.dp_delta},
                                                  {"--dp-epsilon-budget", flags.dp_epsilon_budget}};
  const std::pair<const char*, double> adaptive[] = {
      {"--dp-target-quantile", flags.dp_target_quantile},
      {"--dp-clip-learning-rate", flags.dp_clip_learning_rate}};
  const auto given = [](const auto& flag) { return !std::isnan(flag.second); };
  const bool any_adaptive = std::ranges::any_of(adaptive, given) || !std::isnan(flags.dp_count_stddev);
  if (!std::ranges::any_of(fixed, given) && !any_adaptive) return;
  const auto require_all = [&](const auto& group, const char* what) {
    for (const auto& flag : group)
      if (!given(flag)) throw UsageError(std::string(what) + " needs " + flag.first);
  };
  require_all(fixed, "central DP");
  v1::CentralDp& dp = *header.mutable_central_dp();
  dp.set_noise_multiplier(flags.dp_noise_multiplier);
  dp.set_clip_norm(flags.dp_clip_norm);
  dp.set_delta(flags.dp_delta);
  dp.set_epsilon_budget(flags.dp_epsilon_budget);
  if (!any_adaptive) return;
  require_all(adaptive, "adaptive clipping");
  v1::AdaptiveClipping& clipping = *dp.mutable_adaptive_clipping();
  clipping.set_target_quantile(flags.dp_target_quantile);
  clipping.set_learning_rate(flags.dp_clip_learning_rate);
  if (!std::isnan(flags.dp_count_stddev)) clipping.set_count_stddev(flags.dp_count_stddev);
}

// With secure aggregation, the --dp-* flags configure distributed DP (noise added on the devices),
// under the same names: the header's central_dp moves to secure_aggregation.distributed_dp.
// Adaptive clipping stays in central_dp, which the coordinator refuses with secure aggregation.
void move_dp_to_the_devices(v1::CreateTaskHeader& header) {
  if (!header.has_secure_aggregation() || !header.has_central_dp() ||
      header.central_dp().has_adaptive_clipping())
    return;
  const v1::CentralDp& central = header.central_dp();
  v1::DistributedDp& dp = *header.mutable_secure_aggregation()->mutable_distributed_dp();
  dp.set_noise_multiplier(central.noise_multiplier());
  dp.set_clip_norm(central.clip_norm());
  dp.set_delta(central.delta());
  dp.set_epsilon_budget(central.epsilon_budget());
  header.clear_central_dp();
}

void declare_secure_aggregation(tn::cli::Command& command, CreateTaskFlags& flags) {
  const auto fraction = [&](const char* name, const char* meaning, double& target) {
    command.flag(name, "F", meaning).into(target).default_text("not given");
  };
  fraction("--secagg-corrupt-fraction",
           "secure aggregation (docs/secure_aggregation.md): the fraction of a round's devices that may "
           "collude with the coordinator; with --secagg-dropout-fraction, --secagg-clip-range and "
           "--secagg-max-weight",
           flags.secagg_corrupt_fraction);
  fraction("--secagg-dropout-fraction",
           "secure aggregation: the fraction of a round's devices that may vanish",
           flags.secagg_dropout_fraction);
  command.flag("--secagg-clip-range", "R", "secure aggregation: each update coordinate is clamped to [-R, R]")
      .into(flags.secagg_clip_range)
      .default_text("not given");
  command.flag("--secagg-max-weight", "N", "secure aggregation: example counts above N weigh N")
      .into(flags.secagg_max_weight)
      .default_text("not given");
  command.flag("--secagg-l2-bound", "B", "secure aggregation: the update's L2 norm is clipped to B first")
      .into(flags.secagg_l2_bound)
      .default_text("none");
  command.flag("--secagg-bits", "B", "secure aggregation: sums modulo 2^B, B in [2, 32]")
      .into(flags.secagg_bits, 1u, 32u)
      .default_text("32");
  command.flag("--secagg-levels", "L", "secure aggregation: steps in the clip range at weight 1")
      .into(flags.secagg_levels, 1u)
      .default_text("the most that fit");
  command
      .flag("--secagg-security-bits", "S",
            "secure aggregation: the coordinator learns more with probability < 2^-S")
      .into(flags.secagg_security_bits, 1u)
      .default_text("40");
  command.flag("--secagg-correctness-bits", "C", "secure aggregation: a round fails with probability < 2^-C")
      .into(flags.secagg_correctness_bits, 1u)
      .default_text("20");
  command
      .flag("--secagg-coordinator", "KIND",
            "secure aggregation: semi-honest, or active (may send devices inconsistent views: higher "
            "threshold)")
      .default_text("semi-honest")
      .choice(flags.secagg_active_coordinator, {{"semi-honest", false}, {"active", true}});
}

// The header's secure_aggregation from the --secagg-* flags, when any is given: the threat model's
// two fractions, the clip range and the weight cap are then required.
void put_secure_aggregation(const CreateTaskFlags& flags, v1::CreateTaskHeader& header) {
  const std::pair<const char*, double> required[] = {
      {"--secagg-corrupt-fraction", flags.secagg_corrupt_fraction},
      {"--secagg-dropout-fraction", flags.secagg_dropout_fraction},
      {"--secagg-clip-range", flags.secagg_clip_range},
      {"--secagg-max-weight", flags.secagg_max_weight ? 1.0 : NAN}};
  const bool any = std::ranges::any_of(required, [](const auto& flag) { return !std::isnan(flag.second); }) ||
                   !std::isnan(flags.secagg_l2_bound) || flags.secagg_bits || flags.secagg_levels ||
                   flags.secagg_security_bits || flags.secagg_correctness_bits ||
                   flags.secagg_active_coordinator.has_value();
  if (!any) return;
  for (const auto& [name, value] : required)
    if (std::isnan(value)) throw UsageError(std::string("secure aggregation needs ") + name);
  v1::SecureAggregation& secure = *header.mutable_secure_aggregation();
  secure.set_corrupt_fraction(flags.secagg_corrupt_fraction);
  secure.set_dropout_fraction(flags.secagg_dropout_fraction);
  secure.set_clip_range(flags.secagg_clip_range);
  secure.set_max_weight(flags.secagg_max_weight);
  if (!std::isnan(flags.secagg_l2_bound)) secure.set_l2_bound(flags.secagg_l2_bound);
  secure.set_bits(flags.secagg_bits);
  secure.set_levels(flags.secagg_levels);
  secure.set_security_bits(flags.secagg_security_bits);
  secure.set_correctness_bits(flags.secagg_correctness_bits);
  secure.set_active_coordinator(flags.secagg_active_coordinator.value_or(false));
}

void declare_create_task(tn::cli::Command& command, CreateTaskFlags& flags) {
  command.flag("--strategy", "NAME", "the aggregation strategy (fedavg, krum, ...)")
      .required()
      .into(flags.strategy);
  command.flag("--params", "JSON", "the strategy's parameters").into(flags.params);
  command.flag("--rounds", "N", "how many rounds the task runs").required().into(flags.rounds);
  command.flag("--devices-per-round", "N", "devices selected for each round")
      .required()
      .into(flags.devices_per_round);
  command.flag("--min-updates", "N", "the fewest updates a round aggregates")
      .required()
      .into(flags.min_updates);
  command.flag("--round-timeout-ms", "MS", "how long a round waits for updates")
      .required()
      .into(flags.round_timeout_ms);
  command.flag("--min-available", "N", "devices that must be available before a round starts")
      .into(flags.min_available);
  command.flag("--deadline-unix-ms", "MS", "when the task stops, in Unix milliseconds; 0: no deadline")
      .into(flags.deadline_unix_ms);
  command.flag("--label", "K=V", "only devices with this label take part")
      .repeatable()
      .handle([&flags](const std::string& label) {
        const size_t equals = label.find('=');
        if (equals == std::string::npos) throw UsageError("expected KEY=VALUE, got '" + label + "'");
        flags.labels[label.substr(0, equals)] = label.substr(equals + 1);
      });
  command.flag("--min-memory-bytes", "N", "only devices with at least this much memory take part")
      .into(flags.min_memory_bytes);
  command
      .flag("--model", "FILE",
            "the initial model, sent with the task: a safetensors file (torchnative.model_files.save "
            "writes one from a state_dict) or a torch.save file of a state_dict (the legacy "
            "_use_new_zipfile_serialization=False format: convert it with python -m "
            "torchnative.model_files from-torch FILE.pt FILE.safetensors)")
      .into(flags.model);
  command
      .flag("--stored-model", "VERSION",
            "the initial model, a version the coordinator has (instead of --model)")
      .into(flags.stored_model);
  digest_flag(command, flags.digest, "the stored model's BLAKE2b-256, checked when given");
  declare_central_dp(command, flags);
  declare_secure_aggregation(command, flags);
}

void declare(tn::cli::Command& program, Words& words) {
  program.flag("--server", "HOST:PORT", "the coordinator's gRPC address, for every command but public-key")
      .into(words.server);
  program.flag("--key", "FILE", "the administrator's Ed25519 key, created on first use")
      .required()
      .into(words.key_file);
  program.flag("--tls-ca", "FILE", "PEM root certificates: the coordinator is reached over TLS")
      .into(words.tls_ca);
  program.subcommand("public-key",
                     "prints the key's public half in hex, for the coordinator's admin_public_keys");
  declare_create_task(
      program.subcommand("create-task", "creates a task; prints its id and initial model version"),
      words.create);
  tn::cli::Command& stop = program.subcommand("stop-task", "stops a task: no further round of it starts");
  stop.positional("TASK", "the task's id").into(words.task_id);
  stop.flag("--reason", "TEXT", "why, recorded with the task").into(words.reason);
  program.subcommand("devices", "lists the registered devices");
  program.subcommand("tasks", "lists the tasks, each with its state, rounds completed and current round");
  program
      .subcommand("status",
                  "shows where a task stands: its state, current round (devices selected and "
                  "contributed), last aggregate's model version and each round's duration")
      .positional("TASK", "the task's id")
      .into(words.task_id);
  program.subcommand("rounds", "lists a task's rounds")
      .positional("TASK", "the task's id")
      .into(words.task_id);
  tn::cli::Command& fetch = program.subcommand(
      "fetch-model",
      "writes a model version the coordinator has to a file: safetensors (torchnative.model_files.load "
      "reads it) or a torch.save file of its state_dict (torch.load reads it; --format, or an --out "
      "ending in .pt or .pth); prints the version, the file's format and the version's blake2b_256, "
      "the model's content digest over its tensor table and data, whichever the format "
      "(python -m torchnative.model_files digest FILE; docs/federated.md, Model files)");
  fetch.positional("VERSION", "the model version").into(words.model_version);
  fetch.flag("--out", "FILE", "where the model is written").required().into(words.out_path);
  fetch
      .flag("--format", "FORMAT",
            "safetensors, or torch: a torch.save file of the state_dict (an OrderedDict of "
            "contiguous tensors), which torch.load reads, weights_only too")
      .default_text("torch when --out ends in .pt or .pth, safetensors otherwise")
      .choice(words.out_format, {{"safetensors", ModelFormat::Safetensors}, {"torch", ModelFormat::Torch}});
  digest_flag(fetch, words.digest, "the version's BLAKE2b-256, checked when given");
  tn::cli::Command& events = program.subcommand(
      "events",
      "prints the coordinator's events as JSON lines, as they come; with --follow TASK, a task's "
      "progress instead: a JSON line per round as it closes (state, devices selected and "
      "contributed, model version, duration) and one for the task when it ends; exit status 0 "
      "when the task completed, 3 when it stopped or failed");
  events.flag("--task", "TASK", "only this task's events; none: every task's").into(words.events_task);
  events.flag("--count", "N", "stops after N events; 0: when interrupted").into(words.events_count);
  events
      .flag("--since", "N",
            "first the stored events after sequence N (0: all; sequences go on across coordinator "
            "restarts, so the last one printed resumes without gaps), then events as they come")
      .default_text("only events from now on")
      .handle([&words](const std::string& text) {
        words.events_since =
            tn::cli::detail::parse_integer<uint64_t>(text, 0, std::numeric_limits<uint64_t>::max());
      });
  events
      .flag("--follow", "TASK",
            "follows TASK from its first round until it ends, a line per round (not with --task, --since "
            "or --count)")
      .into(words.follow_task);
}

json round_json(const v1::RoundInfo& round) {
  auto list = [](const auto& ids) { return std::vector<std::string>(ids.begin(), ids.end()); };
  return {{"round_id", round.round_id()},
          {"state", v1::RoundState_Name(round.state())},
          {"input_model_version", round.input_model_version()},
          {"output_model_version", round.output_model_version()},
          {"selected", list(round.selected_devices())},
          {"contributors", list(round.contributors())},
          {"missing", list(round.missing())},
          {"started_unix_ms", round.started_unix_ms()},
          {"closed_unix_ms", round.closed_unix_ms()}};
}

// From start to close; null while the round is open.
json duration_ms(const v1::RoundInfo& round) {
  if (round.closed_unix_ms() == 0) return nullptr;
  return round.closed_unix_ms() - round.started_unix_ms();
}

// What a central DP task's completed rounds spent; null for a task without central DP.
json privacy_json(const v1::TaskInfo& task) {
  if (!task.has_privacy()) return nullptr;
  const v1::PrivacySpent& spent = task.privacy();
  return {{"epsilon", spent.epsilon()},
          {"delta", spent.delta()},
          {"epsilon_budget", spent.epsilon_budget()},
          {"rounds_charged", spent.rounds_charged()},
          {"order", spent.order()}};
}

json task_json(const v1::TaskInfo& task) {
  json current = nullptr;
  if (task.has_current_round()) {
    const v1::RoundInfo& round = task.current_round();
    current = {{"round_id", round.round_id()},
               {"state", v1::RoundState_Name(round.state())},
               {"selected", round.selected_devices_size()},
               {"contributed", round.contributors_size()},
               {"missing", round.missing_size()},
               {"started_unix_ms", round.started_unix_ms()},
               {"duration_ms", duration_ms(round)}};
  }
  return {{"task_id", task.task_id()},
          {"strategy", task.strategy()},
          {"state", v1::TaskState_Name(task.state())},
          {"state_reason", task.state_reason()},
          {"rounds_planned", task.rounds_planned()},
          {"rounds_completed", task.rounds_completed()},
          {"devices_per_round", task.devices_per_round()},
          {"created_unix_ms", task.created_unix_ms()},
          {"current_round", current},
          {"latest_model_version", task.latest_model_version()},
          {"mean_completed_round_ms", task.mean_completed_round_ms()},
          {"privacy", privacy_json(task)}};
}

json event_json(const v1::Event& event) {
  return {{"sequence", event.sequence()},
          {"time_unix_ms", event.time_unix_ms()},
          {"kind", v1::EventKind_Name(event.kind())},
          {"task_id", event.task_id()},
          {"round_id", event.round_id()},
          {"device_id", event.device_id()},
          {"message", event.message()}};
}

class Admin {
 public:
  Admin(const std::string& server, const std::string& key_file, const std::optional<std::string>& tls_ca)
      : key_(tn::proto::SigningKey::load_or_create(key_file)),
        key_id_(tn::server::to_hex(key_.public_key())) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (tls_ca) {
      grpc::SslCredentialsOptions tls;
      tls.pem_root_certs = read_file(*tls_ca, "TLS CA");
      credentials = grpc::SslCredentials(tls);
    }
    stub_ = v1::AdminService::NewStub(grpc::CreateChannel(server, credentials));
  }

  json create_task(const CreateTaskFlags& flags) {
    v1::CreateTaskHeader header;
    header.set_strategy(flags.strategy);
    header.set_strategy_parameters_json(flags.params);
    header.set_rounds(flags.rounds);
    header.mutable_selection()->set_devices_per_round(flags.devices_per_round);
    header.mutable_selection()->set_min_memory_bytes(flags.min_memory_bytes);
    header.mutable_selection()->mutable_required_labels()->insert(flags.labels.begin(), flags.labels.end());
    header.set_min_updates(flags.min_updates);
    header.set_min_available_devices(flags.min_available);
    header.set_round_timeout_ms(flags.round_timeout_ms);
    header.set_deadline_unix_ms(flags.deadline_unix_ms);
    put_central_dp(flags, header);
    put_secure_aggregation(flags, header);
    move_dp_to_the_devices(header);

    std::optional<tn::proto::ModelChunker> chunker;
    if (const auto& path = flags.model) {
      chunker.emplace(read_model_file(*path), std::filesystem::path(*path).filename().string());
      *header.mutable_streamed_model() = chunker->header();
    } else if (const auto& version = flags.stored_model) {
      header.mutable_stored_model()->set_model_version(*version);
      header.mutable_stored_model()->set_blake2b_256(flags.digest);
    } else {
      throw UsageError("create-task needs --model FILE or --stored-model VERSION");
    }

    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    v1::CreateTaskResponse response;
    auto writer = stub_->CreateTask(&context, &response);
    v1::CreateTaskRequest message;
    sign(*message.mutable_signed_header(), "CreateTask", header);
    bool sent = writer->Write(message);
    if (chunker) {
      message.Clear();
      while (sent && chunker->next_chunk(*message.mutable_chunk())) sent = writer->Write(message);
    }
    writer->WritesDone();  // when the server refused early, Finish says why
    check("CreateTask", writer->Finish());
    return {{"task_id", response.task_id()}, {"initial_model_version", response.initial_model_version()}};
  }

  json stop_task(const std::string& task_id, const std::string& reason) {
    v1::StopTaskPayload payload;
    payload.set_task_id(task_id);
    payload.set_reason(reason);
    call("StopTask", payload, &v1::AdminService::Stub::StopTask);
    return {{"stopping", task_id}};
  }

  json devices() {
    const v1::ListDevicesResponse response =
        call("ListDevices", v1::ListDevicesPayload(), &v1::AdminService::Stub::ListDevices);
    json out = json::array();
    for (const v1::DeviceInfo& device : response.devices())
      out.push_back({{"device_id", device.device_id()},
                     {"public_key", tn::server::to_hex(device.public_key())},
                     {"platform", device.metadata().platform()},
                     {"registered_unix_ms", device.registered_unix_ms()},
                     {"last_seen_unix_ms", device.last_seen_unix_ms()},
                     {"last_state", v1::DeviceState_Name(device.last_state())},
                     {"alive", device.alive()}});
    return out;
  }

  json rounds(const std::string& task_id) {
    v1::ListRoundsPayload payload;
    payload.set_task_id(task_id);
    const v1::ListRoundsResponse response = call("ListRounds", payload, &v1::AdminService::Stub::ListRounds);
    json out = json::array();
    for (const v1::RoundInfo& round : response.rounds()) out.push_back(round_json(round));
    return out;
  }

  json tasks() {
    const v1::ListTasksResponse response =
        call("ListTasks", v1::ListTasksPayload(), &v1::AdminService::Stub::ListTasks);
    json out = json::array();
    for (const v1::TaskInfo& task : response.tasks()) out.push_back(task_json(task));
    return out;
  }

  json status(const std::string& task_id) {
    const v1::GetTaskResponse response = get_task(task_id);
    json out = task_json(response.task());
    out["rounds"] = json::array();
    for (const v1::RoundInfo& round : response.rounds())
      out["rounds"].push_back({{"round_id", round.round_id()},
                               {"state", v1::RoundState_Name(round.state())},
                               {"selected", round.selected_devices_size()},
                               {"contributed", round.contributors_size()},
                               {"duration_ms", duration_ms(round)}});
    return out;
  }

  // The task's rounds as they close, from its first, then the task once it has ended; whether it
  // completed.
  bool follow(const std::string& task_id) {
    v1::GetTaskResponse now = get_task(task_id);  // refuses an unknown task before waiting on it
    if (now.task().state() != v1::TASK_STATE_RUNNING) return print_progress(now);
    v1::StreamEventsPayload payload;
    payload.set_task_id(task_id);
    payload.set_after_sequence(0);  // its stored events first: rounds that closed before the call
    v1::StreamEventsRequest request;
    sign(request, "StreamEvents", payload);
    grpc::ClientContext context;
    auto reader = stub_->StreamEvents(&context, request);
    v1::Event event;
    while (reader->Read(&event)) {
      const v1::EventKind kind = event.kind();
      if (kind == v1::EVENT_KIND_ROUND_COMPLETED || kind == v1::EVENT_KIND_ROUND_FAILED) {
        now = get_task(task_id);
        for (const v1::RoundInfo& round : now.rounds())
          if (round.round_id() == event.round_id()) print_round(now.task(), round);
      } else if (kind == v1::EVENT_KIND_TASK_FINISHED || kind == v1::EVENT_KIND_TASK_STOPPED) {
        context.TryCancel();
        reader->Finish();
        now = get_task(task_id);
        std::cout << task_json(now.task()).dump() << std::endl;
        return now.task().state() == v1::TASK_STATE_COMPLETED;
      }
    }
    check("StreamEvents", reader->Finish());
    throw std::runtime_error("the coordinator ended the event stream before task '" + task_id + "' ended");
  }

  json fetch_model(const std::string& version, const std::string& out_path, ModelFormat format,
                   const std::string& digest) {
    v1::FetchModelVersionPayload payload;
    payload.set_model_version(version);
    payload.set_blake2b_256(digest);
    v1::FetchModelVersionRequest request;
    sign(request, "FetchModelVersion", payload);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    auto reader = stub_->FetchModelVersion(&context, request);
    tn::proto::ModelAssembler assembler;
    v1::ModelStream message;
    std::optional<std::string> refusal;
    while (reader->Read(&message)) {
      try {
        assembler.accept(message);
      } catch (const tn::proto::TransferError& error) {
        refusal = error.what();
        context.TryCancel();
        break;
      }
    }
    grpc::Status status = reader->Finish();
    if (refusal) throw std::runtime_error("FetchModelVersion: the stream was refused: " + *refusal);
    check("FetchModelVersion", status);
    tn::federated::Model model = assembler.finish();
    const bool torch =
        format == ModelFormat::Torch ||
        (format == ModelFormat::ByExtension && (out_path.ends_with(".pt") || out_path.ends_with(".pth")));
    const std::string bytes =
        torch ? tn::admin::encode_torch_file(model) : tn::server::encode_safetensors(model);
    // Written aside and renamed, so a reader never sees half a file.
    const std::string temporary = out_path + ".partial";
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << bytes;
    out.close();
    if (!out) throw std::runtime_error("--out: could not write " + temporary + ": " + std::strerror(errno));
    std::filesystem::rename(temporary, out_path);
    return {{"model_version", assembler.header().model_version()},
            {"blake2b_256", tn::server::to_hex(assembler.header().blake2b_256())},
            {"format", torch ? "torch" : "safetensors"},
            {"path", out_path}};
  }

  void events(const std::string& task_id, uint64_t limit, std::optional<uint64_t> since) {
    v1::StreamEventsPayload payload;
    payload.set_task_id(task_id);
    if (since) payload.set_after_sequence(*since);
    v1::StreamEventsRequest request;
    sign(request, "StreamEvents", payload);
    grpc::ClientContext context;
    auto reader = stub_->StreamEvents(&context, request);
    v1::Event event;
    uint64_t shown = 0;
    while ((limit == 0 || shown < limit) && reader->Read(&event)) {
      std::cout << event_json(event).dump() << std::endl;
      ++shown;
    }
    if (limit != 0 && shown == limit) {
      context.TryCancel();
      reader->Finish();
      return;
    }
    check("StreamEvents", reader->Finish());
  }

 private:
  static constexpr std::chrono::seconds kCallTimeout{60};

  v1::GetTaskResponse get_task(const std::string& task_id) {
    v1::GetTaskPayload payload;
    payload.set_task_id(task_id);
    return call("GetTask", payload, &v1::AdminService::Stub::GetTask);
  }

  static void print_round(const v1::TaskInfo& task, const v1::RoundInfo& round) {
    std::cout << json{{"round_id", round.round_id()},
                      {"rounds_planned", task.rounds_planned()},
                      {"state", v1::RoundState_Name(round.state())},
                      {"selected", round.selected_devices_size()},
                      {"contributed", round.contributors_size()},
                      {"model_version", round.output_model_version()},
                      {"duration_ms", duration_ms(round)}}
                     .dump()
              << std::endl;
  }

  // A task that had ended already: its rounds, then the task; whether it completed.
  static bool print_progress(const v1::GetTaskResponse& ended) {
    for (const v1::RoundInfo& round : ended.rounds()) print_round(ended.task(), round);
    std::cout << task_json(ended.task()).dump() << std::endl;
    return ended.task().state() == v1::TASK_STATE_COMPLETED;
  }

  template <typename Request>
  void sign(Request& request, const char* method, const google::protobuf::Message& payload) {
    std::string bytes;
    payload.SerializeToString(&bytes);
    const std::string path = "/" + std::string(v1::AdminService::service_full_name()) + "/" + method;
    *request.mutable_auth() = tn::proto::sign_request(path, key_id_, bytes, key_);
    request.set_payload(std::move(bytes));
  }

  // One signed unary call, with the admin CLI's deadline; a refusal is thrown as RpcFailed.
  template <typename Request, typename Response>
  Response call(const char* method, const google::protobuf::Message& payload,
                grpc::Status (v1::AdminService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                            Response*)) {
    Request request;
    sign(request, method, payload);
    Response response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    check(method, (stub_.get()->*rpc)(&context, request, &response));
    return response;
  }

  static void check(const char* method, const grpc::Status& status) {
    if (!status.ok()) throw RpcFailed(method, status);
  }

  tn::proto::SigningKey key_;
  std::string key_id_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

// events --follow's exit status for a task that stopped or failed.
constexpr int kTaskDidNotComplete = 3;

int run(const tn::cli::Command& program, const std::string& command, const Words& words) {
  if (command == "public-key") {
    std::cout << tn::server::to_hex(tn::proto::SigningKey::load_or_create(words.key_file).public_key())
              << "\n";
    return 0;
  }
  const bool following = !words.follow_task.empty();
  if (following && (!words.events_task.empty() || words.events_since || words.events_count != 0))
    program.fail("events --follow takes no --task, --since or --count");
  if (words.server.empty()) program.fail("--server is required by " + command);
  Admin admin(words.server, words.key_file, words.tls_ca);
  json result;
  if (command == "create-task")
    result = admin.create_task(words.create);
  else if (command == "stop-task")
    result = admin.stop_task(words.task_id, words.reason);
  else if (command == "devices")
    result = admin.devices();
  else if (command == "rounds")
    result = admin.rounds(words.task_id);
  else if (command == "tasks")
    result = admin.tasks();
  else if (command == "status")
    result = admin.status(words.task_id);
  else if (command == "fetch-model")
    result = admin.fetch_model(words.model_version, words.out_path, words.out_format, words.digest);
  else if (following) {
    return admin.follow(words.follow_task) ? 0 : kTaskDidNotComplete;
  } else {
    admin.events(words.events_task, words.events_count, words.events_since);
    return 0;
  }
  std::cout << result.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tn::cli::Command program(
      "torchnative-admin",
      "The operators' client of the coordinator's AdminService. Every call is signed with the "
      "administrator's Ed25519 key (created on first use; give its public key to the "
      "coordinator's admin_public_keys). Results are JSON on stdout; errors go to stderr, "
      "status 1.");
  Words words;
  declare(program, words);
  const std::string command = program.parse_or_exit(argc, argv);
  try {
    return run(program, command, words);
  } catch (const UsageError& error) {
    program.fail(error.what());
  } catch (const std::exception& error) {
    std::cerr << "torchnative-admin: " << error.what() << "\n";
    return 1;
  }
}
