// torchnative-device: takes part in federated rounds with a synthetic trainer, as one device or
// as many devices in one process, for tests and load. Each device has its own identity and its
// own data-plane connections; the devices share one gRPC channel to the coordinator (one
// connection, and one channel's resolver and load-balancing state instead of one per device).
//
// `torchnative-device --help` lists the flags and the exit statuses (kExitStatuses).
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "cli/arguments.h"
#include "client/device.h"
#include "distributed/process_group.h"

namespace {

using tn::client::RoundReport;
using tn::client::TrainResult;
using tn::federated::Model;

// Set by the SIGTERM/SIGINT handler, which may do nothing else safely; a watcher thread polls it.
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler's flag must be lock-free");

constexpr int kExitGaveUp = 1;     // a device could not register, or met a failure no retry fixes
constexpr int kExitWorkEnded = 3;  // no task is running before a device contributed to its --rounds
constexpr const char* kExitStatuses =
    "Exit status 0 when every device stopped as asked: it contributed to its --rounds rounds, it was "
    "stopped by SIGTERM or SIGINT, or (--rounds 0) the work it came for ended; 1 when a device gave up "
    "(it could not register within --register-timeout-ms, or the coordinator's certificate does not "
    "verify); 2 for a usage error; 3 when the work ended first: no task was running any more (every task "
    "the device took part in had ended) before it contributed to its --rounds rounds. With "
    "--when-no-task wait, a device does not stop when the work ends.";

struct Options {
  std::string server, key_dir, report_dir, tls_ca;
  int devices = 1;
  int rounds = 0;        // rounds to contribute to, then stop; 0: until SIGTERM/SIGINT
  int64_t examples = 0;  // 0: each device draws its own from its seed
  uint64_t seed = 1;
  double step = 0.01;
  int check_in_wait_ms = 20'000;
  int register_timeout_ms = 300'000;  // 0: retry until stopped
  bool wait_for_next_task = false;
  int training_slots = 0;  // 0: no bound
  uint64_t max_model_bytes = tn::proto::TransferLimits{}.max_total_bytes;
  tn::client::v1::RoundTransport round_transport = tn::client::v1::ROUND_TRANSPORT_DATA_PLANE;
  double min_noise_multiplier = 0;  // with max_noise_devices: the device's noise floor; 0: none
  uint32_t max_noise_devices = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  tn::cli::Command command(
      "torchnative-device",
      std::string("Takes part in federated rounds with a synthetic trainer, as one device or as many "
                  "devices in one process, for tests and load. Each device prints its id once registered "
                  "and a line per round it was selected for (JSON, on stderr). ") +
          kExitStatuses);
  command.flag("--server", "HOST:PORT", "the coordinator's gRPC address").required().into(o.server);
  command.flag("--key-dir", "DIR", "each device's key, device-N.key, created there on first use")
      .required()
      .into(o.key_dir);
  command.flag("--devices", "N", "devices this process runs, each with its own identity").into(o.devices, 1);
  command
      .flag("--rounds", "R",
            "each device stops once it has contributed to R rounds; 0: when the work ends (--when-no-task) "
            "or at SIGTERM or SIGINT")
      .into(o.rounds, 0);
  command
      .flag("--examples", "N", "the example count each device reports; 0: each draws its own from its seed")
      .into(o.examples, int64_t{0});
  command.flag("--seed", "S", "seeds every device's synthetic training (with the device's number)")
      .into(o.seed);
  command.flag("--step", "X", "how far each round's training moves every value (the noise's deviation)")
      .into(o.step);
  command.flag("--report-dir", "DIR", "where each device writes what it contributed, a JSON file a round")
      .into(o.report_dir);
  command.flag("--tls-ca", "FILE", "PEM root certificates: the coordinator is reached over TLS")
      .into(o.tls_ca);
  command.flag("--check-in-wait-ms", "MS", "how long each CheckIn asks the coordinator to hold it")
      .into(o.check_in_wait_ms, 0);
  command
      .flag("--register-timeout-ms", "MS",
            "while the coordinator cannot be reached, registration is retried with jittered exponential "
            "backoff for up to MS, each failure printed; 0: until stopped")
      .into(o.register_timeout_ms, 0);
  command
      .flag("--when-no-task", "exit|wait",
            "what a device does once no task is running and every task it took part in (or, if none, saw "
            "running) has ended: exit, or wait for the next task")
      .choice(o.wait_for_next_task, {{"exit", false}, {"wait", true}});
  command
      .flag("--training-slots", "K",
            "at most K devices train and send their contribution at once (each then holds three times the "
            "model), so that many devices of a large model fit in memory; 0: no bound")
      .into(o.training_slots, 0);
  command
      .flag("--max-model-bytes", "N",
            "a round announcing a larger model is refused before anything is allocated for it")
      .into(o.max_model_bytes, uint64_t{1});
  command
      .flag("--round-transport", "data-plane|grpc",
            "grpc: the devices reach only the coordinator's gRPC port, fetching the model with FetchModel "
            "and submitting updates with SubmitUpdate")
      .choice(o.round_transport, {{"data-plane", tn::client::v1::ROUND_TRANSPORT_DATA_PLANE},
                                  {"grpc", tn::client::v1::ROUND_TRANSPORT_GRPC}});
  command
      .flag("--min-noise-multiplier", "Z",
            "with --max-noise-devices M, this device's floor on distributed DP noise: it refuses a secure "
            "round asking each device for a smaller share than that of a sum of M devices at multiplier Z, "
            "or for none")
      .into(o.min_noise_multiplier);
  command
      .flag("--max-noise-devices", "M",
            "the most devices whose shares this device's noise floor counts on in a released sum "
            "(--min-noise-multiplier)")
      .into(o.max_noise_devices, uint32_t{1});
  command.parse_or_exit(argc, argv);
  if (o.min_noise_multiplier < 0) command.fail("--min-noise-multiplier: expected a positive number");
  if ((o.min_noise_multiplier > 0) != (o.max_noise_devices > 0))
    command.fail("--min-noise-multiplier and --max-noise-devices make the noise floor together: give both");
  return o;
}

// Moves every floating value by step * noise of zero mean and unit variance (uniform: a normal
// draw costs ten times as much, and a thousand devices of one process would then take the
// cores from the coordinator under test), seeded by (device, round), so each device's update is
// reproducible and distinct; integer tensors count one more batch. Each tensor is written once,
// into the memory the trained model keeps.
TrainResult synthetic_training(const Model& global, uint64_t device_seed, uint64_t round_id, int64_t examples,
                               double step) {
  std::mt19937_64 rng(device_seed * 1'000'003 + round_id);
  const double scale = step * std::sqrt(3.0);  // uniform on [-1, 1) has variance 1/3
  auto noise = [&] { return scale * (double(rng() >> 11) * 0x1p-52 - 1.0); };
  TrainResult result;
  result.num_examples = examples > 0 ? examples : int64_t(1 + device_seed % 97);
  for (const auto& tensor : global.tensors) {
    std::shared_ptr<std::byte[]> bytes(new std::byte[std::max<size_t>(tensor.nbytes, 1)]);
    std::memcpy(bytes.get(), tensor.data.get(), tensor.nbytes);
    size_t n = size_t(tensor.numel());
    if (tensor.dtype == tn::ScalarType::Float) {
      auto* v = reinterpret_cast<float*>(bytes.get());
      for (size_t i = 0; i < n; ++i) v[i] = float(double(v[i]) + noise());
    } else if (tensor.dtype == tn::ScalarType::Double) {
      auto* v = reinterpret_cast<double*>(bytes.get());
      for (size_t i = 0; i < n; ++i) v[i] = v[i] + noise();
    } else if (tensor.dtype == tn::ScalarType::Long) {
      auto* v = reinterpret_cast<int64_t*>(bytes.get());
      for (size_t i = 0; i < n; ++i) v[i] += 1;
    } else if (tn::federated::is_aggregated(tensor.dtype)) {
      throw std::runtime_error("synthetic trainer: " + std::string(tn::upstream_type_name(tensor.dtype)) +
                               " tensors are not supported (float32/float64/int64 are)");
    }
    std::byte* start = bytes.get();
    result.model.tensors.push_back(
        tn::federated::wrap_tensor(tensor.name, tensor.dtype, tensor.shape,
                                   std::shared_ptr<const std::byte>(std::move(bytes), start), tensor.nbytes));
  }
  result.metrics["examples"] = double(result.num_examples);
  return result;
}

// What the device contributed, for a test to recompute the round's average on its own.
void write_report(const std::string& directory, const std::string& device_id, const RoundReport& report) {
  nlohmann::json out = {{"device_id", device_id},      {"task_id", report.task_id},
                        {"round_id", report.round_id}, {"contributed", report.contributed},
                        {"error", report.error},       {"num_examples", report.result.num_examples}};
  for (const auto& tensor : report.result.model.tensors) {
    nlohmann::json values = nlohmann::json::array();
    size_t n = size_t(tensor.numel());
    for (size_t i = 0; i < n; ++i) {
      if (tensor.dtype == tn::ScalarType::Float)
        values.push_back(reinterpret_cast<const float*>(tensor.data.get())[i]);
      else if (tensor.dtype == tn::ScalarType::Double)
        values.push_back(reinterpret_cast<const double*>(tensor.data.get())[i]);
      else if (tensor.dtype == tn::ScalarType::Long)
        values.push_back(reinterpret_cast<const int64_t*>(tensor.data.get())[i]);
    }
    out["tensors"][tensor.name] = {
        {"dtype", tn::upstream_type_name(tensor.dtype)}, {"shape", tensor.shape}, {"values", values}};
  }
  if (!report.quantised.empty()) out["quantised"] = report.quantised;  // a secure round's masked words
  std::string path = directory + "/" + device_id + "-round" + std::to_string(report.round_id) + ".json";
  std::ofstream(path + ".tmp") << out.dump();
  std::filesystem::rename(path + ".tmp", path);
}

std::mutex log_mutex;

// One line of the process's log (stderr): JSON, its keys in the order given.
void log_line(const nlohmann::ordered_json& line) {
  std::lock_guard lock(log_mutex);
  std::cerr << line.dump() << "\n";
}

// A round the device was selected for: whether it trained, contributed, and what it moved.
nlohmann::ordered_json round_line(const std::string& id, const RoundReport& report) {
  return {{"device", id},
          {"task", report.task_id},
          {"round", report.round_id},
          {"selected", true},
          {"trained", !report.result.model.tensors.empty()},
          {"examples", report.result.num_examples},
          {"contributed", report.contributed},
          {"bytes_received", report.bytes_received},
          {"bytes_sent", report.bytes_sent},
          {"error", report.error}};
}

// One device's life: registration (retried while the coordinator cannot be reached), then rounds
// until it has contributed to --rounds of them, `stop`, or the end of the work. Returns its exit
// status: 0, or kExitWorkEnded when the work ended before its --rounds.
int run_device(const Options& options, const tn::client::DeviceOptions& device_options, int number,
               std::stop_token stop) {
  tn::client::Device device(device_options);
  const std::optional<std::string> id = device.register_retrying(
      stop, tn::client::Milliseconds(options.register_timeout_ms),
      [&](const std::exception& failure, int failures, tn::client::Milliseconds wait) {
        log_line({{"device", number},
                  {"register_failed", failure.what()},
                  {"failures", failures},
                  {"retry_in_ms", wait.count()}});
      });
  if (!id) return 0;  // stopped while registering
  log_line({{"device", *id}, {"number", number}, {"registered_with", options.server}});
  const uint64_t device_seed = options.seed * 65'537 + uint64_t(number);
  auto trainer = [&](const Model& global, const tn::client::v1::RoundConfig& round) {
    return synthetic_training(global, device_seed, round.round_id(), options.examples, options.step);
  };
  int contributed = 0;
  bool work_ended = false;
  std::stop_source enough;
  const std::stop_callback forward(stop, [&] { enough.request_stop(); });
  auto on_round = [&](const RoundReport& report) {
    log_line(round_line(*id, report));
    if (!options.report_dir.empty()) write_report(options.report_dir, *id, report);
    // Only contributions count: an attempt this device could not finish is retried by the
    // coordinator, and the device should be there for it.
    if (report.contributed) ++contributed;
    if (options.rounds > 0 && contributed >= options.rounds) enough.request_stop();
  };
  auto on_work_ended = [&](const tn::client::WorkEnded& ended) {
    for (const auto& task : ended.ended_tasks)
      log_line(
          {{"device", *id}, {"task", task.task_id()}, {"ended", task.state()}, {"reason", task.reason()}});
    const char* next = options.wait_for_next_task ? "waiting" : "exiting";
    log_line({{"device", *id}, {next, "no task is running"}, {"contributed_rounds", contributed}});
    work_ended = !options.wait_for_next_task;
  };
  device.run(trainer, enough.get_token(), on_round, on_work_ended);
  return work_ended && options.rounds > 0 ? kExitWorkEnded : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  std::filesystem::create_directories(options.key_dir);
  if (!options.report_dir.empty()) std::filesystem::create_directories(options.report_dir);
  std::signal(SIGTERM, [](int) { interrupted = true; });
  std::signal(SIGINT, [](int) { interrupted = true; });
  // Each device in a round holds a store connection, a connection to the hub and its I/O
  // thread's descriptors.
  tn::dist::raise_open_files_limit();
  tn::client::DeviceOptions common;
  common.server_address = options.server;
  if (!options.tls_ca.empty()) common.tls_root_certificates_file = options.tls_ca;
  common.metadata.set_platform("synthetic");
  common.check_in_wait = tn::client::Milliseconds(options.check_in_wait_ms);
  common.round_transport = options.round_transport;
  if (options.max_noise_devices > 0)
    common.noise_floor = tn::client::NoiseFloor{options.min_noise_multiplier, options.max_noise_devices};
  common.wait_for_next_task = options.wait_for_next_task;
  common.limits.max_total_bytes = options.max_model_bytes;
  try {
    common.channel = tn::client::open_channel(common);  // reads --tls-ca
  } catch (const std::exception& error) {
    std::cerr << "torchnative-device: " << error.what() << "\n";
    return kExitGaveUp;
  }
  if (options.training_slots > 0)
    common.training_slots = std::make_shared<std::counting_semaphore<>>(options.training_slots);
  std::atomic<bool> gave_up{false}, work_ended_first{false};
  std::stop_source everyone;  // stopped by SIGTERM/SIGINT
  std::vector<std::thread> devices;
  for (int d = 0; d < options.devices; ++d) {
    devices.emplace_back([&, d, stop = everyone.get_token()] {
      tn::client::DeviceOptions device_options = common;
      device_options.key_file = options.key_dir + "/device-" + std::to_string(d) + ".key";
      int outcome = kExitGaveUp;
      try {
        outcome = run_device(options, device_options, d, stop);
      } catch (const std::exception& error) {
        log_line({{"device", d}, {"fatal", error.what()}});
      }
      if (outcome == kExitGaveUp) gave_up = true;
      if (outcome == kExitWorkEnded) work_ended_first = true;
    });
  }
  // A signal stops every device; otherwise each stops after its rounds.
  std::thread watcher([&] {
    while (!interrupted) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    everyone.request_stop();
  });
  for (auto& device : devices) device.join();
  interrupted = true;
  watcher.join();
  return gave_up ? kExitGaveUp : work_ended_first ? kExitWorkEnded : 0;
}
