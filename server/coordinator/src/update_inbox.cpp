#include "update_inbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace tn::server {

namespace {

using SteadyClock = std::chrono::steady_clock;

// "'weight' float32 [3, 4]".
std::string describe(const v1::TensorEntry& entry) {
  std::string shape;
  for (int64_t size : entry.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
  std::string dtype = "dtype " + std::to_string(entry.dtype());
  if (v1::DType_IsValid(entry.dtype())) {
    dtype = v1::DType_Name(v1::DType(entry.dtype())).substr(std::string_view("DTYPE_").size());
    std::transform(dtype.begin(), dtype.end(), dtype.begin(),
                   [](unsigned char c) { return std::tolower(c); });
  }
  return "'" + entry.name().substr(0, 200) + "' " + dtype + " [" + shape + "]";
}

// pread/pwrite until every byte moved: both may move fewer than asked.
template <typename Move, typename Pointer>
void move_all(Move move, int file, Pointer data, uint64_t bytes, uint64_t offset, const char* doing) {
  while (bytes > 0) {
    const ssize_t moved = move(file, data, bytes, off_t(offset));
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0)
      throw std::runtime_error(std::string("the gRPC updates' spool file failed while ") + doing + ": " +
                               (moved < 0 ? std::strerror(errno) : "it ended early"));
    data += moved;
    bytes -= uint64_t(moved);
    offset += uint64_t(moved);
  }
}

}  // namespace

UpdateInbox::UpdateInbox(federated::ContributionLayout layout, federated::Model model, v1::ModelHeader header,
                         std::set<federated::DeviceId> expected, SteadyClock::time_point deadline,
                         Options options)
    : layout_(std::move(layout)),
      model_(std::move(model)),
      header_(std::move(header)),
      expected_(std::move(expected)),
      deadline_(deadline),
      options_(std::move(options)) {}

UpdateInbox::~UpdateInbox() {
  if (spool_file_ >= 0) ::close(spool_file_);
}

std::optional<std::string> UpdateInbox::table_mismatch(const v1::ModelHeader& update) const {
  if (update.tensors_size() != header_.tensors_size())
    return "the update has " + std::to_string(update.tensors_size()) + " tensors, the round's model " +
           std::to_string(header_.tensors_size());
  for (int i = 0; i < header_.tensors_size(); ++i) {
    const v1::TensorEntry &got = update.tensors(i), &want = header_.tensors(i);
    if (got.name() != want.name() || got.dtype() != want.dtype() ||
        !std::equal(got.shape().begin(), got.shape().end(), want.shape().begin(), want.shape().end()))
      return "the update's tensor " + std::to_string(i) + " is " + describe(got) +
             ", the round's model has " + describe(want) + " there";
  }
  return std::nullopt;
}

std::variant<std::unique_ptr<UpdateInbox::Submission>, std::string> UpdateInbox::begin(
    const federated::DeviceId& device) {
  std::lock_guard lock(mutex_);
  if (closed_ || SteadyClock::now() >= deadline_) return std::string("the round's deadline has passed");
  if (!expected_.contains(device)) return "device " + device + " does not take part in this round over gRPC";
  if (kept_.contains(device)) return "device " + device + "'s update counts in this round already";
  if (receiving_.contains(device)) return "another SubmitUpdate of device " + device + " is in progress";
  if (given_up_.contains(device))
    return "device " + device + " was left out of the round: no heartbeat within the liveness window";
  receiving_.insert(device);
  return std::unique_ptr<Submission>(new Submission(*this, device));
}

UpdateInbox::Submission::~Submission() {
  std::lock_guard lock(inbox_.mutex_);
  inbox_.in_flight_ -= admitted_;
  inbox_.receiving_.erase(device_);
  inbox_.changed_.notify_all();
}

bool UpdateInbox::Submission::admit(uint64_t bytes) {
  std::unique_lock lock(inbox_.mutex_);
  const bool room = inbox_.changed_.wait_until(lock, inbox_.deadline_, [&] {
    return inbox_.closed_ || inbox_.in_flight_ == 0 ||
           inbox_.in_flight_ + bytes <= inbox_.options_.memory_bytes;
  });
  if (!room || inbox_.closed_) return false;
  inbox_.in_flight_ += bytes;
  admitted_ += bytes;
  return true;
}

std::optional<std::string> UpdateInbox::Submission::deliver(const std::vector<double>& contribution) {
  std::lock_guard lock(inbox_.mutex_);
  if (inbox_.closed_) return std::string("the round closed before the update was complete");
  if (inbox_.given_up_.contains(device_))
    return "device " + device_ + " was left out of the round: no heartbeat within the liveness window";
  inbox_.store(device_, contribution);
  inbox_.changed_.notify_all();
  return std::nullopt;
}

