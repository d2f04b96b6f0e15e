// The federated hub's reduce: root combines whatever arrived by the deadline, in ascending rank
// order, and says exactly who is in the result. A rank that died or was late is missing, never
// silently partly counted; its late frames are dropped when the operation retires. One whose
// contribution fails root's check, or does not match the reduce (another length or dtype), is
// refused, with the reason.
//
// Contributions stream to root at root's pace, so that a buffer of gigabytes neither travels as
// one frame nor piles up in root's memory. A sender announces itself with an empty "ready" frame
// and sends segment s only once root has granted it; a credit carries how many segments the
// sender may have sent so far. Root posts the receive for a segment before granting it, so every
// segment lands straight in the memory set aside for it, never in the transport's unexpected
// list. When root's copies of the other buffers fit in options().deadline_reduce_spool_bytes,
// root grants everything at once into memory. Past that, root lends each sender at most
// kSpoolWindow landing segments out of a pool of that size, writes every segment that lands to
// an unlinked spool file and frees it, and at the deadline folds the file into its buffer one
// segment at a time. Either way the fold is the same ascending-rank reduction, so the two give
// the same bits. Root tells every sender still owed a credit when the round closes without it.
// A deferred reduce (deadline_reduce_deferred) skips the fold at the deadline: root keeps the
// contributions, in memory or in the spool file, and folds ranges of them when asked.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <mutex>

#include "collectives.h"
#include "reduce_kernels.h"

namespace tn::dist {

namespace {

// Slot phases of a streamed reduction's frames.
constexpr uint32_t kSegmentPhase = 0;  // sender to root: segment s of its buffer
constexpr uint32_t kCreditPhase = 1;   // root to sender: its k-th credit
constexpr uint32_t kReadyPhase = 2;    // sender to root: it has started
uint32_t phase_of(uint32_t slot) { return slot >> 24; }
uint64_t segment_of(uint32_t slot) { return slot & ((1u << 24) - 1); }
// A slot keeps a segment or credit number in 24 bits, and a sender gets at most a credit per
// segment and one that closes the round.
constexpr uint64_t kMaxSegments = (uint64_t{1} << 24) - 1;
// The credit that tells a sender root has closed the round without the rest of its buffer.
constexpr uint64_t kRoundClosed = std::numeric_limits<uint64_t>::max();
// ElementSegments a sender may have granted but not landed while root spools: the next one travels
// while root writes the last.
constexpr uint64_t kSpoolWindow = 2;

// The buffer cut into segments of whole elements.
struct ElementSegments {
  uint64_t bytes = 0;
  uint64_t size = 0;  // bytes of every segment but the last
  uint64_t count = 0;
  uint64_t offset(uint64_t s) const { return s * size; }
  uint64_t length(uint64_t s) const { return std::min(size, bytes - s * size); }
};

ElementSegments segments_of(const OpContext& context, const Buffer& buffer) {
  const uint64_t element = element_size(buffer.dtype), numel = static_cast<uint64_t>(buffer.numel);
  const uint64_t per_segment = std::max(
      {uint64_t{1}, context.options().segment_bytes / element, (numel + kMaxSegments - 1) / kMaxSegments});
  return {numel * element, per_segment * element, (numel + per_segment - 1) / per_segment};
}

// Where root's copy of `peer`'s buffer goes among the others' (root has none of its own).
uint64_t copy_index(int peer, int root) { return static_cast<uint64_t>(peer < root ? peer : peer - 1); }

// Where root keeps the other ranks' segments until the deadline, and how it folds them.
class Keeper {
 public:
  virtual ~Keeper() = default;
  // Memory to receive segment `s` of `peer` into, or null while none is free.
  virtual uint8_t* landing(int peer, uint64_t s) = 0;
  // The segment has landed: keep it; its landing memory may be lent again.
  virtual void keep(int peer, uint64_t s, uint8_t* landed) = 0;
  // A receive into `landed` failed: the memory may be lent again.
  virtual void release(uint8_t* landed) = 0;
  // ElementSegments one sender may have granted and not landed.
  virtual uint64_t window() const = 0;
  virtual std::shared_ptr<const void> owner() const = 0;
  virtual uint64_t spooled_bytes() const = 0;
  // Every segment has landed or never will: memory lent for landing is no longer needed.
  virtual void collected() {}
  // buffer = the ascending-rank reduction of the contributors (root among them).
  virtual void reduce(Buffer& buffer, ReduceOp op, const std::vector<int>& contributors) = 0;
  // out = elements [first, first + count) reduced over `contributors` (root not among them).
  virtual void fold(ScalarType dtype, ReduceOp op, const std::vector<int>& contributors, uint64_t first,
                    uint64_t count, void* out) = 0;
  // out = bytes [first, first + bytes) of `peer`'s contribution (root's own is not kept).
  virtual void read(int peer, uint64_t first, uint64_t bytes, void* out) = 0;
};

class InMemory final : public Keeper {
 public:
  InMemory(const ElementSegments& segments, int size, int root)
      : segments_(segments),
        root_(root),
        copies_(scratch(segments.bytes * static_cast<uint64_t>(size - 1))) {}

