#include "transport.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <random>
#include <utility>

#include "core/scalar_type.h"
#include "peer_memory.h"
#include "scratch.h"

namespace tn::dist {

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += (text.empty() ? "" : ", ") + std::to_string(rank);
  return text;
}

std::string bytes_as_text(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }
Bytes text_as_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

// Asio's default completion condition moves at most 64 KiB per system call, which costs
// a poll round trip per 64 KiB on each side of a large frame; this one lets every read or
// write take as much as the socket buffer holds.
size_t as_much_as_possible(const asio::error_code& error, size_t) { return error ? 0 : size_t{1} << 30; }

// An abort frame's reason is text; longer than this is a malformed frame, not a reason.
constexpr uint64_t kMaxAbortReasonBytes = 64 * 1024;

// A hello with this slot opens the peer's lane rather than its connection.
constexpr uint32_t kLaneHello = 1;
// The largest frame a lane carries: a small collective's whole buffer (the one-step algorithms'
// default limit) or a large one's control values.
constexpr uint64_t kLaneMaxBytes = 64 * 1024;

// Lanes are read only by a thread waiting on the transport; a deadline reduce's root collects
// its frames through callbacks instead, so its frames stay on the connections.
bool belongs_on_lane(const FrameHeader& header) {
  return header.kind == FrameKind::Collective && header.length <= kLaneMaxBytes &&
         header.signature.collective != Collective::DeadlineReduce;
}
bool lane_may_complete(const Request& receive) {
  return receive.header.kind == FrameKind::Collective && receive.bytes <= kLaneMaxBytes &&
         receive.header.signature.collective != Collective::DeadlineReduce;
}

}  // namespace

struct Transport::Connection {
  int peer;
  std::shared_ptr<asio::ip::tcp::socket> socket;
  FrameHeader incoming;  // read only by the I/O thread
  // Sends come from any thread; these fields are shared with the I/O thread.
  std::mutex send_mutex;
  std::deque<RequestPtr> send_queue;
  bool writing = false;  // the I/O thread owns the write side until the queue drains
  bool lost = false;
  // The receive whose payload is being read: in no list meanwhile, so a lost connection or a
  // shutdown fails it from here. I/O thread only (and shutdown, once that thread has stopped).
  RequestPtr reading;
};

struct Transport::Lane {
  int fd = -1;  // closed only by shutdown, once no thread reads or writes it
  // Writers: a frame is written whole before the next one starts.
  std::mutex send_mutex;
  bool send_broken = false;  // frames go on the connection instead
  // The lanes' reader's (one thread at a time): the frame being read.
  FrameHeader header;
  uint64_t header_read = 0;
  std::shared_ptr<uint8_t[]> payload;
  uint64_t payload_read = 0;
  // End of stream or error, or the peer's connection was dropped for misbehaving. Set under
  // mutex_; until then a lost peer's receives that the lane may still complete stay posted.
  std::atomic<bool> read_closed = false;
};

Transport::Transport(Store& store, int rank, int size, const ProcessGroupOptions& options)
    : rank_(rank),
      size_(size),
      topology_(options.topology),
      hub_(options.hub),
      timeout_(options.timeout),
      work_guard_(asio::make_work_guard(io_)),
      acceptor_(io_),
      connections_(size),
      peer_failures_(size) {
  const auto timeout = options.timeout;
  const auto deadline = Clock::now() + timeout;
  // A spoke is dialled by no one, so it does not listen (a device behind NAT could not be
  // reached anyway).
  const bool listens = topology_ == Topology::FullMesh || rank_ == hub_;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0)
    throw DistError(std::string("ProcessGroupLocal: eventfd failed: ") + std::strerror(errno));
  lanes_.resize(size_);
  if (topology_ == Topology::FullMesh)
    for (int peer = 0; peer < size_; ++peer)
      if (linked(peer)) lanes_[peer] = std::make_unique<Lane>();
  if (listens) {
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address(options.host), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
  }

  // Every rank proposes a token; the first one stored wins, so all agree on one. Connections
  // that do not present it (a stale rank of an earlier group, a port scanner) are refused.
  std::random_device entropy;
  const uint64_t proposal = (uint64_t{entropy()} << 32) | entropy();
  const Bytes agreed = store.compare_set("session", {}, text_as_bytes(std::to_string(proposal)));
  session_ = std::stoull(bytes_as_text(agreed));
  if (options.same_host_memory && topology_ == Topology::FullMesh && size_ > 1)
    memory_ = std::make_unique<PeerMemory>(store, rank_, size_);
  if (listens) {
    store.set("address/" + std::to_string(rank), text_as_bytes(options.host + ":" + std::to_string(port_)));
    accept_next();
  }
  io_thread_ = std::thread([this] { io_.run(); });
  try {
    int links = 0;
    for (int peer = 0; peer < size_; ++peer) {
      if (!linked(peer)) continue;
      links += lanes_[peer] ? 2 : 1;
      if (dials(peer)) connect_to(store, peer, deadline);
    }
    std::unique_lock lock(mutex_);
    if (!changed_.wait_until(lock, deadline, [&] { return connected_ == links; })) {
      std::vector<int> absent;
      for (int peer = 0; peer < size_; ++peer)
        if (linked(peer) && (!connections_[peer] || (lanes_[peer] && lanes_[peer]->fd < 0)))
          absent.push_back(peer);
      throw TimeoutError("ProcessGroupLocal rendezvous timed out after " + std::to_string(timeout.count()) +
                         " ms on rank " + std::to_string(rank_) + ": rank(s) " + rank_list(absent) +
                         " never connected");
    }
    lock.unlock();
    if (memory_) memory_->decide(store, deadline);
  } catch (...) {
    shutdown();
    throw;
  }
}

