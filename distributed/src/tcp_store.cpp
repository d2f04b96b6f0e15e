// c10d's TCPStore. The master runs an Asio server on one thread that owns the key-value map and
// parks blocking get/wait requests until their keys appear or their timeout passes, so one
// waiting client never stalls the others. Every store object, the master's included, talks to
// that server through its own client connection.
//
// Wire format: every message is a frame made of an 8-byte little-endian body length and the
// body. A request body is a RequestType byte and its fields; a reply body is a ReplyStatus
// byte and its fields. Integers are 8 bytes little-endian; byte strings and key lists are an
// 8-byte count followed by their contents. Lengths are checked against fixed limits before
// anything is allocated for them, and a request that breaks the format ends its connection.
#include <array>
#include <asio.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "distributed/store.h"
#include "store_common.h"

namespace tn::dist {
namespace {

using Clock = std::chrono::steady_clock;
// No value means no deadline: a zero timeout waits without limit, c10d's kNoTimeout.
using Deadline = std::optional<Clock::time_point>;

constexpr size_t kMaxKeyBytes = size_t{1} << 20;
constexpr size_t kMaxValueBytes = size_t{1} << 30;
constexpr size_t kMaxErrorBytes = size_t{1} << 16;
// compare_set, the largest request, carries a key and two values; the rest is headers.
constexpr uint64_t kMaxFrameBytes = kMaxKeyBytes + 2 * kMaxValueBytes + 4096;
constexpr size_t kFrameHeaderBytes = 8;

// The server answers a timed-out get/wait itself, naming the keys still missing; the client
// gives it this much longer than the timeout before giving up on that answer.
constexpr Milliseconds kServerAnswerGrace{1000};
constexpr Milliseconds kFirstConnectRetryPause{10};
constexpr Milliseconds kMaxConnectRetryPause{100};
constexpr Milliseconds kWorkerPollInterval{10};
constexpr Milliseconds kAcceptRetryPause{10};

// With world_size, every participant adds one to this key (c10d's name for it; like c10d's,
// num_keys counts it).
const std::string kWorkersKey = "init/";

enum class RequestType : uint8_t { kSet = 1, kGet, kAdd, kCompareSet, kCheck, kWait, kDeleteKey, kNumKeys };
enum class ReplyStatus : uint8_t { kOk = 0, kTimedOut, kInvalidArgument };

std::string milliseconds_text(Milliseconds duration) { return std::to_string(duration.count()) + " ms"; }

Deadline deadline_after(Milliseconds timeout) {
  if (unlimited_timeout(timeout)) return std::nullopt;
  return Clock::now() + timeout;
}

void check_timeout(const char* operation, Milliseconds timeout) {
  if (timeout < Milliseconds::zero()) {
    throw InvalidArgument(std::string(operation) + ": negative timeout of " + milliseconds_text(timeout));
  }
}

uint64_t decode_u64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int byte = 0; byte < 8; ++byte) value |= uint64_t{bytes[byte]} << (8 * byte);
  return value;
}

// Builds one frame, field by field.
class MessageWriter {
 public:
  // Reserving first also keeps GCC 12's -Warray-bounds from misreading the first push_back.
  explicit MessageWriter(uint8_t kind) {
    frame_.reserve(256);
    frame_.resize(kFrameHeaderBytes);
    frame_.push_back(kind);
  }