  uint8_t* landing(int peer, uint64_t s) override { return copy_of(peer) + segments_.offset(s); }
  void keep(int, uint64_t, uint8_t*) override {}
  void release(uint8_t*) override {}
  uint64_t window() const override { return segments_.count; }
  std::shared_ptr<const void> owner() const override { return copies_; }
  uint64_t spooled_bytes() const override { return 0; }

  void reduce(Buffer& buffer, ReduceOp op, const std::vector<int>& contributors) override {
    std::vector<const void*> sources;
    for (int contributor : contributors)
      sources.push_back(contributor == root_ ? buffer.data : copy_of(contributor));
    reduce_in_order(buffer.dtype, op, buffer.data, sources.data(), static_cast<int>(sources.size()),
                    static_cast<size_t>(buffer.numel));
  }

  void fold(ScalarType dtype, ReduceOp op, const std::vector<int>& contributors, uint64_t first,
            uint64_t count, void* out) override {
    std::vector<const void*> sources;
    for (int contributor : contributors)
      sources.push_back(copy_of(contributor) + first * element_size(dtype));
    reduce_in_order(dtype, op, out, sources.data(), static_cast<int>(sources.size()),
                    static_cast<size_t>(count));
  }

  void read(int peer, uint64_t first, uint64_t bytes, void* out) override {
    std::memcpy(out, copy_of(peer) + first, bytes);
  }

 private:
  uint8_t* copy_of(int peer) const { return copies_.get() + segments_.bytes * copy_index(peer, root_); }

  const ElementSegments segments_;
  const int root_;
  const std::shared_ptr<uint8_t[]> copies_;
};

class Spool final : public Keeper {
 public:
  Spool(const OpContext& context, const ElementSegments& segments)
      : name_(collective_name(context.signature().collective)),
        directory_(spool_directory(context.options())),
        segments_(segments),
        root_(context.rank()) {
    // As much as the budget allows, but no more than every sender can use at once.
    const uint64_t lendable =
        std::clamp<uint64_t>(context.options().deadline_reduce_spool_bytes / segments.size, 1,
                             static_cast<uint64_t>(context.size() - 1) * kSpoolWindow);
    landings_ = scratch(lendable * segments.size);
    for (uint64_t i = 0; i < lendable; ++i) free_.push_back(landings_.get() + i * segments.size);
    std::string path = directory_ + "/torchnative-spool-XXXXXX";
    file_ = ::mkstemp(path.data());
    if (file_ < 0) fail("cannot create a spool file in " + directory_);
    // Unlinked at once: the file lives as long as its descriptor, so it never outlives the
    // process, however that ends.
    ::unlink(path.c_str());
  }
  ~Spool() override { ::close(file_); }

  uint8_t* landing(int, uint64_t) override {
    if (free_.empty()) return nullptr;
    uint8_t* landing = free_.back();
    free_.pop_back();
    return landing;
  }
  void keep(int peer, uint64_t s, uint8_t* landed) override {
    move_all(::pwrite, landed, segments_.length(s), file_offset(peer, s), "writing");
    spooled_bytes_ += segments_.length(s);
    free_.push_back(landed);
  }
  void release(uint8_t* landed) override { free_.push_back(landed); }
  uint64_t window() const override { return kSpoolWindow; }
  std::shared_ptr<const void> owner() const override { return landings_; }
  uint64_t spooled_bytes() const override { return spooled_bytes_; }
  void collected() override {
    free_.clear();
    landings_.reset();
  }

