// ProcessGroup: argument checks on the caller's thread, then the collective runs in call
// order, on the group's worker thread or on the thread that waits for it (CollectiveQueue);
// point-to-point operations bypass the queue so that a posted receive never holds up a later
// send.
#include "distributed/process_group.h"

#include <sys/resource.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "collectives.h"
#include "reduce_kernels.h"
#include "transport.h"

namespace tn::dist {

size_t Buffer::nbytes() const { return static_cast<size_t>(numel) * element_size(dtype); }

namespace {

// The group's collectives, run one at a time in call order. A thread that waits (without a
// timeout of its own) for a collective runs it, and every one queued ahead of it, itself while
// none is running: a small collective's latency is mostly thread wake-ups, and this leaves one
// (the I/O thread waking the waiter) where a hand-off to a worker and back would add two. The
// worker thread runs what no thread waits for: it leaves a collective to its waiter for
// kWaiterGrace after the call. A call wakes it only when it sleeps with nothing to do; while
// calls keep coming it looks at the queue on a timer instead, so that a run of synchronous
// collectives costs it a wake-up every kWaiterGrace rather than one per call.
class CollectiveQueue {
 public:
  using Task = std::function<void()>;

  // A caller that waits does so microseconds after its call; one that does not (async_op)
  // sees its collective start this much later at most.
  static constexpr auto kWaiterGrace = std::chrono::microseconds(500);
  // How long after a call the worker keeps looking on that timer before it sleeps until the next.
  static constexpr auto kWorkerLinger = std::chrono::milliseconds(5);

  // False once the queue is stopping.
  bool push(const void* key, Task task) {
    bool wake;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      last_push_ = Clock::now();
      pending_.push_back({key, std::move(task), last_push_});
      wake = worker_sleeps_ && !running_;
    }
    if (wake) changed_.notify_all();
    return true;
  }

  void run_worker() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (pending_.empty() && stopping_) return;
      if (pending_.empty() || running_) {
        const auto now = Clock::now();
        if (now < last_push_ + kWorkerLinger) {
          changed_.wait_until(lock, std::min(now + kWaiterGrace, last_push_ + kWorkerLinger));
          continue;
        }
        worker_sleeps_ = true;
        changed_.wait(lock);
        worker_sleeps_ = false;
        continue;
      }
      const auto due = pending_.front().pushed_at + kWaiterGrace;
      if (!stopping_ && Clock::now() < due) {
        changed_.wait_until(lock, due);
        continue;
      }
      Pending next = take_next_locked();
      lock.unlock();
      run(next);
      lock.lock();
    }
  }

  // Runs, on this thread, the queued collectives up to and including the one identified by
  // `key`, as long as no other thread is running one.
  void run_through(const void* key) {
    for (;;) {
      Pending next;
      {
        std::lock_guard lock(mutex_);
        const bool queued =
            std::any_of(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.key == key; });
        if (running_ || !queued) return;
        next = take_next_locked();
      }
      const bool last = next.key == key;
      run(next);
      if (last) return;
    }
  }

  // No more collectives are accepted; the worker runs out the queue (against a transport shut
  // down, so each fails at once) and returns.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
  }
  // After stop() and the worker's return: waits for a collective a waiter is still running.
  void wait_idle() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !running_; });
  }

 private:
  struct Pending {
    const void* key = nullptr;
    Task task;
    Clock::time_point pushed_at;
  };
  Pending take_next_locked() {
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    running_ = true;
    return next;
  }
  void run(Pending& next) {
    next.task();
    bool wake;
    {
      std::lock_guard lock(mutex_);
      running_ = false;
      // The worker sleeping behind a running collective, or the destructor's wait_idle.
      wake = (worker_sleeps_ && !pending_.empty()) || stopping_;
    }
    if (wake) changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> pending_;
  bool running_ = false;
  bool stopping_ = false;
  bool worker_sleeps_ = false;  // waiting for a call or for a running collective to end
  Clock::time_point last_push_;
};

}  // namespace

