// What is particular to the TCP store: a master and its clients, timeouts, and hostile bytes
// on the master's port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "store_test_util.h"

namespace tn::dist {
namespace {

// A TCP port on which nothing listens (bound once by us, then released).
uint16_t unused_port() {
  const int descriptor = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(descriptor, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(descriptor);
  return ntohs(address.sin_port);
}

TEST(TcpStore, PortZeroPicksARealPort) {
  auto master = tcp_master();
  const uint16_t port = tcp_store_port(*master);
  EXPECT_NE(port, 0);
  EXPECT_EQ(tcp_store_host(*master), "127.0.0.1");
  auto client = tcp_client(port);
  EXPECT_EQ(tcp_store_port(*client), port);
  EXPECT_THROW(tcp_store_port(*make_hash_store()), InvalidArgument);
}

TEST(TcpStore, MasterAndManyClientsInThreads) {
  auto master = tcp_master();
  const uint16_t port = tcp_store_port(*master);
  constexpr int kClients = 6;
  std::vector<std::thread> threads;
  std::vector<std::string> rank_keys;
  for (int rank = 0; rank < kClients; ++rank) rank_keys.push_back("rank/" + std::to_string(rank));
  std::atomic<int> failures = 0;
  for (int rank = 0; rank < kClients; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto client = tcp_client(port);
        for (int add = 0; add < 10; ++add) client->add("counter", 1);
        client->set(rank_keys[rank], bytes_of(std::to_string(rank)));
        client->wait(rank_keys);
        for (int peer = 0; peer < kClients; ++peer) {
          if (text_of(client->get(rank_keys[peer])) != std::to_string(peer)) ++failures;
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  master->wait(rank_keys);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(text_of(master->get("counter")), std::to_string(kClients * 10));
}

TEST(TcpStore, MasterWaitsForWorkers) {
  const uint16_t port = unused_port();
  // The clients start first and retry until the master listens.
  std::vector<std::thread> workers;
  std::atomic<int> failures = 0;
  for (int worker = 0; worker < 2; ++worker) {
    workers.emplace_back([&] {
      try {
        tcp_client(port, 3)->set("joined", bytes_of("1"));
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  std::this_thread::sleep_for(50ms);
  auto master = tcp_master(3, port);
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(text_of(master->get("init/")), "3");
  // Like c10d's, num_keys counts the workers' counter.
  EXPECT_EQ(master->num_keys(), 2);
}

TEST(TcpStore, MasterTimesOutWaitingForMissingWorkers) {
  const auto start = Clock::now();
  const std::string message = message_of<TimeoutError>([] { tcp_master(3, 0, kShortTimeout); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("1 of 3"), std::string::npos) << message;
}

TEST(TcpStore, ClientTimesOutWhenNoServerListens) {
  const uint16_t port = unused_port();
  const auto start = Clock::now();
  const std::string message =
      message_of<TimeoutError>([&] { tcp_client(port, std::nullopt, kShortTimeout); });
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, kShortTimeout - 10ms);
  EXPECT_LT(elapsed, 2s);
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
}

TEST(TcpStore, ClientOfAGoneServerGetsPeerError) {
  auto master = tcp_master();
  const uint16_t port = tcp_store_port(*master);
  auto client = tcp_client(port);
  client->set("key", bytes_of("1"));
  master.reset();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string message = message_of<PeerError>([&] { client->set("key", bytes_of("2")); });
  EXPECT_NE(message.find(address), std::string::npos) << message;
  const std::string again = message_of<PeerError>([&] { client->get("key"); });
  EXPECT_NE(again.find(address), std::string::npos) << again;
}

TEST(TcpStore, ServerStopsWhileAClientWaits) {
  auto master = tcp_master();
  auto client = tcp_client(tcp_store_port(*master));
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    master.reset();
  });
  const auto start = Clock::now();
  EXPECT_THROW(client->get("never_set"), PeerError);
  EXPECT_LT(Clock::now() - start, 2s);
  stopper.join();
}

TEST(TcpStore, TimedOutRequestsLeaveTheConnectionUsable) {
  auto master = tcp_master();
  auto client = tcp_client(tcp_store_port(*master));
  client->set_timeout(kShortTimeout);
  EXPECT_THROW(client->get("never_set"), TimeoutError);
  EXPECT_THROW(client->wait({"never_set"}, kShortTimeout), TimeoutError);
  // A key set after the timeouts must not be answered to the abandoned requests.
  master->set("never_set", bytes_of("late"));
  client->set("key", bytes_of("value"));
  EXPECT_EQ(text_of(client->get("key")), "value");
  EXPECT_EQ(client->add("counter", 4), 4);
  EXPECT_EQ(text_of(client->get("never_set")), "late");
}

TEST(TcpStore, BadOptions) {
  TCPStoreOptions no_port;
  EXPECT_THROW(make_tcp_store(no_port), InvalidArgument);
  TCPStoreOptions bad_world;
  bad_world.is_master = true;
  bad_world.world_size = 0;
  EXPECT_THROW(make_tcp_store(bad_world), InvalidArgument);
}

// A raw connection to the master's port, for sending what no client would.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : descriptor_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(descriptor_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      throw std::runtime_error("raw connect failed");
    }
    timeval receive_timeout{.tv_sec = 3, .tv_usec = 0};
    ::setsockopt(descriptor_, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
  }
  ~RawConnection() { ::close(descriptor_); }

  void send(const Bytes& bytes) { ::send(descriptor_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

  // True when the server closed the connection (rather than leaving it open past 3 s).
  bool closed_by_server() {
    uint8_t byte = 0;
    const ssize_t received = ::recv(descriptor_, &byte, 1, 0);
    return received == 0 || (received < 0 && errno == ECONNRESET);
  }

 private:
  int descriptor_;
};

Bytes frame_header(uint64_t body_bytes) {
  Bytes header;
  for (int byte = 0; byte < 8; ++byte) header.push_back(static_cast<uint8_t>(body_bytes >> (8 * byte)));
  return header;
}

class TcpStoreUnderAttack : public testing::Test {
 protected:
  void expect_still_serving() {
    auto client = tcp_client(port_);
    client->set("after", bytes_of("ok"));
    EXPECT_EQ(text_of(master_->get("after")), "ok");
  }

  std::shared_ptr<Store> master_ = tcp_master();
  uint16_t port_ = tcp_store_port(*master_);
};

TEST_F(TcpStoreUnderAttack, GarbageBytesCloseOnlyThatConnection) {
  auto bystander = tcp_client(port_);
  RawConnection attacker(port_);
  attacker.send(bytes_of("GET / HTTP/1.1\r\nHost: example\r\n\r\nthis is not a store request"));
  EXPECT_TRUE(attacker.closed_by_server());
  bystander->set("bystander", bytes_of("fine"));
  EXPECT_EQ(text_of(bystander->get("bystander")), "fine");
  expect_still_serving();
}

TEST_F(TcpStoreUnderAttack, HugeAnnouncedLengthIsRefused) {
  RawConnection attacker(port_);
  attacker.send(frame_header(UINT64_MAX));
  EXPECT_TRUE(attacker.closed_by_server());
  RawConnection almost_within_limits(port_);
  almost_within_limits.send(frame_header(uint64_t{8} << 30));
  EXPECT_TRUE(almost_within_limits.closed_by_server());
  expect_still_serving();
}

TEST_F(TcpStoreUnderAttack, MalformedBodiesAreRefused) {
  // An unknown request type.
  RawConnection unknown_type(port_);
  Bytes frame = frame_header(1);
  frame.push_back(200);
  unknown_type.send(frame);
  EXPECT_TRUE(unknown_type.closed_by_server());
  // A set (type 1) whose key announces more bytes than the body holds.
  RawConnection cut_short(port_);
  frame = frame_header(9);
  frame.push_back(1);
  const Bytes key_length = frame_header(1000);
  frame.insert(frame.end(), key_length.begin(), key_length.end());
  cut_short.send(frame);
  EXPECT_TRUE(cut_short.closed_by_server());
  // A connection that hangs up halfway through a frame.
  {
    RawConnection quitter(port_);
    quitter.send(frame_header(100));
  }
  expect_still_serving();
}

}  // namespace
}  // namespace tn::dist