  // One segment at a time, in place in root's buffer: root's own values are set aside first
  // unless root comes first, every other contributor's are read from the file, and AVG folds
  // as SUM and divides at the end, as reduce_in_order does.
  void reduce(Buffer& buffer, ReduceOp op, const std::vector<int>& contributors) override {
    const uint64_t element = element_size(buffer.dtype);
    const ReduceOp fold = op == ReduceOp::Avg ? ReduceOp::Sum : op;
    const auto own = contributors.front() == root_ ? nullptr : scratch(segments_.size);
    const auto incoming = scratch(segments_.size);
    for (uint64_t s = 0; s < segments_.count; ++s) {
      uint8_t* accumulator = static_cast<uint8_t*>(buffer.data) + segments_.offset(s);
      const uint64_t length = segments_.length(s);
      const size_t count = length / element;
      if (own) std::memcpy(own.get(), accumulator, length);
      for (size_t i = 0; i < contributors.size(); ++i) {
        // The first contributor's values become the accumulator; the others fold into it.
        const uint8_t* values = own ? own.get() : accumulator;
        if (contributors[i] != root_) {
          uint8_t* into = i == 0 ? accumulator : incoming.get();
          move_all(::pread, into, length, file_offset(contributors[i], s), "reading");
          values = into;
        }
        if (i == 0) continue;
        const void* sources[] = {accumulator, values};
        reduce_in_order(buffer.dtype, fold, accumulator, sources, 2, count);
      }
      if (op == ReduceOp::Avg)
        finish_average(buffer.dtype, accumulator, static_cast<int>(contributors.size()), count);
    }
  }

  // As reduce folds a segment: the first contributor's values are read into `out`, every other
  // one's into scratch memory and folded in.
  void fold(ScalarType dtype, ReduceOp op, const std::vector<int>& contributors, uint64_t first,
            uint64_t count, void* out) override {
    const uint64_t element = element_size(dtype), bytes = count * element;
    auto* accumulator = static_cast<uint8_t*>(out);
    const auto incoming = scratch(bytes);
    for (size_t i = 0; i < contributors.size(); ++i) {
      uint8_t* into = i == 0 ? accumulator : incoming.get();
      move_all(::pread, into, bytes, file_offset(contributors[i], 0) + first * element, "reading");
      if (i == 0) continue;
      const void* sources[] = {accumulator, into};
      reduce_in_order(dtype, op == ReduceOp::Avg ? ReduceOp::Sum : op, accumulator, sources, 2,
                      static_cast<size_t>(count));
    }
    if (op == ReduceOp::Avg)
      finish_average(dtype, accumulator, static_cast<int>(contributors.size()), static_cast<size_t>(count));
  }

  void read(int peer, uint64_t first, uint64_t bytes, void* out) override {
    move_all(::pread, static_cast<uint8_t*>(out), bytes, file_offset(peer, 0) + first, "reading");
  }

 private:
  static std::string spool_directory(const ProcessGroupOptions& options) {
    if (!options.deadline_reduce_spool_directory.empty()) return options.deadline_reduce_spool_directory;
    const char* temporary = std::getenv("TMPDIR");
    return temporary && *temporary ? temporary : "/tmp";
  }

  uint64_t file_offset(int peer, uint64_t s) const {
    return segments_.bytes * copy_index(peer, root_) + segments_.offset(s);
  }