struct Work::State {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::exception_ptr error;
  int source = -1;
  // Point-to-point work has no worker watching the clock; its waiter enforces the deadline.
  std::optional<Clock::time_point> deadline;
  std::function<void()> on_deadline;
  // Collectives: the group's queue, so that a waiter can run the collective itself.
  std::weak_ptr<CollectiveQueue> queue;
  std::vector<std::function<void()>> on_finished;

  void finish(std::exception_ptr failure, int from = -1) {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      error = failure;
      source = from;
      on_deadline = nullptr;
      callbacks.swap(on_finished);
    }
    done_changed.notify_all();
    for (auto& callback : callbacks) callback();
  }
};

bool Work::is_completed() const {
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

std::exception_ptr Work::exception() const {
  std::lock_guard lock(state_->mutex);
  return state_->error;
}

void Work::on_finished(std::function<void()> callback) {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->done) {
      state_->on_finished.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

int Work::source_rank() const {
  std::lock_guard lock(state_->mutex);
  return state_->source;
}

bool Work::wait(std::optional<Milliseconds> timeout) {
  // A waiter with a timeout of its own must be able to return before the collective ends.
  if (!timeout)
    if (auto queue = state_->queue.lock()) queue->run_through(state_.get());
  std::unique_lock lock(state_->mutex);
  auto finished = [this] { return state_->done; };
  std::optional<Clock::time_point> until = state_->deadline;
  if (timeout) until = std::min(until.value_or(Clock::time_point::max()), Clock::now() + *timeout);
  if (until) {
    if (!state_->done_changed.wait_until(lock, *until, finished)) {
      if (state_->deadline && Clock::now() >= *state_->deadline && state_->on_deadline) {
        auto expire = std::move(state_->on_deadline);
        lock.unlock();
        expire();
        lock.lock();
        state_->done_changed.wait(lock, finished);
      } else {
        return false;
      }
    }
  } else {
    state_->done_changed.wait(lock, finished);
  }
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

struct ProcessGroup::Impl {
  int rank;
  int size;
  ProcessGroupOptions options;
  std::shared_ptr<Store> store;
  std::unique_ptr<Transport> transport;

  std::shared_ptr<CollectiveQueue> queue = std::make_shared<CollectiveQueue>();
  // Taken in call order, under this mutex together with the push, so that every rank numbers
  // the same call the same way.
  std::mutex sequence_mutex;
  uint64_t next_sequence = 0;
  std::thread worker;

  std::shared_ptr<Work> make_work(const std::string& operation) {
    struct ConcreteWork : Work {
      explicit ConcreteWork(std::string name) : Work(std::move(name)) {}
    };
    auto work = std::make_shared<ConcreteWork>(operation);
    work->state_ = std::make_shared<Work::State>();
    return work;
  }

  // Runs `algorithm` as the group's next collective. The sequence number is taken here, in
  // call order, so every rank numbers the same call the same way.
  std::shared_ptr<Work> enqueue(std::optional<Milliseconds> timeout, Signature signature,
                                std::function<void(OpContext&)> algorithm) {
    check_timeout(timeout, collective_name(signature.collective));
    auto work = make_work(collective_name(signature.collective));
    work->state_->queue = queue;
    std::lock_guard lock(sequence_mutex);
    const uint64_t sequence = next_sequence + 1;
    auto task = [this, signature, sequence, algorithm = std::move(algorithm), state = work->state_,
                 timeout = timeout.value_or(options.timeout)] {
      OpContext context(*transport, rank, size, sequence, signature, options, timeout);
      try {
        algorithm(context);
        context.finish_sends();
        transport->retire_collectives_through(sequence);
        state->finish(nullptr);
      } catch (const std::exception& error) {
        // The ranks no longer agree on where they are in the sequence: nothing later can run.
        transport->fail_group(error.what());
        state->finish(std::current_exception());
      }
    };
    if (!queue->push(work->state_.get(), std::move(task))) throw DistError("the process group was destroyed");
    next_sequence = sequence;
    return work;
  }

  // Point-to-point work has no worker watching the clock: its waiter runs on_deadline, which
  // cancels what is pending and fails the group with `late` (an operation that timed out leaves
  // the ranks out of step).
  void expire_at_deadline(const std::shared_ptr<Work::State>& state, Milliseconds timeout, std::string late,
                          std::function<void()> cancel = {}) {
    state->deadline = Clock::now() + timeout;
    state->on_deadline = [this, weak = std::weak_ptr<Work::State>(state), late = std::move(late),
                          cancel = std::move(cancel)] {
      if (cancel) cancel();
      transport->fail_group(late);
      if (auto state = weak.lock()) state->finish(std::make_exception_ptr(TimeoutError(late)));
    };
  }

  static void check_timeout(std::optional<Milliseconds> timeout, const std::string& operation) {
    if (timeout && *timeout <= Milliseconds::zero())
      throw InvalidArgument(operation + ": a timeout must be positive, got " +
                            std::to_string(timeout->count()) + " ms");
  }

  void check_rank(int which, const char* role, const char* operation) const {
    if (which < 0 || which >= size)
      throw InvalidArgument(std::string(operation) + ": " + role + " rank " + std::to_string(which) +
                            " is outside the group of " + std::to_string(size));
  }

  // A star group carries traffic to and from its hub only: anything else is refused by name on
  // the caller's thread, before it takes a sequence number, so the ranks stay in step.
  void refuse_in_star(const std::string& operation) const {
    if (options.topology == Topology::Star)
      throw InvalidArgument(operation +
                            " is not available in a star topology group: star topology routes only through "
                            "the hub (rank " +
                            std::to_string(options.hub) + ")");
  }
  void check_rooted_at_hub(int root, const char* operation) const {
    if (root != options.hub) refuse_in_star(std::string(operation) + " with root " + std::to_string(root));
  }

  void check_buffers(const std::vector<Buffer>& buffers, const Buffer& like, const char* what,
                     const char* operation, bool same_size = true) const {
    if (buffers.size() != static_cast<size_t>(size))
      throw InvalidArgument(std::string(operation) + ": expected " + std::to_string(size) + " " + what +
                            " (one per rank), got " + std::to_string(buffers.size()));
    for (const Buffer& buffer : buffers) {
      if (buffer.dtype != like.dtype)
        throw InvalidArgument(std::string(operation) + ": " + what + " of dtype " +
                              scalar_type_name(buffer.dtype) + " next to " + scalar_type_name(like.dtype));
      if (same_size && buffer.numel != like.numel)
        throw InvalidArgument(std::string(operation) + ": " + what + " of " + std::to_string(buffer.numel) +
                              " elements where " + std::to_string(like.numel) + " are expected");
    }
  }
};

ProcessGroup::ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (size < 1)
    throw InvalidArgument("ProcessGroupLocal: world size must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    throw InvalidArgument("ProcessGroupLocal: rank " + std::to_string(rank) + " is outside a world of " +
                          std::to_string(size));
  if (options.topology == Topology::Star && (options.hub < 0 || options.hub >= size))
    throw InvalidArgument("ProcessGroupLocal: hub rank " + std::to_string(options.hub) +
                          " is outside a world of " + std::to_string(size));
  impl_->rank = rank;
  impl_->size = size;
  impl_->options = options;
  impl_->store = std::move(store);
  impl_->transport = std::make_unique<Transport>(*impl_->store, rank, size, options);
  impl_->worker = std::thread([queue = impl_->queue] { queue->run_worker(); });
}

ProcessGroup::~ProcessGroup() {
  impl_->queue->stop();
  // Closing the transport fails whatever the running collective waits on, so the join is
  // prompt; the operations still queued then fail at once instead of waiting out their timeouts.
  impl_->transport->shutdown();
  impl_->worker.join();
  impl_->queue->wait_idle();
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
const ProcessGroupOptions& ProcessGroup::options() const { return impl_->options; }
bool ProcessGroup::reads_peer_memory() const { return impl_->transport->peer_memory() != nullptr; }

bool ProcessGroup::disconnect(int rank, const std::string& reason) {
  if (rank < 0 || rank >= impl_->size || rank == impl_->rank)
    throw InvalidArgument("ProcessGroupLocal: cannot disconnect rank " + std::to_string(rank) +
                          " from rank " + std::to_string(impl_->rank) + " of a world of " +
                          std::to_string(impl_->size));
  return impl_->transport->disconnect(rank, reason);
}

namespace {

Signature signature_of(Collective collective, const Buffer& buffer, ReduceOp op = ReduceOp::Sum,
                       int root = -1) {
  Signature signature;
  signature.collective = collective;
  signature.dtype = static_cast<int8_t>(buffer.dtype);
  signature.reduce_op = static_cast<uint8_t>(op);
  signature.root = root;
  signature.count = static_cast<uint64_t>(buffer.numel);
  return signature;
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::allreduce(Buffer buffer, ReduceOp op, Timeout timeout) {
  impl_->refuse_in_star("allreduce");
  check_reducible(buffer.dtype, op, "allreduce");
  return impl_->enqueue(timeout, signature_of(Collective::Allreduce, buffer, op),
                        [buffer, op](OpContext& context) mutable { run_allreduce(context, buffer, op); });
}

std::shared_ptr<Work> ProcessGroup::broadcast_to_reachable(Buffer buffer,
                                                           std::shared_ptr<std::vector<int>> lost,
                                                           Timeout timeout) {
  const ProcessGroupOptions& options = impl_->options;
  if (options.topology != Topology::Star || impl_->rank != options.hub)
    throw InvalidArgument(
        "broadcast_to_reachable: only a star group's hub broadcasts to whichever spokes remain; "
        "rank " +
        std::to_string(impl_->rank) + " calls broadcast");
  if (!lost) throw InvalidArgument("broadcast_to_reachable: no list to fill with the lost spokes");
  return impl_->enqueue(
      timeout, signature_of(Collective::Broadcast, buffer, ReduceOp::Sum, impl_->rank),
      [buffer, lost](OpContext& context) mutable { *lost = run_broadcast_to_reachable(context, buffer); });
}

std::shared_ptr<Work> ProcessGroup::broadcast(Buffer buffer, int root, Timeout timeout) {
  impl_->check_rank(root, "root", "broadcast");
  impl_->check_rooted_at_hub(root, "broadcast");
  return impl_->enqueue(timeout, signature_of(Collective::Broadcast, buffer, ReduceOp::Sum, root),
                        [buffer, root](OpContext& context) mutable { run_broadcast(context, buffer, root); });
}

std::shared_ptr<Work> ProcessGroup::reduce(Buffer buffer, int root, ReduceOp op, Timeout timeout) {
  impl_->check_rank(root, "root", "reduce");
  impl_->check_rooted_at_hub(root, "reduce");
  check_reducible(buffer.dtype, op, "reduce");
  return impl_->enqueue(
      timeout, signature_of(Collective::Reduce, buffer, op, root),
      [buffer, root, op](OpContext& context) mutable { run_reduce(context, buffer, root, op); });
}

std::shared_ptr<Work> ProcessGroup::allgather(Buffer input, std::vector<Buffer> outputs, Timeout timeout) {
  impl_->refuse_in_star("allgather");
  impl_->check_buffers(outputs, input, "output buffers", "allgather");
  return impl_->enqueue(timeout, signature_of(Collective::Allgather, input),
                        [input, outputs = std::move(outputs)](OpContext& context) mutable {
                          run_allgather(context, input, outputs);
                        });
}

std::shared_ptr<Work> ProcessGroup::gather(Buffer input, std::vector<Buffer> outputs, int root,
                                           Timeout timeout) {
  impl_->check_rank(root, "root", "gather");
  impl_->check_rooted_at_hub(root, "gather");
  if (rank() == root)
    impl_->check_buffers(outputs, input, "output buffers", "gather");
  else if (!outputs.empty())
    throw InvalidArgument("gather: only the root rank passes output buffers, rank " + std::to_string(rank()) +
                          " passed " + std::to_string(outputs.size()));
  return impl_->enqueue(timeout, signature_of(Collective::Gather, input, ReduceOp::Sum, root),
                        [input, outputs = std::move(outputs), root](OpContext& context) mutable {
                          run_gather(context, input, outputs, root);
                        });
}

std::shared_ptr<Work> ProcessGroup::scatter(std::vector<Buffer> inputs, Buffer output, int root,
                                            Timeout timeout) {
  impl_->check_rank(root, "root", "scatter");
  impl_->check_rooted_at_hub(root, "scatter");
  if (rank() == root)
    impl_->check_buffers(inputs, output, "input buffers", "scatter");
  else if (!inputs.empty())
    throw InvalidArgument("scatter: only the root rank passes input buffers, rank " + std::to_string(rank()) +
                          " passed " + std::to_string(inputs.size()));
  return impl_->enqueue(timeout, signature_of(Collective::Scatter, output, ReduceOp::Sum, root),
                        [inputs = std::move(inputs), output, root](OpContext& context) mutable {
                          run_scatter(context, inputs, output, root);
                        });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(std::vector<Buffer> inputs, Buffer output, ReduceOp op,
                                                   Timeout timeout) {
  impl_->refuse_in_star("reduce_scatter");
  impl_->check_buffers(inputs, output, "input buffers", "reduce_scatter");
  check_reducible(output.dtype, op, "reduce_scatter");
  return impl_->enqueue(timeout, signature_of(Collective::ReduceScatter, output, op),
                        [inputs = std::move(inputs), output, op](OpContext& context) mutable {
                          run_reduce_scatter(context, inputs, output, op);
                        });
}

std::shared_ptr<Work> ProcessGroup::alltoall(std::vector<Buffer> inputs, std::vector<Buffer> outputs,
                                             Timeout timeout) {
  impl_->refuse_in_star("alltoall");
  if (inputs.empty()) throw InvalidArgument("alltoall: no input buffers");
  impl_->check_buffers(inputs, inputs.front(), "input buffers", "alltoall", false);
  impl_->check_buffers(outputs, inputs.front(), "output buffers", "alltoall", false);
  Signature signature = signature_of(Collective::Alltoall, inputs.front());
  signature.count = 0;  // per-pair sizes differ; each receiver checks the length it gets
  return impl_->enqueue(timeout, signature,
                        [inputs = std::move(inputs), outputs = std::move(outputs)](
                            OpContext& context) mutable { run_alltoall(context, inputs, outputs); });
}

std::shared_ptr<Work> ProcessGroup::barrier(Timeout timeout) {
  Signature signature;
  signature.collective = Collective::Barrier;
  return impl_->enqueue(timeout, signature, [](OpContext& context) { run_barrier(context); });
}

std::shared_ptr<Work> ProcessGroup::deadline_reduce(Buffer buffer, int root, ReduceOp op,
                                                    Milliseconds deadline,
                                                    std::shared_ptr<DeadlineReduceResult> result,
                                                    ContributionCheck check) {
  impl_->check_rank(root, "root", "deadline_reduce");
  impl_->check_rooted_at_hub(root, "deadline_reduce");
  check_reducible(buffer.dtype, op, "deadline_reduce");
  if (!result) throw InvalidArgument("deadline_reduce: no result record to fill");
  const auto until = Clock::now() + deadline;
  return impl_->enqueue(std::nullopt, signature_of(Collective::DeadlineReduce, buffer, op, root),
                        [buffer, root, op, until, result, check](OpContext& context) mutable {
                          *result = {};
                          run_deadline_reduce(context, buffer, root, op, until, *result, check, false);
                        });
}

std::shared_ptr<Work> ProcessGroup::deadline_reduce_deferred(ScalarType dtype, int64_t numel, int root,
                                                             ReduceOp op, Milliseconds deadline,
                                                             std::shared_ptr<DeadlineReduceResult> result,
                                                             ContributionCheck check) {
  impl_->check_rank(root, "root", "deadline_reduce_deferred");
  if (root != impl_->rank)
    throw InvalidArgument("deadline_reduce_deferred: rank " + std::to_string(impl_->rank) + " is not root " +
                          std::to_string(root) + "; the other ranks call deadline_reduce");
  impl_->check_rooted_at_hub(root, "deadline_reduce_deferred");
  check_reducible(dtype, op, "deadline_reduce_deferred");
  if (numel < 0) throw InvalidArgument("deadline_reduce_deferred: a negative element count");
  if (!result) throw InvalidArgument("deadline_reduce_deferred: no result record to fill");
  const Buffer nothing{nullptr, dtype, numel, nullptr};  // root's own contribution: none
  const auto until = Clock::now() + deadline;
  return impl_->enqueue(std::nullopt, signature_of(Collective::DeadlineReduce, nothing, op, root),
                        [buffer = nothing, root, op, until, result, check](OpContext& context) mutable {
                          *result = {};
                          run_deadline_reduce(context, buffer, root, op, until, *result, check, true);
                        });
}

namespace {

Signature point_to_point_signature(const Buffer& buffer) {
  Signature signature;
  signature.dtype = static_cast<int8_t>(buffer.dtype);
  signature.count = static_cast<uint64_t>(buffer.numel);
  return signature;
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::send(Buffer buffer, int dst, int64_t tag, Timeout timeout) {
  impl_->check_rank(dst, "destination", "send");
  if (dst == rank()) throw InvalidArgument("send: rank " + std::to_string(dst) + " cannot send to itself");
  if (rank() != impl_->options.hub && dst != impl_->options.hub)
    impl_->refuse_in_star("send from rank " + std::to_string(rank()) + " to rank " + std::to_string(dst));
  Impl::check_timeout(timeout, "send");
  const Milliseconds limit = timeout.value_or(impl_->options.timeout);
  auto work = impl_->make_work("send");
  auto state = work->state_;
  impl_->expire_at_deadline(state, limit,
                            "send with tag " + std::to_string(tag) + " timed out after " +
                                std::to_string(limit.count()) + " ms on rank " + std::to_string(rank()) +
                                " sending to rank " + std::to_string(dst));
  impl_->transport->send(dst, FrameKind::PointToPoint, static_cast<uint64_t>(tag), 0,
                         point_to_point_signature(buffer), buffer.data, buffer.nbytes(), buffer.owner,
                         [state](const Request& request) { state->finish(request.error); });
  return work;
}

std::shared_ptr<Work> ProcessGroup::recv(Buffer buffer, int src, int64_t tag, Timeout timeout) {
  if (src != -1) impl_->check_rank(src, "source", "recv");
  if (src == rank())
    throw InvalidArgument("recv: rank " + std::to_string(src) + " cannot receive from itself");
  // From any source, a spoke can only hear from the hub anyway.
  if (src >= 0 && rank() != impl_->options.hub && src != impl_->options.hub)
    impl_->refuse_in_star("recv on rank " + std::to_string(rank()) + " from rank " + std::to_string(src));
  Impl::check_timeout(timeout, "recv");
  const Milliseconds limit = timeout.value_or(impl_->options.timeout);
  auto work = impl_->make_work("recv");
  auto state = work->state_;
  Transport& transport = *impl_->transport;
  RequestPtr request =
      transport.post_recv(FrameKind::PointToPoint, src, static_cast<uint64_t>(tag), 0,
                          point_to_point_signature(buffer), buffer.data, buffer.nbytes(), buffer.owner,
                          [state](const Request& done) { state->finish(done.error, done.source); });
  impl_->expire_at_deadline(state, limit,
                            "recv with tag " + std::to_string(tag) + " timed out after " +
                                std::to_string(limit.count()) + " ms on rank " + std::to_string(rank()) +
                                " waiting for " +
                                (src < 0 ? std::string("any rank") : "rank " + std::to_string(src)),
                            [&transport, pending = std::weak_ptr<Request>(request)] {
                              if (auto request = pending.lock()) transport.cancel(request);
                            });
  return work;
}

uint64_t raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised{limit.rlim_max, limit.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace tn::dist