  MessageWriter& u64(uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) frame_.push_back(static_cast<uint8_t>(value >> (8 * byte)));
    return *this;
  }
  MessageWriter& i64(int64_t value) { return u64(static_cast<uint64_t>(value)); }
  MessageWriter& flag(bool value) {
    frame_.push_back(value ? 1 : 0);
    return *this;
  }
  MessageWriter& bytes(const Bytes& value) {
    u64(value.size());
    frame_.insert(frame_.end(), value.begin(), value.end());
    return *this;
  }
  MessageWriter& text(const std::string& value) {
    u64(value.size());
    frame_.insert(frame_.end(), value.begin(), value.end());
    return *this;
  }
  MessageWriter& keys(const std::vector<std::string>& keys) {
    u64(keys.size());
    for (const auto& key : keys) text(key);
    return *this;
  }

  // Fills in the header and hands over the frame; the writer is spent afterwards.
  Bytes finish() {
    const uint64_t body_bytes = frame_.size() - kFrameHeaderBytes;
    if (body_bytes > kMaxFrameBytes) {
      throw InvalidArgument("TCPStore request of " + std::to_string(body_bytes) +
                            " bytes exceeds the limit of " + std::to_string(kMaxFrameBytes));
    }
    for (size_t byte = 0; byte < kFrameHeaderBytes; ++byte) {
      frame_[byte] = static_cast<uint8_t>(body_bytes >> (8 * byte));
    }
    return std::move(frame_);
  }

 private:
  Bytes frame_;
};

// Reads the fields of one message body; anything missing or oversized is the sender's fault,
// a PeerError naming `sender`.
class MessageReader {
 public:
  MessageReader(Bytes body, std::string sender) : body_(std::move(body)), sender_(std::move(sender)) {}

  uint8_t u8() { return *take(1); }
  uint64_t u64() { return decode_u64(take(8)); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  bool flag() { return u8() != 0; }
  Milliseconds timeout() {
    const Milliseconds timeout(i64());
    if (timeout < Milliseconds::zero()) malformed("negative timeout");
    return timeout;
  }
  Bytes bytes(size_t max_bytes) {
    const size_t size = length(max_bytes);
    const uint8_t* data = take(size);
    return Bytes(data, data + size);
  }
  std::string text(size_t max_bytes) {
    const size_t size = length(max_bytes);
    return std::string(reinterpret_cast<const char*>(take(size)), size);
  }
  std::string key() { return text(kMaxKeyBytes); }
  std::vector<std::string> keys() {
    // Each key takes at least its 8-byte length, which bounds the count by the body's size.
    const uint64_t count = u64();
    if (count > (body_.size() - position_) / 8) malformed("key count beyond the message");
    std::vector<std::string> keys;
    keys.reserve(count);
    for (uint64_t index = 0; index < count; ++index) keys.push_back(key());
    return keys;
  }
  void expect_end() {
    if (position_ != body_.size()) malformed("trailing bytes");
  }

 private:
  size_t length(size_t max_bytes) {
    const uint64_t size = u64();
    if (size > max_bytes) malformed("field of " + std::to_string(size) + " bytes");
    return size;
  }
  const uint8_t* take(size_t size) {
    if (size > body_.size() - position_) malformed("message cut short");
    const uint8_t* data = body_.data() + position_;
    position_ += size;
    return data;
  }
  [[noreturn]] void malformed(const std::string& what) const {
    throw PeerError("malformed TCPStore message from " + sender_ + ": " + what);
  }

  Bytes body_;
  std::string sender_;
  size_t position_ = 0;
};

Bytes ok_reply() { return MessageWriter(static_cast<uint8_t>(ReplyStatus::kOk)).finish(); }
MessageWriter reply(ReplyStatus status) { return MessageWriter(static_cast<uint8_t>(status)); }
MessageWriter request(RequestType type) { return MessageWriter(static_cast<uint8_t>(type)); }

// ---------------------------------------------------------------------------------------------
// Server

class Server {
 public:
  explicit Server(uint16_t port) : acceptor_(io_), accept_retry_timer_(io_) {
    listen(port);
    port_ = acceptor_.local_endpoint().port();
    accept_next();
    io_thread_ = std::thread([this] { io_.run(); });
  }

  // Stops on the io thread, which owns all server state, then joins it.
  ~Server() {
    asio::post(io_, [this] { shut_down(); });
    io_thread_.join();
  }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct Waiter;
  class Connection;