Transport::~Transport() {
  shutdown();
  ::close(wake_fd_);
}

const PeerMemory* Transport::peer_memory() const {
  return memory_ && memory_->enabled() ? memory_.get() : nullptr;
}

bool Transport::linked(int peer) const {
  return peer != rank_ && (topology_ == Topology::FullMesh || rank_ == hub_ || peer == hub_);
}

bool Transport::dials(int peer) const {
  return linked(peer) && (topology_ == Topology::FullMesh ? peer < rank_ : peer == hub_);
}

void Transport::shutdown() {
  bool failed;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    failed = peers_told_;
  }
  // A failed group's abort frames may still be queued behind a frame being written; they go
  // out before the connections close (for a moment at most), so that each peer reads why this
  // rank gave up before it sees the disconnection.
  if (failed) {
    const auto until = Clock::now() + std::chrono::milliseconds(500);
    auto drained = [this] {
      for (auto& connection : connections_) {
        if (!connection) continue;
        std::lock_guard lock(connection->send_mutex);
        if (!connection->lost && (connection->writing || !connection->send_queue.empty())) return false;
      }
      return true;
    };
    while (!drained() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  work_guard_.reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
  // The I/O thread is gone: close everything here, each connection marked lost first so that
  // a caller still sending fails instead of writing to a closed descriptor.
  asio::error_code ignored;
  acceptor_.close(ignored);
  std::vector<RequestPtr> unsent;
  for (auto& connection : connections_) {
    if (!connection) continue;
    std::lock_guard lock(connection->send_mutex);
    connection->lost = true;
    connection->socket->close(ignored);
    unsent.insert(unsent.end(), connection->send_queue.begin(), connection->send_queue.end());
    connection->send_queue.clear();
    if (connection->reading) unsent.push_back(std::exchange(connection->reading, nullptr));
  }
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    fail_group_locked("the process group was destroyed", finished);
    for (auto& request : unsent)
      finish_locked(request, std::make_exception_ptr(DistError("the process group was destroyed")), finished);
  }
  run_callbacks(finished);
  // The lanes close once no thread reads them: a reader wakes at the group's failure and leaves.
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !lane_reader_; });
  }
  for (auto& lane : lanes_) {
    if (!lane) continue;
    std::lock_guard lock(lane->send_mutex);
    if (lane->fd >= 0) ::close(lane->fd);
    lane->fd = -1;
  }
}

void Transport::connect_to(Store& store, int peer, Clock::time_point deadline) {
  const auto remaining = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
  const std::string key = "address/" + std::to_string(peer);
  store.wait({key}, std::max(remaining, Milliseconds(1)));
  const std::string address = bytes_as_text(store.get(key));
  const auto colon = address.rfind(':');
  asio::ip::tcp::endpoint endpoint(asio::ip::make_address(address.substr(0, colon)),
                                   static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  auto dial = [&](uint32_t slot) {
    auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
    asio::error_code error;
    for (;;) {
      socket->connect(endpoint, error);
      if (!error) break;
      socket->close();
      if (Clock::now() >= deadline)
        throw TimeoutError("ProcessGroupLocal rendezvous timed out on rank " + std::to_string(rank_) +
                           ": could not connect to rank " + std::to_string(peer) + " at " + address + " (" +
                           error.message() + ")");
      std::this_thread::sleep_for(Milliseconds(20));
    }
    socket->set_option(asio::ip::tcp::no_delay(true));
    FrameHeader hello;
    hello.kind = FrameKind::Hello;
    hello.source = rank_;
    hello.slot = slot;
    hello.tag = session_;
    hello.signature.count = static_cast<uint64_t>(size_);
    asio::write(*socket, asio::buffer(&hello, sizeof hello));
    return socket;
  };
  auto socket = dial(0);
  std::promise<void> installed;
  asio::post(io_, [this, peer, socket, &installed] {
    install(peer, socket);
    installed.set_value();
  });
  installed.get_future().wait();
  if (lanes_[peer]) install_lane(peer, *dial(kLaneHello));
}

void Transport::accept_next() {
  auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
  acceptor_.async_accept(*socket, [this, socket](const asio::error_code& error) {
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!error) read_hello(socket);
    accept_next();
  });
}