  // pread or pwrite until every byte has moved (either may move fewer, or be interrupted).
  template <typename Call>
  void move_all(Call call, uint8_t* data, uint64_t bytes, uint64_t offset, const char* doing) const {
    while (bytes > 0) {
      const ssize_t moved = call(file_, data, bytes, static_cast<off_t>(offset));
      if (moved < 0 && errno == EINTR) continue;
      if (moved == 0) errno = EIO;  // the file ends before what root wrote there
      if (moved <= 0) fail(std::string(doing) + " the spool file in " + directory_ + " failed");
      data += moved;
      bytes -= static_cast<uint64_t>(moved);
      offset += static_cast<uint64_t>(moved);
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    const std::string reason = std::strerror(errno);  // before anything else may set errno
    throw DistError(name_ + " on rank " + std::to_string(root_) + ": " + what + " (" + reason + ")");
  }

  const std::string name_;
  const std::string directory_;
  const ElementSegments segments_;
  const int root_;
  std::shared_ptr<uint8_t[]> landings_;
  std::vector<uint8_t*> free_;
  int file_ = -1;
  uint64_t spooled_bytes_ = 0;
};

// Receives of one operation finished on the transport's threads, queued for root's worker.
struct Finished {
  struct Receive {
    int peer;
    uint32_t slot;
    uint8_t* data;
    bool arrived;
    // Why the transport refused the frame it met instead (another length or dtype), if so.
    std::string mismatch;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Receive> queue;
};

// Root's side: grants segments as landing memory allows, keeps what lands, and settles every
// sender as complete (its whole buffer landed) or lost (its connection failed).
class Collector {
 public:
  Collector(OpContext& context, const ElementSegments& segments, Keeper& keeper, const ContributionCheck& check)
      : context_(context), segments_(segments), keeper_(keeper), check_(check), senders_(context.size()) {
    for (int peer = 0; peer < context.size(); ++peer) {
      if (peer == context.rank()) continue;
      senders_[peer].receives.push_back(
          context.recv(peer, OpContext::slot(kReadyPhase, 0), nullptr, 0, nullptr, report_to(peer)));
      ++unsettled_;
    }
  }

  // Until every sender is settled or `deadline` passes; with `every_rank`, until one is left out.
  void collect(Clock::time_point deadline, bool every_rank) {
    while (unsettled_ > 0 && !(every_rank && left_out_ > 0) && Clock::now() < deadline) {
      grant();
      std::deque<Finished::Receive> batch;
      {
        std::unique_lock lock(finished_->mutex);
        finished_->changed.wait_until(lock, deadline, [&] { return !finished_->queue.empty(); });
        batch.swap(finished_->queue);
      }
      for (const auto& receive : batch) handle(receive);
      if (auto failure = context_.transport().group_failure())
        throw PeerError(std::string(collective_name(context_.signature().collective)) +
                        " failed: " + *failure);
    }
  }

  DeadlineReduceResult outcome() const {
    DeadlineReduceResult result;
    for (int peer = 0; peer < context_.size(); ++peer) {
      if (peer == context_.rank() || senders_[peer].state == Sender::State::Complete)
        result.contributors.push_back(peer);
      else if (senders_[peer].state == Sender::State::Refused)
        result.refused.emplace_back(peer, senders_[peer].refusal);
      else
        result.missing.push_back(peer);
    }
    return result;
  }

  // Stops listening to the senders that did not complete and tells those that may be waiting
  // for a credit that the round closed without them.
  void close_round() {
    for (int peer = 0; peer < context_.size(); ++peer) {
      Sender& sender = senders_[peer];
      if (peer == context_.rank() || sender.state == Sender::State::Complete) continue;
      for (const auto& request : sender.receives) context_.transport().cancel(request);
      if (sender.state != Sender::State::Lost && sender.granted < segments_.count)
        context_.tell(peer, OpContext::slot(kCreditPhase, sender.credits++), kRoundClosed);
    }
  }

 private:
  struct Sender {
    enum class State { Announcing, Sending, Complete, Lost, Refused };
    State state = State::Announcing;
    std::string refusal;              // why the check refused its contribution
    uint64_t granted = 0;             // segments it may send
    uint64_t landed = 0;              // segments kept
    uint32_t credits = 0;             // credit frames sent
    bool in_line = false;             // waiting for landing memory
    std::deque<RequestPtr> receives;  // posted and not reported finished yet
  };

  std::function<void(const Request&)> report_to(int peer) {
    return [finished = finished_, peer](const Request& request) {
      std::string mismatch;
      if (request.error) {
        try {
          std::rethrow_exception(request.error);
        } catch (const MismatchError& error) {
          mismatch = error.what();
        } catch (const std::exception&) {
        }
      }
      {
        std::lock_guard lock(finished->mutex);
        finished->queue.push_back({peer, request.header.slot, static_cast<uint8_t*>(request.data),
                                   request.state == Request::State::Done, std::move(mismatch)});
      }
      finished->changed.notify_one();
    };
  }

  bool wants_more(const Sender& sender) const {
    return sender.state == Sender::State::Sending && sender.granted < segments_.count &&
           sender.granted - sender.landed < keeper_.window();
  }

