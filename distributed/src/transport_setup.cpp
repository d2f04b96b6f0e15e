// The transport's setup and teardown: the rendezvous through the store, dialling and accepting
// connections and lanes, the hello handshake that admits them, and shutdown.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <random>

#include "peer_memory.h"
#include "transport_internal.h"

namespace tn::dist {

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += (text.empty() ? "" : ", ") + std::to_string(rank);
  return text;
}

std::string bytes_as_text(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }
Bytes text_as_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

// A hello with this slot opens the peer's lane rather than its connection.
constexpr uint32_t kLaneHello = 1;

}  // namespace

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

}  // namespace tn::dist