void Transport::read_hello(std::shared_ptr<asio::ip::tcp::socket> socket) {
  // A connection that does not say hello promptly is refused, so a silent client cannot hold
  // a slot; legitimate peers send theirs right after connecting.
  auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(10));
  timer->async_wait([socket](const asio::error_code& error) {
    if (!error) socket->close();
  });
  auto hello = std::make_shared<FrameHeader>();
  asio::async_read(*socket, asio::buffer(hello.get(), sizeof *hello),
                   [this, socket, timer, hello](const asio::error_code& error, size_t) {
                     timer->cancel();
                     const bool valid = !error && check_header(*hello, -1, size_).empty() &&
                                        hello->kind == FrameKind::Hello && hello->tag == session_ &&
                                        hello->signature.count == static_cast<uint64_t>(size_) &&
                                        linked(hello->source) && !dials(hello->source) && hello->length == 0;
                     const int peer = valid ? hello->source : -1;
                     const bool lane = valid && hello->slot == kLaneHello;
                     const bool vacant = valid && (lane ? lanes_[peer] && lanes_[peer]->fd < 0
                                                        : hello->slot == 0 && !connections_[peer]);
                     if (!vacant) {
                       asio::error_code ignored;
                       socket->close(ignored);
                       return;
                     }
                     socket->set_option(asio::ip::tcp::no_delay(true));
                     if (lane)
                       install_lane(peer, *socket);
                     else
                       install(peer, socket);
                   });
}

void Transport::install(int peer, std::shared_ptr<asio::ip::tcp::socket> socket) {
  // Loopback's default send buffer (autotuned from 16 KiB) lets one write move about 64 KiB,
  // so a large frame costs an epoll round trip per 64 KiB on each side. A 4 MiB buffer (the
  // usual net.core.wmem_max) lets one write carry a whole segment. Best effort: the kernel
  // clamps it to its limit.
  asio::error_code ignored;
  socket->set_option(asio::socket_base::send_buffer_size(4 << 20), ignored);
  socket->set_option(asio::socket_base::receive_buffer_size(4 << 20), ignored);
  auto connection = std::make_unique<Connection>();
  connection->peer = peer;
  connection->socket = std::move(socket);
  Connection& installed = *connection;
  {
    std::lock_guard lock(mutex_);
    connections_[peer] = std::move(connection);
    ++connected_;
  }
  changed_.notify_all();
  read_header(installed);
}

// The lane leaves Asio's hands: no I/O thread is woken by what arrives on it.
void Transport::install_lane(int peer, asio::ip::tcp::socket& socket) {
  const int fd = socket.release();
  {
    std::lock_guard lock(mutex_);
    lanes_[peer]->fd = fd;
    ++connected_;
  }
  changed_.notify_all();
}

void Transport::read_header(Connection& connection) {
  asio::async_read(*connection.socket, asio::buffer(&connection.incoming, sizeof(FrameHeader)),
                   [this, &connection](const asio::error_code& error, size_t) {
                     if (error) return lose_connection(connection, error);
                     const std::string why = check_header(connection.incoming, connection.peer, size_);
                     if (!why.empty()) return lose_peer(connection, "sent a malformed frame: " + why);
                     on_header(connection);
                   });
}

void Transport::on_header(Connection& connection) {
  const FrameHeader header = connection.incoming;
  if (header.kind == FrameKind::Hello)
    return lose_peer(connection, "sent a second hello on an established connection");
  if (header.kind == FrameKind::Abort) {
    if (header.length > kMaxAbortReasonBytes)
      return lose_peer(connection, "sent an abort frame of " + std::to_string(header.length) + " bytes");
    auto reason = std::make_shared<std::string>(header.length, '\0');
    asio::async_read(*connection.socket, asio::buffer(reason->data(), reason->size()),
                     [this, &connection, reason](const asio::error_code& error, size_t) {
                       if (error) return lose_connection(connection, error);
                       std::vector<RequestPtr> finished;
                       {
                         std::lock_guard lock(mutex_);
                         fail_group_locked("rank " + std::to_string(connection.peer) + " failed: " + *reason,
                                           finished);
                       }
                       run_callbacks(finished);
                       read_header(connection);
                     });
    return;
  }
  RequestPtr request;
  std::optional<std::string> mismatch;
  {
    std::lock_guard lock(mutex_);
    request = take_posted_locked(header);
    if (request) mismatch = mismatch_locked(*request, header);
  }
  if (request && !mismatch) {
    request->source = header.source;
    connection.reading = request;
    asio::async_read(*connection.socket, asio::buffer(request->data, request->bytes), as_much_as_possible,
                     [this, &connection, request](const asio::error_code& error, size_t) {
                       if (error) return lose_connection(connection, error);
                       connection.reading = nullptr;
                       std::vector<RequestPtr> finished;
                       {
                         std::lock_guard lock(mutex_);
                         finish_locked(request, nullptr, finished);
                       }
                       run_callbacks(finished);
                       read_header(connection);
                     });
    return;
  }
  if (request) {
    // The payload is still read (and dropped) so the connection stays in step.
    std::vector<RequestPtr> finished;
    {
      std::lock_guard lock(mutex_);
      refuse_locked(request, header.source, *mismatch, finished);
    }
    run_callbacks(finished);
  }
  // Pooled and not zeroed: an early 256 MiB frame would otherwise be cleared, then overwritten.
  auto payload = scratch(header.length);
  asio::async_read(
      *connection.socket, asio::buffer(payload.get(), header.length), as_much_as_possible,
      [this, &connection, header, payload, dropped = bool(request)](const asio::error_code& error, size_t) {
        if (error) return lose_connection(connection, error);
        if (!dropped) on_payload(header, payload);
        read_header(connection);
      });
}