  // Listens on every interface, as c10d's master does: dual-stack IPv6 where the machine has
  // it, IPv4 otherwise.
  void listen(uint16_t port) {
    asio::error_code error;
    for (const auto protocol : {asio::ip::tcp::v6(), asio::ip::tcp::v4()}) {
      asio::error_code ignored;
      acceptor_.close(ignored);
      acceptor_.open(protocol, error);
      if (error) continue;
      if (protocol == asio::ip::tcp::v6()) acceptor_.set_option(asio::ip::v6_only(false), ignored);
      acceptor_.set_option(asio::socket_base::reuse_address(true), ignored);
      acceptor_.bind(asio::ip::tcp::endpoint(protocol, port), error);
      if (error) continue;
      acceptor_.listen(asio::socket_base::max_listen_connections, error);
      if (!error) return;
    }
    throw DistError("TCPStore master cannot listen on port " + std::to_string(port) + ": " + error.message());
  }

  void accept_next();
  void handle_request(const std::shared_ptr<Connection>& connection, Bytes body);
  void answer_when_present(const std::shared_ptr<Connection>& connection, std::vector<std::string> keys,
                           bool wants_value, Milliseconds timeout);
  Bytes present_reply(const Waiter& waiter);
  void key_written(const std::string& key);
  void finish(const std::shared_ptr<Waiter>& waiter, Bytes reply);
  void forget(const std::shared_ptr<Waiter>& waiter);
  void shut_down();

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_timer_;
  uint16_t port_ = 0;
  // Used only on the io thread, so it never blocks: get is only called for present keys.
  std::shared_ptr<Store> data_ = make_hash_store();
  std::unordered_map<std::string, std::vector<std::shared_ptr<Waiter>>> waiters_by_key_;
  std::unordered_set<std::shared_ptr<Connection>> connections_;
  std::thread io_thread_;
};

// A parked get or wait: registered under each of its keys that was missing when it arrived.
struct Server::Waiter {
  explicit Waiter(asio::io_context& io) : deadline(io) {}
  std::weak_ptr<Connection> connection;
  std::vector<std::string> keys;
  bool wants_value = false;  // get answers with the value, wait with a bare ok
  size_t keys_missing = 0;
  asio::steady_timer deadline;
  bool finished = false;
};

class Server::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, asio::ip::tcp::socket socket) : server_(server), socket_(std::move(socket)) {}

  void start() { read_header(); }

  void send(Bytes frame) {
    if (closed_) return;
    outgoing_.push_back(std::move(frame));
    if (outgoing_.size() == 1) write_next();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    asio::error_code ignored;
    socket_.close(ignored);
    if (parked) server_.forget(std::exchange(parked, nullptr));
    server_.connections_.erase(shared_from_this());
  }

  // Our client sends one request at a time, so this is the only unanswered one.
  std::shared_ptr<Waiter> parked;

 private:
  // Keeps reading even while a request is parked, to notice a client that hangs up.
  void read_header() {
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const asio::error_code& error, size_t) {
                       if (error) return self->close();
                       const uint64_t body_bytes = decode_u64(self->header_.data());
                       if (body_bytes == 0 || body_bytes > kMaxFrameBytes) return self->close();
                       self->read_body(body_bytes);
                     });
  }

  // The body grows as its bytes arrive, so a large announced length costs nothing until the
  // sender actually sends that much.
  void read_body(uint64_t body_bytes) {
    body_.clear();
    asio::async_read(socket_, asio::dynamic_buffer(body_), asio::transfer_exactly(body_bytes),
                     [self = shared_from_this()](const asio::error_code& error, size_t) {
                       if (error) return self->close();
                       self->server_.handle_request(self, std::exchange(self->body_, {}));
                       if (!self->closed_) self->read_header();
                     });
  }

  void write_next() {
    asio::async_write(socket_, asio::buffer(outgoing_.front()),
                      [self = shared_from_this()](const asio::error_code& error, size_t) {
                        if (error) return self->close();
                        self->outgoing_.pop_front();
                        if (!self->outgoing_.empty()) self->write_next();
                      });
  }

  Server& server_;
  asio::ip::tcp::socket socket_;
  std::array<uint8_t, kFrameHeaderBytes> header_{};
  Bytes body_;
  std::deque<Bytes> outgoing_;
  bool closed_ = false;
};