  void line_up(int peer) {
    Sender& sender = senders_[peer];
    if (sender.in_line || !wants_more(sender)) return;
    sender.in_line = true;
    line_.push_back(peer);
  }

  // Lends landing memory to the senders in line, first come first served, posting each
  // segment's receive before the credit that lets the sender send it.
  void grant() {
    while (!line_.empty()) {
      const int peer = line_.front();
      Sender& sender = senders_[peer];
      const uint64_t before = sender.granted;
      while (wants_more(sender)) {
        uint8_t* landing = keeper_.landing(peer, sender.granted);
        if (!landing) break;
        const uint64_t s = sender.granted++;
        sender.receives.push_back(
            context_.recv(peer, OpContext::slot(kSegmentPhase, static_cast<uint32_t>(s)), landing,
                          segments_.length(s), keeper_.owner(), report_to(peer)));
      }
      if (sender.granted > before)
        context_.tell(peer, OpContext::slot(kCreditPhase, sender.credits++), sender.granted);
      if (wants_more(sender)) return;  // out of memory: first in line when some is freed
      line_.pop_front();
      sender.in_line = false;
    }
  }

  void handle(const Finished::Receive& receive) {
    Sender& sender = senders_[receive.peer];
    auto posted =
        std::find_if(sender.receives.begin(), sender.receives.end(),
                     [&](const RequestPtr& request) { return request->header.slot == receive.slot; });
    if (posted != sender.receives.end()) sender.receives.erase(posted);
    const bool segment = phase_of(receive.slot) == kSegmentPhase;
    const bool settled = sender.state != Sender::State::Announcing && sender.state != Sender::State::Sending;
    if (settled || !receive.arrived) {
      if (segment) keeper_.release(receive.data);
      if (settled) return;
      // A sender whose frame does not match the reduce (another length or dtype) is refused,
      // named; one whose connection failed is missing.
      if (receive.mismatch.empty()) return settle(sender, Sender::State::Lost);
      sender.refusal = receive.mismatch;
      return settle(sender, Sender::State::Refused);
    }
    if (segment && check_) {
      const uint64_t s = segment_of(receive.slot);
      if (auto refusal = check_(receive.peer, segments_.offset(s), receive.data, segments_.length(s))) {
        keeper_.release(receive.data);
        sender.refusal = std::move(*refusal);
        return settle(sender, Sender::State::Refused);
      }
    }
    if (segment) {
      keeper_.keep(receive.peer, segment_of(receive.slot), receive.data);
      if (++sender.landed == segments_.count) return settle(sender, Sender::State::Complete);
    } else {
      sender.state = Sender::State::Sending;
      if (segments_.count == 0) return settle(sender, Sender::State::Complete);
    }
    line_up(receive.peer);
  }

  void settle(Sender& sender, Sender::State state) {
    sender.state = state;
    --unsettled_;
    if (state != Sender::State::Complete) ++left_out_;
  }

  OpContext& context_;
  const ElementSegments segments_;
  Keeper& keeper_;
  const ContributionCheck& check_;
  std::vector<Sender> senders_;
  std::shared_ptr<Finished> finished_ = std::make_shared<Finished>();
  std::deque<int> line_;  // senders waiting for landing memory
  int unsettled_ = 0;
  int left_out_ = 0;  // lost or refused
};

// The kept contributions of a deferred reduce, folded on request on the caller's thread.
class KeptContributions final : public DeferredReduction {
 public:
  KeptContributions(std::unique_ptr<Keeper> keeper, ScalarType dtype, ReduceOp op, int64_t numel,
                    std::vector<int> contributors)
      : keeper_(std::move(keeper)),
        dtype_(dtype),
        op_(op),
        numel_(static_cast<uint64_t>(numel)),
        contributors_(std::move(contributors)) {}

  void fold(uint64_t first, uint64_t count, void* out) override {
    check_range(first, count);
    if (contributors_.empty())
      throw InvalidArgument("deadline_reduce_deferred: no rank contributed, there is nothing to fold");
    if (count > 0) keeper_->fold(dtype_, op_, contributors_, first, count, out);
  }

  void read(int rank, uint64_t first, uint64_t count, void* out) override {
    check_range(first, count);
    if (!std::binary_search(contributors_.begin(), contributors_.end(), rank))
      throw InvalidArgument("deadline_reduce_deferred: rank " + std::to_string(rank) +
                            " did not contribute, there is nothing of it to read");
    if (count > 0) keeper_->read(rank, first * element_size(dtype_), count * element_size(dtype_), out);
  }