void Transport::on_payload(const FrameHeader& header, std::shared_ptr<uint8_t[]> payload) {
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    if (header.kind == FrameKind::Collective && any_retired_ && header.tag <= retired_through_) return;
    RequestPtr request = take_posted_locked(header);
    if (!request) {
      unexpected_.push_back({header, std::move(payload)});
      return;
    }
    deliver_locked(request, header, payload.get(), finished);
  }
  run_callbacks(finished);
}

namespace {

bool matches(const Request& request, const FrameHeader& header) {
  return request.header.kind == header.kind && request.header.tag == header.tag &&
         request.header.slot == header.slot && (request.peer < 0 || request.peer == header.source);
}

// Ranks in different collectives may use different slots for the same sequence number, so a
// collective frame whose signature disagrees with any receive posted for that sequence number
// and source is taken by that receive, to be refused as a mismatch rather than left waiting.
bool conflicts(const Request& request, const FrameHeader& header) {
  return header.kind == FrameKind::Collective && request.header.kind == FrameKind::Collective &&
         request.header.tag == header.tag && (request.peer < 0 || request.peer == header.source) &&
         !(request.header.signature == header.signature);
}

}  // namespace

RequestPtr Transport::take_posted_locked(const FrameHeader& header) {
  auto found = std::find_if(posted_.begin(), posted_.end(),
                            [&](const RequestPtr& request) { return matches(*request, header); });
  if (found == posted_.end())
    found = std::find_if(posted_.begin(), posted_.end(),
                         [&](const RequestPtr& request) { return conflicts(*request, header); });
  if (found == posted_.end()) return nullptr;
  RequestPtr request = *found;
  posted_.erase(found);
  return request;
}

std::optional<std::string> Transport::mismatch_locked(const Request& request,
                                                      const FrameHeader& header) const {
  const Signature& expected = request.header.signature;
  const Signature& got = header.signature;
  const std::string from = "rank " + std::to_string(header.source);
  if (header.kind == FrameKind::Collective && !(expected == got))
    return std::string("mismatched collectives: " + from + " called " + describe(got) + " as operation #" +
                       std::to_string(header.tag) + " of the group, rank " + std::to_string(rank_) +
                       " called " + describe(expected));
  if (header.kind == FrameKind::Collective && header.length != request.bytes)
    return std::string("mismatched sizes in " + describe(expected) + ", operation #" +
                       std::to_string(header.tag) + " of the group: " + from + " sent " +
                       std::to_string(header.length) + " bytes where rank " + std::to_string(rank_) +
                       " expected " + std::to_string(request.bytes));
  if (header.length != request.bytes || expected.dtype != got.dtype)
    return std::string("mismatched point-to-point transfer with tag " + std::to_string(header.tag) + ": " +
                       from + " sent " + std::to_string(got.count) + " elements of " +
                       scalar_type_name(static_cast<ScalarType>(got.dtype)) + " (" +
                       std::to_string(header.length) + " bytes), rank " + std::to_string(rank_) +
                       " expected " + std::to_string(expected.count) + " elements of " +
                       scalar_type_name(static_cast<ScalarType>(expected.dtype)) + " (" +
                       std::to_string(request.bytes) + " bytes)");
  return std::nullopt;
}

// A receive that meets a frame it must not take fails naming both sides, and so does the
// group: the ranks no longer agree on what is being sent. Except at a star's hub, whose spokes
// share nothing but the hub: there the spoke that sent it (a misbehaving federated device, say)
// loses its connection, as a dead spoke would, and the others carry on.
void Transport::refuse_locked(const RequestPtr& request, int source, const std::string& mismatch,
                              std::vector<RequestPtr>& finished) {
  finish_locked(request, std::make_exception_ptr(MismatchError(mismatch)), finished);
  if (topology_ == Topology::Star && rank_ == hub_) {
    // On the I/O thread, which owns the connection's socket; the refused receive's callback
    // runs first, so its owner learns of the mismatch before the loss.
    asio::post(io_, [this, source, reason = "sent a mismatched frame: " + mismatch] {
      lose_peer(*connections_[source], reason);
    });
    return;
  }
  fail_group_locked(mismatch, finished);
}

// Completes a receive from a frame that was read into a buffer of its own.
void Transport::deliver_locked(const RequestPtr& request, const FrameHeader& header, const uint8_t* payload,
                               std::vector<RequestPtr>& finished) {
  if (auto mismatch = mismatch_locked(*request, header))
    return refuse_locked(request, header.source, *mismatch, finished);
  request->source = header.source;
  if (header.length > 0) std::memcpy(request->data, payload, header.length);
  finish_locked(request, nullptr, finished);
}

