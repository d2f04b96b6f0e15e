// torchnative-device: takes part in federated rounds with a synthetic trainer, as one device or
// as many devices in one process, for tests and load. Each device has its own identity and its
// own data-plane connections; the devices share one gRPC channel to the coordinator (one
// connection, and one channel's resolver and load-balancing state instead of one per device).
//
// `torchnative-device --help` lists the flags. Exit status 1 when a device gave up (it could not
// register), 0 otherwise.
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "cli/arguments.h"
#include "client/device.h"
#include "distributed/process_group.h"

namespace {

using tn::client::RoundReport;
using tn::client::TrainResult;
using tn::federated::Model;

std::atomic<bool> interrupted{false};

struct Options {
  std::string server, key_dir, report_dir, tls_ca;
  int devices = 1;
  int rounds = 0;        // rounds to contribute to, then stop; 0: until SIGTERM/SIGINT
  int64_t examples = 0;  // 0: each device draws its own from its seed
  uint64_t seed = 1;
  double step = 0.01;
  int check_in_wait_ms = 20'000;
  int training_slots = 0;  // 0: no bound
  uint64_t max_model_bytes = tn::proto::TransferLimits{}.max_total_bytes;
  tn::client::v1::RoundTransport round_transport = tn::client::v1::ROUND_TRANSPORT_DATA_PLANE;
};

Options parse(int argc, char** argv) {
  Options o;
  tn::cli::Command command(
      "torchnative-device",
      "Takes part in federated rounds with a synthetic trainer, as one device or as many "
      "devices in one process, for tests and load. Exit status 1 when a device gave up (it "
      "could not register), 0 otherwise.");
  command.flag("--server", "HOST:PORT", "the coordinator's gRPC address").required().into(o.server);
  command.flag("--key-dir", "DIR", "each device's key, device-N.key, created there on first use")
      .required()
      .into(o.key_dir);
  command.flag("--devices", "N", "devices this process runs, each with its own identity").into(o.devices, 1);
  command
      .flag("--rounds", "R", "each device stops once it has contributed to R rounds; 0: at SIGTERM or SIGINT")
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
  command.parse_or_exit(argc, argv);
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
  std::string path = directory + "/" + device_id + "-round" + std::to_string(report.round_id) + ".json";
  std::ofstream(path + ".tmp") << out.dump();
  std::filesystem::rename(path + ".tmp", path);
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
  common.limits.max_total_bytes = options.max_model_bytes;
  try {
    common.channel = tn::client::open_channel(common);  // reads --tls-ca
  } catch (const std::exception& error) {
    std::cerr << "torchnative-device: " << error.what() << "\n";
    return 1;
  }
  if (options.training_slots > 0)
    common.training_slots = std::make_shared<std::counting_semaphore<>>(options.training_slots);
  std::mutex log;
  std::atomic<bool> failed{false};  // a device gave up (it could not register): exit status 1
  std::stop_source everyone;        // stopped by SIGTERM/SIGINT
  std::vector<std::thread> devices;
  for (int d = 0; d < options.devices; ++d) {
    devices.emplace_back([&, d, stop = everyone.get_token()] {
      tn::client::DeviceOptions device_options = common;
      device_options.key_file = options.key_dir + "/device-" + std::to_string(d) + ".key";
      try {
        tn::client::Device device(device_options);
        const std::string id = device.device_id();
        uint64_t device_seed = options.seed * 65'537 + uint64_t(d);
        int rounds = 0;
        std::stop_source local;
        std::stop_callback forward(stop, [&] { local.request_stop(); });
        auto trainer = [&](const Model& global, const tn::client::v1::RoundConfig& round) {
          return synthetic_training(global, device_seed, round.round_id(), options.examples, options.step);
        };
        device.run(trainer, local.get_token(), [&](const RoundReport& report) {
          {
            std::lock_guard<std::mutex> lock(log);
            std::cerr << nlohmann::json{{"device", id},
                                        {"task", report.task_id},
                                        {"round", report.round_id},
                                        {"contributed", report.contributed},
                                        {"error", report.error}}
                             .dump()
                      << "\n";
          }
          if (!options.report_dir.empty()) write_report(options.report_dir, id, report);
          // Only contributions count: an attempt this device could not finish is retried by the
          // coordinator, and the device should be there for it.
          if (options.rounds > 0 && report.contributed && ++rounds >= options.rounds) local.request_stop();
        });
      } catch (const std::exception& error) {
        std::lock_guard<std::mutex> lock(log);
        std::cerr << nlohmann::json{{"device", d}, {"fatal", error.what()}}.dump() << "\n";
        failed = true;
      }
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
  return failed ? 1 : 0;
}
