// A secure aggregation round's stages between its thread and its devices' SecAggStage calls
// (docs/secure_aggregation.md, "The round over gRPC"). A device's message is fed to the round's
// CoordinatorSession as it arrives and its call is held; the round's thread waits for the stage's
// messages (wait), then closes the stage, which answers every held call with that device's input
// for the next stage. A device that did not send its message by then is out of the round from
// that stage on, as the session decides; fewer than the threshold left abandons the round.
//
// Held calls are callbacks, not blocked threads: a thousand devices in a stage cost no thread each.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grpcpp/support/status.h"
#include "secure_round.h"
#include "torchnative/federated/v1/device.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

class SecureExchange {
 public:
  // A held SecAggStage call: its response is filled, then `finish` called once.
  struct Call {
    v1::SecAggStageResponse* response = nullptr;
    std::function<void(const grpc::Status&)> finish;
  };

  // Masked inputs arrive in messages of at most `words_per_message` words, except those of the
  // devices `on_plane`, which go into the hub's reduce of the round's data plane (take_masked_sum)
  // while the device says so by a masked_input_on_data_plane message.
  SecureExchange(std::unique_ptr<SecureRound> round, size_t words_per_message,
                 std::set<federated::DeviceId> on_plane = {});
  ~SecureExchange();  // answers the calls still held: the round is over
  SecureExchange(const SecureExchange&) = delete;
  SecureExchange& operator=(const SecureExchange&) = delete;

  // A verified SecAggStage from `device`: taken into the session and held until its stage closes,
  // or answered at once: a masked input chunk that does not end the input (chunk_taken), or a
  // refusal naming why (a device not in the round, a message out of its stage or a second one:
  // FAILED_PRECONDITION; one the session refuses: INVALID_ARGUMENT, and the device is out of the
  // round from then on, so that the stage does not wait for it).
  void take(const federated::DeviceId& device, const v1::SecAggStagePayload& payload, Call call);

  // The devices still in the round at the open stage.
  std::set<federated::DeviceId> in_stage() const;
  // The hub's sum modulo 2^32 of the masked inputs of the data plane's devices `contributors`
  // (exactly those whose words its reduce added), at the masked input stage: taken into the
  // session (CoordinatorSession::receive_masked_sum), and every other device on the data plane is
  // out of the round from then on, its masked_input_on_data_plane refused (FAILED_PRECONDITION,
  // naming `why_not[device]` when given). Throws what the session refuses.
  void take_masked_sum(const std::set<federated::DeviceId>& contributors, std::vector<uint32_t> sum,
                       const std::map<federated::DeviceId, std::string>& why_not);
  // Returns once every device expected at the open stage has sent its message or is `gone`, or at
  // `deadline`; `gone` is asked every `look_every`. Returns the devices given up as gone.
  std::vector<federated::DeviceId> wait(std::chrono::steady_clock::time_point deadline,
                                        const std::function<bool(const federated::DeviceId&)>& gone,
                                        std::chrono::milliseconds look_every);
  // Closes the open stage and answers its held calls with their next stage's input. Throws what
  // the session refuses (BelowThreshold: too few devices left), after answering the held calls
  // with that refusal.
  void close_stage();
  // Once the hub's reduce is over: the answer to a masked_input_on_data_plane from each device of
  // the data plane whose words it did not count (why, when known), by device; empty before.
  std::map<federated::DeviceId, std::string> left_out_answers() const;
  // Which stage is open (advertise keys, share keys, masked input, consistency check, unmask),
  // for the round's events; "done" once unmasking closed.
  const char* stage_name() const;
  const SecureRound& round() const { return *round_; }
  // Once the last stage closed: the devices whose inputs the sum holds, and what a mean-family
  // strategy reads from it (SecureRound::weighted_sum).
  std::vector<federated::DeviceId> contributors() const;
  federated::WeightedSumReader weighted_sum(const federated::Model& round_model) const;

 private:
  enum class Stage { AdvertiseKeys, ShareKeys, MaskedInput, ConsistencyCheck, Unmask, Done };
  // Feeds the message to the session; false when the call was answered here (a chunk taken).
  bool feed(federated::secagg::DeviceIndex index, const v1::SecAggStagePayload& payload, Call& call);
  void answer_next_stage(federated::secagg::DeviceIndex index, v1::SecAggStageResponse& response);
  static Stage stage_of(const v1::SecAggStagePayload& payload);
  static const char* name_of(Stage stage);

  // Feeds a masked_input_on_data_plane: held until the stage closes; false when refused.
  bool hold_plane_delivery(federated::secagg::DeviceIndex index, Call& call);
  std::string left_out_answer(federated::secagg::DeviceIndex index) const;

  const std::unique_ptr<SecureRound> round_;
  const size_t words_per_message_;
  std::set<federated::secagg::DeviceIndex> on_plane_;
  // Once the hub's reduce is over: which devices of the data plane its sum holds, and why not the others.
  bool plane_settled_ = false;
  std::set<federated::secagg::DeviceIndex> plane_contributors_;
  std::map<federated::secagg::DeviceIndex, std::string> plane_refusals_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  Stage stage_ = Stage::AdvertiseKeys;
  std::set<federated::secagg::DeviceIndex> expected_;    // at the open stage
  std::map<federated::secagg::DeviceIndex, Call> held_;  // those that sent it
  std::map<federated::secagg::DeviceIndex, std::vector<v1::SecAggMaskedInput>> chunks_;
  std::vector<uint32_t> sum_;
};

// The running secure rounds' exchanges, by task and round, for SecAggStage.
class SecureExchanges {
 public:
  void open(const std::string& task_id, uint64_t round_id, std::shared_ptr<SecureExchange> exchange);
  std::shared_ptr<SecureExchange> find(const std::string& task_id, uint64_t round_id) const;
  // Keeps the closed round's left_out_answers, its task's last: a device left out by the hub's
  // reduce sends its masked_input_on_data_plane once its words went, and the round, which waits
  // for it no more, can end before it arrives (within 100 ms, measured); it still learns why.
  void remove(const std::string& task_id, uint64_t round_id);
  // The answer kept for `device` of a closed round (remove), if it is its task's last.
  std::optional<std::string> left_out_answer(const std::string& task_id, uint64_t round_id,
                                             const federated::DeviceId& device) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<SecureExchange>> exchanges_;
  std::map<std::string, std::pair<uint64_t, std::map<federated::DeviceId, std::string>>> closed_;
};

}  // namespace tn::server