RequestPtr Transport::post_recv(FrameKind kind, int source, uint64_t tag, uint32_t slot,
                                const Signature& expected, void* data, uint64_t bytes,
                                std::shared_ptr<const void> owner,
                                std::function<void(const Request&)> on_finish) {
  auto request = std::make_shared<Request>();
  request->header.kind = kind;
  request->header.tag = tag;
  request->header.slot = slot;
  request->header.signature = expected;
  request->peer = source;
  request->data = data;
  request->bytes = bytes;
  request->owner = std::move(owner);
  request->on_finish = std::move(on_finish);
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    if (group_failure_) {
      finish_locked(request, std::make_exception_ptr(PeerError(*group_failure_)), finished);
    } else {
      auto found = std::find_if(unexpected_.begin(), unexpected_.end(),
                                [&](const Unexpected& frame) { return matches(*request, frame.header); });
      if (found == unexpected_.end())
        found = std::find_if(unexpected_.begin(), unexpected_.end(),
                             [&](const Unexpected& frame) { return conflicts(*request, frame.header); });
      if (found != unexpected_.end()) {
        Unexpected frame = std::move(*found);
        unexpected_.erase(found);
        deliver_locked(request, frame.header, frame.payload.get(), finished);
      } else if (source >= 0 && peer_failures_[source] && !awaits_lane_locked(*request)) {
        finish_locked(request,
                      std::make_exception_ptr(
                          PeerError("rank " + std::to_string(source) + " " + *peer_failures_[source])),
                      finished);
      } else {
        posted_.push_back(request);
      }
    }
  }
  run_callbacks(finished);
  return request;
}

RequestPtr Transport::send(int dest, FrameKind kind, uint64_t tag, uint32_t slot, const Signature& signature,
                           const void* data, uint64_t bytes, std::shared_ptr<const void> owner,
                           std::function<void(const Request&)> on_finish) {
  auto request = std::make_shared<Request>();
  request->is_send = true;
  request->header.kind = kind;
  request->header.source = rank_;
  request->header.tag = tag;
  request->header.slot = slot;
  request->header.signature = signature;
  request->header.length = bytes;
  request->peer = dest;
  request->data = const_cast<void*>(data);
  request->bytes = bytes;
  request->owner = std::move(owner);
  request->on_finish = std::move(on_finish);
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    std::optional<std::string> refusal;
    if (kind != FrameKind::Abort && group_failure_) refusal = *group_failure_;
    if (peer_failures_[dest]) refusal = "rank " + std::to_string(dest) + " " + *peer_failures_[dest];
    if (refusal) finish_locked(request, std::make_exception_ptr(PeerError(*refusal)), finished);
  }
  if (!finished.empty()) {
    run_callbacks(finished);
    return request;
  }
  if (lanes_[dest] && belongs_on_lane(request->header) && send_on_lane(request)) return request;
  queue_send(request);
  return request;
}

namespace {

// One non-blocking sendmsg of what is left of a frame; 0 when the socket takes nothing now.
uint64_t write_some_now(int fd, const FrameHeader& header, const void* data, uint64_t bytes, uint64_t sent) {
  iovec parts[2];
  int count = 0;
  if (sent < sizeof(FrameHeader))
    parts[count++] = {const_cast<char*>(reinterpret_cast<const char*>(&header)) + sent,
                      sizeof(FrameHeader) - sent};
  const uint64_t payload_sent = sent > sizeof(FrameHeader) ? sent - sizeof(FrameHeader) : 0;
  if (bytes > payload_sent)
    parts[count++] = {static_cast<char*>(const_cast<void*>(data)) + payload_sent, bytes - payload_sent};
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = static_cast<size_t>(count);
  const ssize_t written = ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  return written > 0 ? static_cast<uint64_t>(written) : 0;
}

}  // namespace

// A frame goes straight out from the calling thread when nothing is queued ahead of it on
// that connection; whatever the socket does not take at once is left to the I/O thread.
// Small frames so skip a thread hand-off, and large ones get their first socket-buffer's
// worth copied by the caller while the I/O thread is busy receiving.
void Transport::queue_send(const RequestPtr& request) {
  Connection& connection = *connections_[request->peer];
  std::unique_lock lock(connection.send_mutex);
  if (connection.lost) {
    lock.unlock();
    std::vector<RequestPtr> failed;
    {
      std::lock_guard state_lock(mutex_);
      finish_locked(request,
                    std::make_exception_ptr(PeerError("rank " + std::to_string(connection.peer) + " " +
                                                      peer_failures_[connection.peer].value_or("is gone"))),
                    failed);
    }
    run_callbacks(failed);
    return;
  }
  if (!connection.writing && connection.send_queue.empty()) {
    request->sent =
        write_some_now(connection.socket->native_handle(), request->header, request->data, request->bytes, 0);
    if (request->sent == sizeof(FrameHeader) + request->bytes) {
      lock.unlock();
      std::vector<RequestPtr> finished;
      {
        std::lock_guard state_lock(mutex_);
        finish_locked(request, nullptr, finished);
      }
      run_callbacks(finished);
      return;
    }
  }
  connection.send_queue.push_back(request);
  if (!connection.writing) {
    connection.writing = true;
    asio::post(io_, [this, &connection] { write_next(connection); });
  }
}