void Server::accept_next() {
  acceptor_.async_accept([this](const asio::error_code& error, asio::ip::tcp::socket socket) {
    if (error == asio::error::operation_aborted) return;
    if (error) {
      // Running out of descriptors passes; retrying at once would only spin.
      accept_retry_timer_.expires_after(kAcceptRetryPause);
      accept_retry_timer_.async_wait([this](const asio::error_code& timer_error) {
        if (!timer_error) accept_next();
      });
      return;
    }
    asio::error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    const auto connection = std::make_shared<Connection>(*this, std::move(socket));
    connections_.insert(connection);
    connection->start();
    accept_next();
  });
}

// A request the server cannot serve (malformed, out of memory) ends its own connection only.
void Server::handle_request(const std::shared_ptr<Connection>& connection, Bytes body) {
  try {
    MessageReader in(std::move(body), "a TCPStore client");
    if (connection->parked) throw PeerError("request sent while another was pending");
    switch (static_cast<RequestType>(in.u8())) {
      case RequestType::kSet: {
        const std::string key = in.key();
        const Bytes value = in.bytes(kMaxValueBytes);
        in.expect_end();
        data_->set(key, value);
        connection->send(ok_reply());
        key_written(key);
        return;
      }
      case RequestType::kGet: {
        std::string key = in.key();
        const Milliseconds timeout = in.timeout();
        in.expect_end();
        answer_when_present(connection, {std::move(key)}, true, timeout);
        return;
      }
      case RequestType::kAdd: {
        const std::string key = in.key();
        const int64_t delta = in.i64();
        in.expect_end();
        int64_t sum = 0;
        try {
          sum = data_->add(key, delta);
        } catch (const InvalidArgument& error) {
          connection->send(reply(ReplyStatus::kInvalidArgument).text(error.what()).finish());
          return;
        }
        connection->send(reply(ReplyStatus::kOk).i64(sum).finish());
        key_written(key);
        return;
      }
      case RequestType::kCompareSet: {
        const std::string key = in.key();
        const Bytes expected = in.bytes(kMaxValueBytes);
        const Bytes desired = in.bytes(kMaxValueBytes);
        in.expect_end();
        connection->send(reply(ReplyStatus::kOk).bytes(data_->compare_set(key, expected, desired)).finish());
        key_written(key);
        return;
      }
      case RequestType::kCheck: {
        const std::vector<std::string> keys = in.keys();
        in.expect_end();
        connection->send(reply(ReplyStatus::kOk).flag(data_->check(keys)).finish());
        return;
      }
      case RequestType::kWait: {
        std::vector<std::string> keys = in.keys();
        const Milliseconds timeout = in.timeout();
        in.expect_end();
        answer_when_present(connection, std::move(keys), false, timeout);
        return;
      }
      case RequestType::kDeleteKey: {
        const std::string key = in.key();
        in.expect_end();
        connection->send(reply(ReplyStatus::kOk).flag(data_->delete_key(key)).finish());
        return;
      }
      case RequestType::kNumKeys:
        in.expect_end();
        connection->send(reply(ReplyStatus::kOk).i64(data_->num_keys()).finish());
        return;
    }
    throw PeerError("unknown request type");
  } catch (const std::exception&) {
    connection->close();
  }
}

