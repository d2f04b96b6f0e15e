// The contributions of a round's gRPC devices (ROUND_TRANSPORT_GRPC), which reach the coordinator
// by SubmitUpdate instead of the data plane's deadline reduce. SubmitUpdate validates each update,
// packs it into the round's contribution layout (federated/contribution.h) exactly as a data-plane
// device packs its own, and delivers it here; the round's thread waits for them, then reads them
// with the data plane's, in device-id order, so the aggregate has the same bits whichever way each
// device took.
//
// Memory is bounded by `memory_bytes` twice over: contributions kept in memory (past it they go to
// an unlinked spool file, read back with pread), and submissions being received and packed at once
// (a submission waits its turn; one alone is always admitted, whatever its size).
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
#include <variant>
#include <vector>

#include "federated/contribution.h"
#include "torchnative/federated/v1/tensor.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

class UpdateInbox {
 public:
  struct Options {
    uint64_t memory_bytes = uint64_t{256} << 20;
    std::string spool_directory;  // empty: $TMPDIR or /tmp
  };
  // `model` is the round's model and `header` its table as its devices fetch it (version, digest);
  // `expected` the round's gRPC devices.
  UpdateInbox(federated::ContributionLayout layout, federated::Model model, v1::ModelHeader header,
              std::set<federated::DeviceId> expected, std::chrono::steady_clock::time_point deadline,
              Options options);
  ~UpdateInbox();
  UpdateInbox(const UpdateInbox&) = delete;
  UpdateInbox& operator=(const UpdateInbox&) = delete;

  const federated::ContributionLayout& layout() const { return layout_; }
  // The round's model (its tensors shared, not copied) and its version's name, for FetchModel.
  const federated::Model& model() const { return model_; }
  const std::string& model_version() const { return header_.model_version(); }
  // Why `update` (a submitted header) does not have the round model's tensor table (names, dtypes
  // and shapes, in order), or nothing when it does.
  std::optional<std::string> table_mismatch(const v1::ModelHeader& update) const;

  // One submission in progress, from begin() until delivered or dropped (its destructor).
  class Submission {
   public:
    ~Submission();
    Submission(const Submission&) = delete;
    Submission& operator=(const Submission&) = delete;
    // Waits until `bytes` more may be received and packed at once within the memory bound (at
    // most until the round's deadline, false then).
    bool admit(uint64_t bytes);
    // The packed contribution (layout().elements() values), counted in the round unless the
    // inbox closed meanwhile: the reason it was not, or nothing.
    std::optional<std::string> deliver(const std::vector<double>& contribution);

   private:
    friend class UpdateInbox;
    Submission(UpdateInbox& inbox, federated::DeviceId device) : inbox_(inbox), device_(std::move(device)) {}
    UpdateInbox& inbox_;
    const federated::DeviceId device_;
    uint64_t admitted_ = 0;
  };
  // SubmitUpdate from `device`: a submission, or why it may not submit (not one of the round's
  // gRPC devices, its update counted already or on its way, given up, or the inbox closed).
  // A submission that fails (a broken stream, a refused update) leaves the device free to try
  // again until the deadline.
  std::variant<std::unique_ptr<Submission>, std::string> begin(const federated::DeviceId& device);

  // The round's thread: returns once every expected device delivered or was given up, or at the
  // deadline. `gone` is asked, now and then, about each device still awaited and not receiving;
  // a device it names is given up (it may no longer deliver) and passed to `on_given_up`.
  void wait(const std::function<bool(const federated::DeviceId&)>& gone,
            const std::function<void(const federated::DeviceId&)>& on_given_up,
            std::chrono::milliseconds poll);
  // No delivery counts from now on; returns the devices whose contribution did, ascending.
  std::vector<federated::DeviceId> close();
  // Bytes written to the spool file (0 while every contribution fitted in memory).
  uint64_t spooled_bytes() const;
  // Elements [first, first + count) of `device`'s delivered contribution.
  void read(const federated::DeviceId& device, uint64_t first, uint64_t count, double* out) const;

 private:
  struct Kept {
    std::vector<double> memory;  // empty when spooled
    uint64_t spool_offset = 0;   // in bytes, when spooled
  };
  void store(const federated::DeviceId& device, const std::vector<double>& contribution);  // under lock

  const federated::ContributionLayout layout_;
  const federated::Model model_;
  const v1::ModelHeader header_;
  const std::set<federated::DeviceId> expected_;
  const std::chrono::steady_clock::time_point deadline_;
  const Options options_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::set<federated::DeviceId> receiving_;
  std::set<federated::DeviceId> given_up_;
  std::map<federated::DeviceId, Kept> kept_;
  uint64_t kept_in_memory_ = 0;
  uint64_t in_flight_ = 0;
  bool closed_ = false;
  int spool_file_ = -1;
  uint64_t spool_end_ = 0;
};

// The inboxes of the rounds running now, by task and round: where SubmitUpdate finds its round's.
class UpdateInboxes {
 public:
  void open(const std::string& task_id, uint64_t round_id, std::shared_ptr<UpdateInbox> inbox);
  std::shared_ptr<UpdateInbox> find(const std::string& task_id, uint64_t round_id) const;
  // The model version a running round trains from, held in memory, or nothing: FetchModel then
  // serves it from there instead of loading it from the state store for every device.
  std::optional<federated::Model> find_model(const std::string& model_version) const;
  void remove(const std::string& task_id, uint64_t round_id);

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<UpdateInbox>> inboxes_;
};

}  // namespace tn::server