void Transport::write_next(Connection& connection) {
  RequestPtr request;
  {
    std::lock_guard lock(connection.send_mutex);
    if (connection.lost || connection.send_queue.empty()) {
      connection.writing = false;
      return;
    }
    request = connection.send_queue.front();
  }
  const uint64_t sent = request->sent;
  std::array<asio::const_buffer, 2> buffers;
  if (sent < sizeof(FrameHeader)) {
    buffers = {
        asio::buffer(reinterpret_cast<const char*>(&request->header) + sent, sizeof(FrameHeader) - sent),
        asio::buffer(request->data, request->bytes)};
  } else {
    const uint64_t payload_sent = sent - sizeof(FrameHeader);
    buffers = {asio::const_buffer(), asio::buffer(static_cast<const char*>(request->data) + payload_sent,
                                                  request->bytes - payload_sent)};
  }
  asio::async_write(*connection.socket, buffers, as_much_as_possible,
                    [this, &connection, request](const asio::error_code& error, size_t) {
                      if (error) return lose_connection(connection, error);
                      {
                        std::lock_guard lock(connection.send_mutex);
                        if (!connection.send_queue.empty() && connection.send_queue.front() == request)
                          connection.send_queue.pop_front();
                      }
                      std::vector<RequestPtr> finished;
                      {
                        std::lock_guard lock(mutex_);
                        finish_locked(request, nullptr, finished);
                      }
                      run_callbacks(finished);
                      write_next(connection);
                    });
}

void Transport::lose_connection(Connection& connection, const asio::error_code& error) {
  lose_peer(connection, "disconnected (" + error.message() + ")", true);
}

// A peer that disconnected may have sent frames on its lane that are not read yet (the two
// streams are read independently): the receives those could complete fail once the lane ends.
bool Transport::awaits_lane_locked(const Request& receive) const {
  const Lane* lane = receive.peer >= 0 ? lanes_[receive.peer].get() : nullptr;
  return lane && !lane->read_closed && lane_may_complete(receive);
}

void Transport::lose_peer(Connection& connection, const std::string& reason, bool lane_may_hold_frames) {
  RequestPtr reading = std::exchange(connection.reading, nullptr);
  std::deque<RequestPtr> unsent;
  bool already_lost;
  {
    std::lock_guard lock(connection.send_mutex);
    already_lost = connection.lost;
    connection.lost = true;  // before the close, so no caller writes to a closed descriptor
    unsent.swap(connection.send_queue);
    connection.writing = false;
  }
  if (!already_lost) {
    asio::error_code ignored;
    connection.socket->close(ignored);
  }
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    // A connection closed by our own shutdown is not a peer failure.
    const bool newly_lost = !already_lost && !stopping_;
    if (!lane_may_hold_frames && lanes_[connection.peer]) lanes_[connection.peer]->read_closed = true;
    if (newly_lost) {
      peer_failures_[connection.peer] = reason;
      changed_.notify_all();
    }
    const auto error = std::make_exception_ptr(PeerError("rank " + std::to_string(connection.peer) + " " +
                                                         peer_failures_[connection.peer].value_or(reason)));
    if (newly_lost) {
      for (auto it = posted_.begin(); it != posted_.end();) {
        if ((*it)->peer == connection.peer && !awaits_lane_locked(**it)) {
          finish_locked(*it, error, finished);
          it = posted_.erase(it);
        } else {
          ++it;
        }
      }
    }
    // What was in flight on the connection (a send not yet written, the receive whose payload
    // was being read) is in no list any more: it fails here or never.
    for (auto& request : unsent) finish_locked(request, error, finished);
    if (reading) finish_locked(reading, error, finished);
  }
  run_callbacks(finished);
}

void Transport::finish_locked(const RequestPtr& request, std::exception_ptr error,
                              std::vector<RequestPtr>& finished) {
  if (request->state != Request::State::Pending) return;
  request->state = error ? Request::State::Failed : Request::State::Done;
  request->error = error;
  finished.push_back(request);  // its waiters are woken, and its callback runs, outside the lock
}

// A waiter woken while the lock is still held would go straight back to sleep on the mutex: on
// the path of every small collective, that is one more wake-up.
void Transport::run_callbacks(std::vector<RequestPtr>& finished) {
  if (!finished.empty()) {
    changed_.notify_all();
    if (lane_reader_polls_) wake_lane_reader();
  }
  for (auto& request : finished)
    if (request->on_finish) request->on_finish(*request);
  finished.clear();
}

void Transport::fail_group_locked(const std::string& reason, std::vector<RequestPtr>& finished) {
  if (group_failure_) return;
  group_failure_ = reason;
  changed_.notify_all();
  if (lane_reader_polls_) wake_lane_reader();
  const auto error = std::make_exception_ptr(PeerError(reason));
  for (auto& request : posted_) finish_locked(request, error, finished);
  posted_.clear();
  unexpected_.clear();
}