 private:
  void check_range(uint64_t first, uint64_t count) const {
    if (first > numel_ || count > numel_ - first)
      throw InvalidArgument("deadline_reduce_deferred: elements " + std::to_string(first) + " to " +
                            std::to_string(first + count) + " lie beyond the " + std::to_string(numel_) +
                            " reduced");
  }

  const std::unique_ptr<Keeper> keeper_;
  const ScalarType dtype_;
  const ReduceOp op_;
  const uint64_t numel_;
  const std::vector<int> contributors_;
};

}  // namespace

bool send_streamed(OpContext& context, const Buffer& buffer, int root) {
  const ElementSegments segments = segments_of(context, buffer);
  const auto* data = static_cast<const uint8_t*>(buffer.data);
  context.send(root, OpContext::slot(kReadyPhase, 0), nullptr, 0, nullptr);
  uint64_t granted = 0;
  uint32_t credits = 0;
  for (uint64_t s = 0; s < segments.count; ++s) {
    while (s >= granted) {
      auto credit = std::make_shared<uint64_t>();
      context.wait(
          context.recv(root, OpContext::slot(kCreditPhase, credits++), credit.get(), sizeof *credit, credit));
      if (*credit == kRoundClosed) return false;
      granted = *credit;
    }
    context.send(root, OpContext::slot(kSegmentPhase, static_cast<uint32_t>(s)), data + segments.offset(s),
                 segments.length(s), buffer.owner);
  }
  return true;
}

DeadlineReduceResult receive_streamed(OpContext& context, Buffer& buffer, ReduceOp op,
                                      Clock::time_point deadline, bool every_rank,
                                      const ContributionCheck& check, bool defer) {
  const ElementSegments segments = segments_of(context, buffer);
  std::unique_ptr<Keeper> keeper;
  if (segments.bytes * static_cast<uint64_t>(context.size() - 1) >
      context.options().deadline_reduce_spool_bytes)
    keeper = std::make_unique<Spool>(context, segments);
  else
    keeper = std::make_unique<InMemory>(segments, context.size(), context.rank());
  Collector collector(context, segments, *keeper, check);
  collector.collect(deadline, every_rank);
  DeadlineReduceResult result = collector.outcome();
  if (every_rank && !result.refused.empty())
    throw MismatchError(std::string(collective_name(context.signature().collective)) +
                        " failed: " + result.refused.front().second);
  if (every_rank && !result.missing.empty()) {
    const std::string name = collective_name(context.signature().collective);
    for (int peer : result.missing)
      if (auto failure = context.transport().peer_failure(peer))
        throw PeerError(name + " failed: rank " + std::to_string(peer) + " " + *failure);
    throw TimeoutError(name + " timed out after " + std::to_string(context.timeout().count()) +
                       " ms on rank " + std::to_string(context.rank()) + " waiting for rank " +
                       std::to_string(result.missing.front()));
  }
  collector.close_round();
  keeper->collected();
  result.spooled_bytes = keeper->spooled_bytes();
  if (defer) {
    std::vector<int> others;
    std::copy_if(result.contributors.begin(), result.contributors.end(), std::back_inserter(others),
                 [&](int rank) { return rank != context.rank(); });
    result.deferred = std::make_shared<KeptContributions>(std::move(keeper), buffer.dtype, op, buffer.numel,
                                                          std::move(others));
    return result;
  }
  const auto fold_start = Clock::now();
  keeper->reduce(buffer, op, result.contributors);
  result.fold_seconds = std::chrono::duration<double>(Clock::now() - fold_start).count();
  return result;
}

void run_deadline_reduce(OpContext& context, Buffer& buffer, int root, ReduceOp op,
                         Clock::time_point deadline, DeadlineReduceResult& result,
                         const ContributionCheck& check, bool defer) {
  if (context.rank() != root) {
    // What a sender can know: whether root took its whole buffer before closing the round.
    (send_streamed(context, buffer, root) ? result.contributors : result.missing).push_back(context.rank());
    return;
  }
  result = receive_streamed(context, buffer, op, deadline, false, check, defer);
}

}  // namespace tn::dist