void Server::answer_when_present(const std::shared_ptr<Connection>& connection, std::vector<std::string> keys,
                                 bool wants_value, Milliseconds timeout) {
  auto waiter = std::make_shared<Waiter>(io_);
  waiter->connection = connection;
  waiter->keys = std::move(keys);
  waiter->wants_value = wants_value;
  for (const auto& key : waiter->keys) {
    if (data_->check({key})) continue;
    waiters_by_key_[key].push_back(waiter);
    ++waiter->keys_missing;
  }
  if (waiter->keys_missing == 0) {
    connection->send(present_reply(*waiter));
    return;
  }
  connection->parked = waiter;
  if (unlimited_timeout(timeout)) return;
  waiter->deadline.expires_after(timeout);
  waiter->deadline.async_wait([this, waiter](const asio::error_code& error) {
    if (error || waiter->finished) return;
    std::vector<uint64_t> missing_indices;
    for (size_t index = 0; index < waiter->keys.size(); ++index) {
      if (!data_->check({waiter->keys[index]})) missing_indices.push_back(index);
    }
    auto timed_out = reply(ReplyStatus::kTimedOut);
    timed_out.u64(missing_indices.size());
    for (const uint64_t index : missing_indices) timed_out.u64(index);
    finish(waiter, timed_out.finish());
  });
}

Bytes Server::present_reply(const Waiter& waiter) {
  if (!waiter.wants_value) return ok_reply();
  return reply(ReplyStatus::kOk).bytes(data_->get(waiter.keys.front())).finish();
}

// A waiter counts each of its keys once, when the key first appears; like c10d, a key deleted
// again before the others appear still counts as seen.
void Server::key_written(const std::string& key) {
  const auto found = waiters_by_key_.find(key);
  if (found == waiters_by_key_.end() || !data_->check({key})) return;
  const auto waiters = std::move(found->second);
  waiters_by_key_.erase(found);
  for (const auto& waiter : waiters) {
    if (!waiter->finished && --waiter->keys_missing == 0) finish(waiter, present_reply(*waiter));
  }
}

void Server::finish(const std::shared_ptr<Waiter>& waiter, Bytes reply) {
  forget(waiter);
  if (const auto connection = waiter->connection.lock()) {
    connection->parked = nullptr;
    connection->send(std::move(reply));
  }
}

// Retires a waiter: no answer will be sent for it any more.
void Server::forget(const std::shared_ptr<Waiter>& waiter) {
  waiter->finished = true;
  waiter->deadline.cancel();
  for (const auto& key : waiter->keys) {
    const auto found = waiters_by_key_.find(key);
    if (found == waiters_by_key_.end()) continue;
    std::erase(found->second, waiter);
    if (found->second.empty()) waiters_by_key_.erase(found);
  }
}

void Server::shut_down() {
  asio::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_timer_.cancel();
  for (const auto& connection : std::exchange(connections_, {})) connection->close();
  // Everything is closed, so run() would return by itself; stopping makes sure of it.
  io_.stop();
}

// ---------------------------------------------------------------------------------------------
// Client

// One connection to the server, used by one thread at a time. Operations run on a private
// io_context until they finish or their deadline passes.
class Client {
 public:
  Client(std::string host, uint16_t port)
      : host_(std::move(host)), port_(port), address_(host_ + ":" + std::to_string(port_)) {}

  const std::string& address() const { return address_; }

  // Workers may start before their master, so refused connections are retried until timeout.
  void connect_with_retries(Milliseconds timeout) {
    const Deadline deadline = deadline_after(timeout);
    Milliseconds pause = kFirstConnectRetryPause;
    for (;;) {
      const asio::error_code error = connect_once(deadline);
      if (!error) return;
      const auto now = Clock::now();
      if (deadline && now >= *deadline) {
        throw TimeoutError("TCPStore client timed out after " + milliseconds_text(timeout) +
                           " connecting to " + address_ + " (" + error.message() + ")");
      }
      std::this_thread::sleep_for(deadline ? std::min<Clock::duration>(pause, *deadline - now) : pause);
      pause = std::min(pause * 2, kMaxConnectRetryPause);
    }
  }