void Transport::fail_group(const std::string& reason) {
  std::vector<RequestPtr> finished;
  bool tell_peers;
  {
    std::lock_guard lock(mutex_);
    fail_group_locked(reason, finished);
    // The failure is told to every peer once, even one learned from a peer's abort: a rank
    // that fails and then exits must leave its reason ahead of its disconnection on every
    // connection, or a peer that has not yet read the first abort would blame the exit.
    tell_peers = !peers_told_ && !stopping_;
    peers_told_ = true;
  }
  run_callbacks(finished);
  if (!tell_peers) return;
  auto text = std::make_shared<std::string>(*group_failure());
  for (int peer = 0; peer < size_; ++peer) {
    if (!linked(peer) || peer_failure(peer)) continue;
    // Fire and forget: the peer may be the one that is gone.
    auto abort = std::make_shared<Request>();
    abort->is_send = true;
    abort->header.kind = FrameKind::Abort;
    abort->header.source = rank_;
    abort->header.length = text->size();
    abort->peer = peer;
    abort->data = text->data();
    abort->bytes = text->size();
    abort->owner = text;
    queue_send(abort);
  }
}

bool Transport::disconnect(int peer, const std::string& reason) {
  if (!linked(peer) || peer_failure(peer)) return false;
  asio::post(io_, [this, peer, reason] { lose_peer(*connections_[peer], reason); });
  return true;
}

std::optional<std::string> Transport::failure_involving(int peer, Clock::time_point until) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, until, [&] { return group_failure_ || peer_failures_[peer]; });
  // The group's failure came first (a peer's abort frame is read before its disconnection).
  if (group_failure_) return group_failure_;
  if (peer_failures_[peer]) return "rank " + std::to_string(peer) + " " + *peer_failures_[peer];
  return std::nullopt;
}

std::optional<std::string> Transport::group_failure() const {
  std::lock_guard lock(mutex_);
  return group_failure_;
}

std::optional<std::string> Transport::peer_failure(int peer) const {
  std::lock_guard lock(mutex_);
  return peer_failures_[peer];
}

void Transport::retire_collectives_through(uint64_t sequence) {
  std::lock_guard lock(mutex_);
  retired_through_ = sequence;
  any_retired_ = true;
  std::erase_if(unexpected_, [&](const Unexpected& frame) {
    return frame.header.kind == FrameKind::Collective && frame.header.tag <= sequence;
  });
}

void Transport::cancel(const RequestPtr& request) {
  std::lock_guard lock(mutex_);
  std::erase(posted_, request);
}

void Transport::wait(const Request& request, Clock::time_point deadline, Milliseconds timeout,
                     const std::string& operation) {
  std::unique_lock lock(mutex_);
  const bool finished = wait_locked(
      lock, deadline, [&] { return request.state != Request::State::Pending || group_failure_.has_value(); });
  if (request.state == Request::State::Failed) {
    try {
      std::rethrow_exception(request.error);
    } catch (const MismatchError& error) {
      throw MismatchError(operation + " failed: " + error.what());
    } catch (const DistError& error) {
      throw PeerError(operation + " failed: " + error.what());
    }
  }
  if (request.state == Request::State::Done) return;
  if (finished) throw PeerError(operation + " failed: " + *group_failure_);
  const std::string peer = request.peer < 0 ? "any rank" : "rank " + std::to_string(request.peer);
  const std::string reason = operation + " timed out after " + std::to_string(timeout.count()) +
                             " ms on rank " + std::to_string(rank_) + " waiting " +
                             (request.is_send ? "to send to " : "for ") + peer;
  lock.unlock();
  fail_group(reason);
  throw TimeoutError(reason);
}

template <class Done>
bool Transport::wait_locked(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Done done) {
  const bool has_lanes =
      std::any_of(lanes_.begin(), lanes_.end(), [](const auto& lane) { return bool(lane); });
  ++waiters_;
  bool was_reader = false;
  while (!done() && Clock::now() < deadline) {
    if (has_lanes && !lane_reader_ && !stopping_) {
      lane_reader_ = was_reader = true;
      lane_reader_polls_ = true;
      lock.unlock();
      read_lanes(deadline);
      lock.lock();
      lane_reader_ = false;
      continue;
    }
    changed_.wait_until(lock, deadline);
  }
  --waiters_;
  // Another waiter (or shutdown) may be sleeping until the lanes have no reader.
  if (was_reader && (waiters_ > 0 || stopping_)) changed_.notify_all();
  return done();
}

void Transport::wake_lane_reader() {
  const uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(wake_fd_, &one, sizeof one);
}

