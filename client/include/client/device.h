// The device side of a federated round, as a C++ library (no Python needed): register an
// Ed25519 identity, long-poll the coordinator for work, and take part in the rounds it is
// selected for — receive the model over the round's data plane, train, send the contribution
// (weighted or the values themselves, as the round's DataPlane.contribution says) into the hub's
// deadline reduce; or, for a device that can reach only the coordinator's gRPC port
// (ROUND_TRANSPORT_GRPC), fetch the model with FetchModel and submit the trained model with
// SubmitUpdate.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <semaphore>
#include <stop_token>
#include <string>
#include <vector>

#include "federated/model.h"
#include "proto/model_transfer.h"
#include "torchnative/federated/v1/device.grpc.pb.h"

namespace tn::client {

namespace v1 = ::torchnative::federated::v1;
using Milliseconds = std::chrono::milliseconds;

// Waits between failed attempts: uniformly random in [0, min(maximum, initial * 2^failures)]
// ("full jitter"), so devices cut off together do not come back together.
struct Backoff {
  Milliseconds initial{200};
  Milliseconds maximum{30'000};
  // The wait after `failures` failures before this one (0 for the first failure), drawn from `random`.
  Milliseconds wait(int failures, std::mt19937_64& random) const;
};

// A device's own floor on the noise it adds in a secure round with distributed DP: the share of
// a sum of `devices` devices whose noise has standard deviation `multiplier` times one
// contribution's sensitivity, i.e. a share of standard deviation multiplier / sqrt(devices)
// sensitivities. A round asking for less (or for no noise) is refused before training.
struct NoiseFloor {
  double multiplier = 0;
  uint32_t devices = 0;
};

struct DeviceOptions {
  std::string server_address;  // host:port of the coordinator's device service
  std::string key_file;        // Ed25519 seed, created on first use (proto::SigningKey)
  // PEM root certificates: the channel uses TLS when set, plaintext otherwise.
  std::optional<std::string> tls_root_certificates_file;
  v1::DeviceMetadata metadata;
  Milliseconds check_in_wait{20'000};  // how long one CheckIn may be held by the server
  // How this device takes part in rounds, as its CheckIns ask: the round's data plane, or gRPC
  // alone (FetchModel, SubmitUpdate) where only the coordinator's gRPC port is reachable.
  v1::RoundTransport round_transport = v1::ROUND_TRANSPORT_DATA_PLANE;
  // The least distributed-DP noise this device adds to a secure round, whatever the round says
  // (docs/privacy.md, The device's noise floor): absent, the device adds what the round asks.
  std::optional<NoiseFloor> noise_floor;
  Backoff backoff;
  // What this device accepts from the coordinator: messages on the channel, and the model table a
  // round announces (total bytes, tensors, names, ranks), which sizes the broadcast buffer, the
  // trained model and the contribution, so it is checked before any of them is allocated.
  proto::TransferLimits limits;
  // The most ranks a round's data plane may have: joining it allocates per rank.
  uint32_t max_data_plane_ranks = uint32_t{1} << 16;
  // A channel shared by the devices of one process (open_channel), so that hundreds of them
  // keep one channel's state instead of one each; when null the device opens its own.
  std::shared_ptr<grpc::Channel> channel;
  // Shared by the devices of one process: a device holds a slot from training until its
  // contribution is delivered, the phase that takes three times the model's memory (the
  // trained model and the float64 contribution), so that many devices of a large model fit in
  // one machine. When null a device trains whenever it is ready.
  std::shared_ptr<std::counting_semaphore<>> training_slots;
  // When false, run() returns once the work it came for is over (WorkEnded); when true it keeps
  // checking in for the next task.
  bool wait_for_next_task = true;
};

// The channel to options.server_address: TLS with tls_root_certificates_file when set,
// plaintext otherwise, messages up to limits.max_message_bytes.
std::shared_ptr<grpc::Channel> open_channel(const DeviceOptions& options);

// What a trainer returns: the trained model (full weights, same tensors as the global model),
// how many examples it saw, and metrics to log.
struct TrainResult {
  federated::Model model;
  int64_t num_examples = 0;
  std::map<std::string, double> metrics;
};
using Trainer = std::function<TrainResult(const federated::Model& global, const v1::RoundConfig& round)>;

struct RoundReport {
  std::string task_id;
  uint64_t round_id = 0;
  // The whole contribution reached the hub before it closed the round (the hub may still have
  // refused it: a device cannot know, the round's record says); over gRPC, SubmitUpdate accepted
  // the update (it was validated and counts in the round).
  bool contributed = false;
  std::string error;            // why not, when not
  TrainResult result;           // what this device trained (empty when training did not happen)
  uint64_t bytes_received = 0;  // the round's model, once received whole
  uint64_t bytes_sent = 0;      // the contribution (data plane) or the update (gRPC), once sent whole
  // In a secure aggregation round: the quantised update this device masked (quantise_update's
  // words, the last its capped example count), for a test to recompute the round's sum.
  std::vector<uint32_t> quantised{};
};

// A CheckIn answered that no task is running, after this device took part in a task or saw one
// running: the work it was there for is over.
struct WorkEnded {
  std::vector<v1::EndedTask> ended_tasks;  // the tasks it took part in, as they ended
};

// Called before each wait of Device::register_retrying: the failure, how many so far, the wait.
using RegisterRetry = std::function<void(const std::exception& failure, int failures, Milliseconds wait)>;

class Device {
 public:
  explicit Device(DeviceOptions options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Registers (idempotent: the same key always gets the same id) and returns the device id.
  // From the first registration until the device is destroyed it heartbeats on a timer, at the
  // coordinator's interval, jittered, reporting what it is doing, so that training for longer
  // than the coordinator's liveness window does not make it presumed gone.
  const std::string& device_id();
  // device_id(), retrying while the coordinator cannot be reached (UNAVAILABLE, a deadline),
  // waiting Backoff between attempts, for at most `give_up_after` in all (zero: no bound); any
  // other failure, or the last one, is thrown. nullopt when `stop` was requested first.
  std::optional<std::string> register_retrying(std::stop_token stop, Milliseconds give_up_after,
                                               const RegisterRetry& on_retry = {});
  // One long poll: an assignment, or nothing when the server had no work before its bound.
  std::optional<v1::Assignment> check_in();
  v1::RoundConfig fetch_task(const v1::Assignment& assignment);
  // The coordinator's stored model `version` ("<task id>/<number>": a task's initial model is
  // number 0, and a completed round that started from number N stores its aggregate as N + 1),
  // or nullopt while it has none by that name.
  std::optional<federated::Model> fetch_model(const std::string& version);
  // Receives and checks the model, trains, contributes: over the round's data plane when its
  // configuration has one, else by FetchModel and SubmitUpdate. A round the coordinator says is
  // over (HeartbeatResponse.abandon_round) is left before training or before the upload.
  RoundReport participate(const v1::RoundConfig& round, const Trainer& trainer);
  // check_in -> fetch_task -> participate until `stop`, or until the work is over
  // (DeviceOptions::wait_for_next_task); failures back off (Backoff) and retry, except one no
  // retry can fix, which is thrown: the coordinator's certificate does not verify against
  // tls_root_certificates_file. Calls on_round after every round this device was assigned, and
  // on_work_ended each time the work ends. A stop cancels the CheckIn being held, so that it
  // takes effect at once.
  void run(const Trainer& trainer, std::stop_token stop,
           const std::function<void(const RoundReport&)>& on_round = {},
           const std::function<void(const WorkEnded&)>& on_work_ended = {});

 private:
  // The round's model by FetchModel, trained and checked as the coordinator checks an update, then
  // `send` given the round's model, all within one training slot. Throws what stops it.
  void fetch_train_and(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report,
                       const std::function<void(federated::Model& global)>& send);
  // The same from the round's model `global` however it came (FetchModel, the hub's broadcast).
  void train_and(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report,
                 federated::Model global, const std::function<void(federated::Model& global)>& send);
  // participate() for a round without a data plane; throws what stops it.
  void participate_over_grpc(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report);
  // Its SubmitUpdate of report.result.
  void upload_over_grpc(const v1::RoundConfig& round, RoundReport& report);
  // participate() for a secure aggregation round (secure_stages.h): the model fetched (or, with a
  // data plane, received from the hub's broadcast) and trained, then the update quantised and
  // masked through the SecAggStage stages, the masked input into the hub's reduce when the round
  // has a data plane; throws what stops it.
  void participate_securely(const v1::RoundConfig& round, const Trainer& trainer, RoundReport& report);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tn::client