  // Sends one request and returns the reply's body, or nothing when the reply misses the
  // deadline. A missed reply closes the connection (the next exchange reconnects), so a late
  // answer can never be taken for the answer to a later request.
  std::optional<Bytes> exchange(const Bytes& frame, Deadline deadline) {
    if (!socket_.is_open()) {
      if (const asio::error_code error = connect_once(deadline)) {
        throw PeerError("cannot reach the TCPStore at " + address_ + " (" + error.message() + ")");
      }
    }
    asio::error_code error;
    std::array<uint8_t, kFrameHeaderBytes> header{};
    Bytes body;
    asio::async_write(socket_, asio::buffer(frame), [&](const asio::error_code& write_error, size_t) {
      if (write_error) {
        error = write_error;
        return;
      }
      asio::async_read(socket_, asio::buffer(header), [&](const asio::error_code& header_error, size_t) {
        if (header_error) {
          error = header_error;
          return;
        }
        const uint64_t body_bytes = decode_u64(header.data());
        if (body_bytes == 0 || body_bytes > kMaxFrameBytes) {
          error = asio::error::message_size;
          return;
        }
        asio::async_read(socket_, asio::dynamic_buffer(body), asio::transfer_exactly(body_bytes),
                         [&](const asio::error_code& body_error, size_t) { error = body_error; });
      });
    });
    if (!run_until(deadline)) return std::nullopt;
    if (error) {
      asio::error_code ignored;
      socket_.close(ignored);
      throw PeerError("lost the connection to the TCPStore at " + address_ + " (" + error.message() + ")");
    }
    return body;
  }

 private:
  asio::error_code connect_once(Deadline deadline) {
    asio::error_code error;
    const auto endpoints = resolve(deadline, error);
    if (error) return error;
    asio::async_connect(socket_, endpoints,
                        [&](const asio::error_code& connect_error, const asio::ip::tcp::endpoint&) {
                          error = connect_error;
                        });
    if (!run_until(deadline)) return asio::error::timed_out;
    if (!error) socket_.set_option(asio::ip::tcp::no_delay(true), error);
    if (error) {
      asio::error_code ignored;
      socket_.close(ignored);
    }
    return error;
  }

  // Name resolution (getaddrinfo) cannot be cancelled and a broken resolver can take far longer
  // than the store's timeout: it runs on a thread of its own, abandoned at the deadline.
  asio::ip::tcp::resolver::results_type resolve(Deadline deadline, asio::error_code& error) {
    struct Lookup {
      std::mutex mutex;
      std::condition_variable done_changed;
      bool done = false;
      asio::error_code error;
      asio::ip::tcp::resolver::results_type results;
    };
    auto lookup = std::make_shared<Lookup>();
    std::thread([lookup, host = host_, port = std::to_string(port_)] {
      asio::io_context context;
      asio::ip::tcp::resolver resolver(context);
      asio::error_code resolve_error;
      auto results = resolver.resolve(host, port, resolve_error);
      std::lock_guard lock(lookup->mutex);
      lookup->error = resolve_error;
      lookup->results = std::move(results);
      lookup->done = true;
      lookup->done_changed.notify_all();
    }).detach();
    std::unique_lock lock(lookup->mutex);
    auto finished = [&] { return lookup->done; };
    if (deadline)
      lookup->done_changed.wait_until(lock, *deadline, finished);
    else
      lookup->done_changed.wait(lock, finished);
    if (!lookup->done) {
      error = asio::error::timed_out;
      return {};
    }
    error = lookup->error;
    return lookup->results;
  }

  // Runs the pending operations until they complete (true) or the deadline passes (false); then
  // closing the socket cancels them.
  bool run_until(Deadline deadline) {
    io_.restart();
    if (!deadline) {
      io_.run();
      return true;
    }
    io_.run_until(*deadline);
    if (io_.stopped()) return true;
    asio::error_code ignored;
    socket_.close(ignored);
    io_.run();
    return false;
  }

  const std::string host_;
  const uint16_t port_;
  const std::string address_;
  asio::io_context io_;
  asio::ip::tcp::socket socket_{io_};
};

// ---------------------------------------------------------------------------------------------
// Store