void Transport::read_lanes(Clock::time_point deadline) {
  std::vector<pollfd> polled;
  std::vector<int> peers;
  for (int peer = 0; peer < size_; ++peer) {
    if (!lanes_[peer] || lanes_[peer]->read_closed || lanes_[peer]->fd < 0) continue;
    polled.push_back({lanes_[peer]->fd, POLLIN, 0});
    peers.push_back(peer);
  }
  polled.push_back({wake_fd_, POLLIN, 0});
  const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
  const timespec timeout{static_cast<time_t>(seconds.count()),
                         static_cast<long>(std::chrono::nanoseconds(left - seconds).count())};
  const int ready = ::ppoll(polled.data(), polled.size(), &timeout, nullptr);
  lane_reader_polls_ = false;
  if (ready <= 0) return;  // the deadline, or a signal: the caller looks again
  if (polled.back().revents) {
    uint64_t count;
    [[maybe_unused]] const auto drained = ::read(wake_fd_, &count, sizeof count);
  }
  for (size_t i = 0; i < peers.size(); ++i)
    if (polled[i].revents) read_lane(peers[i]);
}

// Reads whatever the lane holds now, frame by frame, without blocking; a frame cut short waits
// in the lane for its rest.
void Transport::read_lane(int peer) {
  Lane& lane = *lanes_[peer];
  for (;;) {
    const bool in_header = lane.header_read < sizeof(FrameHeader);
    uint8_t* into = in_header ? reinterpret_cast<uint8_t*>(&lane.header) + lane.header_read
                              : lane.payload.get() + lane.payload_read;
    const uint64_t wanted =
        in_header ? sizeof(FrameHeader) - lane.header_read : lane.header.length - lane.payload_read;
    if (wanted > 0) {
      const ssize_t got = ::recv(lane.fd, into, wanted, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      // The peer's end: its connection, read by the I/O thread, says why (an abort comes first).
      if (got <= 0) return close_lane_reading(peer);
      (in_header ? lane.header_read : lane.payload_read) += static_cast<uint64_t>(got);
      if (static_cast<uint64_t>(got) < wanted) continue;
    }
    if (in_header) {
      std::string why = check_header(lane.header, peer, size_);
      if (why.empty() && !belongs_on_lane(lane.header)) why = "a frame that does not belong on its lane";
      if (!why.empty()) {
        close_lane_reading(peer);
        asio::post(io_,
                   [this, peer, why] { lose_peer(*connections_[peer], "sent a malformed frame: " + why); });
        return;
      }
      lane.payload = scratch(lane.header.length);
      lane.payload_read = 0;
      if (lane.header.length > 0) continue;
    }
    lane.header_read = 0;
    on_payload(lane.header, std::move(lane.payload));
  }
}

// Nothing more is read from the lane; if the peer's connection is already lost, the receives
// left waiting for the lane fail now, as they would have with it.
void Transport::close_lane_reading(int peer) {
  std::vector<RequestPtr> finished;
  {
    std::lock_guard lock(mutex_);
    lanes_[peer]->read_closed = true;
    if (peer_failures_[peer]) {
      const auto error =
          std::make_exception_ptr(PeerError("rank " + std::to_string(peer) + " " + *peer_failures_[peer]));
      std::erase_if(posted_, [&](const RequestPtr& request) {
        if (request->peer != peer) return false;
        finish_locked(request, error, finished);
        return true;
      });
    }
  }
  run_callbacks(finished);
}

// Written by the calling thread (a collective's runner, never the I/O thread), waiting while
// the lane is full: the peer reads it as soon as it waits for this collective or a later one.
// A lane that fails before the frame's first byte leaves it, and every later frame, to the
// connection, which reports the peer's fate.
bool Transport::send_on_lane(const RequestPtr& request) {
  Lane& lane = *lanes_[request->peer];
  std::unique_lock lock(lane.send_mutex);
  if (lane.fd < 0 || lane.send_broken) return false;
  const uint64_t total = sizeof(FrameHeader) + request->bytes;
  const auto until = Clock::now() + timeout_;
  uint64_t sent = 0;
  std::optional<std::string> failure;
  for (;;) {
    const uint64_t more = write_some_now(lane.fd, request->header, request->data, request->bytes, sent);
    sent += more;
    if (sent == total) break;
    if (more == 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (sent == 0) {
        lane.send_broken = true;
        return false;
      }
      failure = "rank " + std::to_string(request->peer) + " disconnected (" + std::strerror(errno) + ")";
      break;
    }
    if ((failure = group_failure())) break;
    if (Clock::now() >= until) {
      failure = "rank " + std::to_string(request->peer) + " did not take a frame within " +
                std::to_string(timeout_.count()) + " ms";
      break;
    }
    pollfd writable{lane.fd, POLLOUT, 0};
    ::poll(&writable, 1, 10);
  }
  if (failure && sent > 0) lane.send_broken = true;  // its stream is cut inside a frame
  lock.unlock();
  std::vector<RequestPtr> finished;
  {
    std::lock_guard state_lock(mutex_);
    const auto& lost = peer_failures_[request->peer];
    if (failure && lost) failure = "rank " + std::to_string(request->peer) + " " + *lost;
    finish_locked(request, failure ? std::make_exception_ptr(PeerError(*failure)) : nullptr, finished);
  }
  run_callbacks(finished);
  return true;
}

}  // namespace tn::dist