void UpdateInbox::store(const federated::DeviceId& device, const std::vector<double>& contribution) {
  if (contribution.size() != layout_.elements())
    throw std::logic_error("a contribution of " + std::to_string(contribution.size()) + " elements, not " +
                           std::to_string(layout_.elements()));
  Kept& kept = kept_[device];
  if (kept_in_memory_ + layout_.bytes() <= options_.memory_bytes) {
    kept.memory = contribution;
    kept_in_memory_ += layout_.bytes();
    return;
  }
  if (spool_file_ < 0) {
    const char* temporary = std::getenv("TMPDIR");
    const std::string directory = !options_.spool_directory.empty() ? options_.spool_directory
                                  : temporary && *temporary         ? temporary
                                                                    : "/tmp";
    std::string path = directory + "/torchnative-updates-XXXXXX";
    spool_file_ = ::mkstemp(path.data());
    if (spool_file_ < 0) {
      kept_.erase(device);
      throw std::runtime_error("cannot create a spool file for the gRPC updates in " + directory + ": " +
                               std::strerror(errno));
    }
    ::unlink(path.c_str());  // lives as long as its descriptor, never longer than the process
  }
  kept.spool_offset = spool_end_;
  try {
    move_all(::pwrite, spool_file_, reinterpret_cast<const char*>(contribution.data()), layout_.bytes(),
             spool_end_, "writing");
  } catch (...) {
    kept_.erase(device);
    throw;
  }
  spool_end_ += layout_.bytes();
}

void UpdateInbox::wait(const std::function<bool(const federated::DeviceId&)>& gone,
                       const std::function<void(const federated::DeviceId&)>& on_given_up,
                       std::chrono::milliseconds poll) {
  std::unique_lock lock(mutex_);
  auto awaited = [&] {
    std::vector<federated::DeviceId> devices;
    for (const federated::DeviceId& device : expected_)
      if (!kept_.contains(device) && !given_up_.contains(device)) devices.push_back(device);
    return devices;
  };
  for (;;) {
    std::vector<federated::DeviceId> devices = awaited();
    if (devices.empty() || SteadyClock::now() >= deadline_) return;
    changed_.wait_until(lock, std::min(deadline_, SteadyClock::now() + poll));
    devices = awaited();
    lock.unlock();  // gone() asks the board, which has a lock of its own
    std::vector<federated::DeviceId> lost;
    for (const federated::DeviceId& device : devices)
      if (gone(device)) lost.push_back(device);
    lock.lock();
    for (const federated::DeviceId& device : lost) {
      if (kept_.contains(device)) continue;  // delivered meanwhile: it counts
      given_up_.insert(device);
      lock.unlock();
      on_given_up(device);
      lock.lock();
    }
  }
}

std::vector<federated::DeviceId> UpdateInbox::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
  std::vector<federated::DeviceId> delivered;
  for (const auto& [device, kept] : kept_) delivered.push_back(device);
  return delivered;
}

uint64_t UpdateInbox::spooled_bytes() const {
  std::lock_guard lock(mutex_);
  return spool_end_;
}

void UpdateInbox::read(const federated::DeviceId& device, uint64_t first, uint64_t count, double* out) const {
  std::lock_guard lock(mutex_);
  auto found = kept_.find(device);
  if (found == kept_.end()) throw std::invalid_argument("device " + device + " delivered no update to read");
  if (first > layout_.elements() || count > layout_.elements() - first)
    throw std::invalid_argument("elements " + std::to_string(first) + " to " + std::to_string(first + count) +
                                " lie beyond the " + std::to_string(layout_.elements()) +
                                " of a contribution");
  const Kept& kept = found->second;
  if (!kept.memory.empty()) {
    std::memcpy(out, kept.memory.data() + first, count * sizeof(double));
    return;
  }
  move_all(::pread, spool_file_, reinterpret_cast<char*>(out), count * sizeof(double),
           kept.spool_offset + first * sizeof(double), "reading");
}

void UpdateInboxes::open(const std::string& task_id, uint64_t round_id, std::shared_ptr<UpdateInbox> inbox) {
  std::lock_guard lock(mutex_);
  inboxes_[{task_id, round_id}] = std::move(inbox);
}

std::shared_ptr<UpdateInbox> UpdateInboxes::find(const std::string& task_id, uint64_t round_id) const {
  std::lock_guard lock(mutex_);
  auto found = inboxes_.find({task_id, round_id});
  return found == inboxes_.end() ? nullptr : found->second;
}

std::optional<federated::Model> UpdateInboxes::find_model(const std::string& model_version) const {
  std::lock_guard lock(mutex_);
  for (const auto& [round, inbox] : inboxes_)
    if (inbox->model_version() == model_version) return inbox->model();
  return std::nullopt;
}

void UpdateInboxes::remove(const std::string& task_id, uint64_t round_id) {
  std::lock_guard lock(mutex_);
  inboxes_.erase({task_id, round_id});
}

}  // namespace tn::server