class TcpStore final : public Store {
 public:
  explicit TcpStore(const TCPStoreOptions& options) : Store(options.timeout) {
    check_timeout("make_tcp_store", options.timeout);
    if (options.world_size && *options.world_size <= 0) {
      throw InvalidArgument("make_tcp_store: world_size must be positive, got " +
                            std::to_string(*options.world_size));
    }
    if (!options.is_master && options.port == 0) {
      throw InvalidArgument("make_tcp_store: a client needs the master's port, got 0");
    }
    uint16_t port = options.port;
    if (options.is_master) {
      server_ = std::make_unique<Server>(options.port);
      port = server_->port();
    }
    client_ = std::make_unique<Client>(options.host, port);
    host_ = options.host;
    port_ = port;
    client_->connect_with_retries(options.timeout);
    if (options.world_size && options.wait_for_workers) {
      add(kWorkersKey, 1);
      if (options.is_master) wait_for_workers(*options.world_size);
    }
  }

  void set(const std::string& key, const Bytes& value) override {
    check_key("set", key);
    check_value("set", value);
    call("set", request(RequestType::kSet).text(key).bytes(value).finish()).expect_end();
  }

  Bytes get(const std::string& key) override {
    check_key("get", key);
    const Milliseconds timeout = this->timeout();
    check_timeout("get", timeout);
    MessageReader in =
        await_keys("get", {key}, request(RequestType::kGet).text(key).i64(timeout.count()).finish(), timeout);
    Bytes value = in.bytes(kMaxValueBytes);
    in.expect_end();
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    check_key("add", key);
    MessageReader in = call("add", request(RequestType::kAdd).text(key).i64(delta).finish());
    const int64_t sum = in.i64();
    in.expect_end();
    return sum;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    check_key("compare_set", key);
    check_value("compare_set", expected);
    check_value("compare_set", desired);
    MessageReader in = call(
        "compare_set", request(RequestType::kCompareSet).text(key).bytes(expected).bytes(desired).finish());
    Bytes stored = in.bytes(kMaxValueBytes);
    in.expect_end();
    return stored;
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) check_key("check", key);
    MessageReader in = call("check", request(RequestType::kCheck).keys(keys).finish());
    const bool all_present = in.flag();
    in.expect_end();
    return all_present;
  }

  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    for (const auto& key : keys) check_key("wait", key);
    check_timeout("wait", timeout);
    await_keys("wait", keys, request(RequestType::kWait).keys(keys).i64(timeout.count()).finish(), timeout)
        .expect_end();
  }

  bool delete_key(const std::string& key) override {
    check_key("delete_key", key);
    MessageReader in = call("delete_key", request(RequestType::kDeleteKey).text(key).finish());
    const bool existed = in.flag();
    in.expect_end();
    return existed;
  }

  int64_t num_keys() override {
    MessageReader in = call("num_keys", request(RequestType::kNumKeys).finish());
    const int64_t count = in.i64();
    in.expect_end();
    return count;
  }

  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  static void check_key(const char* operation, const std::string& key) {
    if (key.size() > kMaxKeyBytes) {
      throw InvalidArgument(std::string(operation) + ": a key of " + std::to_string(key.size()) +
                            " bytes exceeds the TCPStore limit of " + std::to_string(kMaxKeyBytes));
    }
  }

  static void check_value(const char* operation, const Bytes& value) {
    if (value.size() > kMaxValueBytes) {
      throw InvalidArgument(std::string(operation) + ": a value of " + std::to_string(value.size()) +
                            " bytes exceeds the TCPStore limit of " + std::to_string(kMaxValueBytes));
    }
  }

  std::optional<MessageReader> exchange(const Bytes& frame, Deadline deadline) {
    std::lock_guard lock(client_mutex_);
    std::optional<Bytes> body = client_->exchange(frame, deadline);
    if (!body) return std::nullopt;
    return MessageReader(std::move(*body), "the TCPStore at " + client_->address());
  }

  // A request the server answers at once; returns the reply's fields after an ok status.
  MessageReader call(const char* operation, const Bytes& frame) {
    const Milliseconds timeout = this->timeout();
    check_timeout(operation, timeout);
    std::optional<MessageReader> in = exchange(frame, deadline_after(timeout));
    if (!in) {
      throw TimeoutError(std::string(operation) + " timed out after " + milliseconds_text(timeout) +
                         " waiting for the TCPStore at " + client_->address());
    }
    switch (static_cast<ReplyStatus>(in->u8())) {
      case ReplyStatus::kOk:
        return std::move(*in);
      case ReplyStatus::kInvalidArgument:
        throw InvalidArgument(in->text(kMaxErrorBytes));
      case ReplyStatus::kTimedOut:
        break;
    }
    throw PeerError("the TCPStore at " + client_->address() + " sent an unexpected reply to " + operation);
  }

  // A get or wait, which the server parks until the keys exist or the timeout passes.
  MessageReader await_keys(const char* operation, const std::vector<std::string>& keys, const Bytes& frame,
                           Milliseconds timeout) {
    const auto timed_out = [&](const std::vector<std::string>& missing) {
      return TimeoutError(std::string(operation) + " timed out after " + milliseconds_text(timeout) +
                          " for key(s) " + quote_keys(missing));
    };
    const Deadline deadline = deadline_after(timeout);
    std::optional<MessageReader> in =
        exchange(frame, deadline ? Deadline(*deadline + kServerAnswerGrace) : deadline);
    if (!in) throw timed_out(keys);
    switch (static_cast<ReplyStatus>(in->u8())) {
      case ReplyStatus::kOk:
        return std::move(*in);
      case ReplyStatus::kTimedOut: {
        std::vector<std::string> missing;
        const uint64_t count = in->u64();
        for (uint64_t position = 0; position < count; ++position) {
          const uint64_t index = in->u64();
          if (index >= keys.size()) {
            throw PeerError("the TCPStore at " + client_->address() + " named a key index out of range");
          }
          missing.push_back(keys[index]);
        }
        in->expect_end();
        throw timed_out(missing);
      }
      case ReplyStatus::kInvalidArgument:
        break;
    }
    throw PeerError("the TCPStore at " + client_->address() + " sent an unexpected reply to " + operation);
  }

  // c10d's master polls the workers' counter the same way.
  void wait_for_workers(int world_size) {
    const Deadline deadline = deadline_after(timeout());
    for (;;) {
      const int64_t joined = add(kWorkersKey, 0);
      if (joined >= world_size) return;
      if (deadline && Clock::now() >= *deadline) {
        throw TimeoutError("TCPStore master timed out after " + milliseconds_text(timeout()) +
                           " waiting for workers: " + std::to_string(joined) + " of " +
                           std::to_string(world_size) + " participants joined");
      }
      std::this_thread::sleep_for(kWorkerPollInterval);
    }
  }

  // Declared first so that it is destroyed last, after this store's own connection.
  std::unique_ptr<Server> server_;
  std::string host_;
  uint16_t port_ = 0;
  // Serializes the request/reply exchanges of this store's threads on its one connection.
  std::mutex client_mutex_;
  std::unique_ptr<Client> client_;
};

}  // namespace

std::shared_ptr<Store> make_tcp_store(const TCPStoreOptions& options) {
  return std::make_shared<TcpStore>(options);
}

uint16_t tcp_store_port(const Store& store) {
  const auto* tcp_store = dynamic_cast<const TcpStore*>(&store);
  if (!tcp_store) throw InvalidArgument("tcp_store_port: not a TCP store");
  return tcp_store->port();
}

const std::string& tcp_store_host(const Store& store) {
  const auto* tcp_store = dynamic_cast<const TcpStore*>(&store);
  if (!tcp_store) throw InvalidArgument("tcp_store_host: not a TCP store");
  return tcp_store->host();
}

}  // namespace tn::dist
