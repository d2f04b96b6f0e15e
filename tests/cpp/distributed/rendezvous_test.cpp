// Rendezvous: absent ranks named, and foreign connections and garbage refused.
#include <asio.hpp>
#include <atomic>

// The wire format, for a test that plays a rank on the wire.
#include "distributed/frame.h"
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, AbsentRankTimesOutNamingIt) {
  ProcessGroupOptions options;
  options.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto errors = errors_of(
      3,
      [](ProcessGroup& group) {
        std::vector<float> values(4);
        // Rank 2 stays connected but silent past the timeout.
        if (group.rank() == 2) std::this_thread::sleep_for(1s);
        if (group.rank() != 2) group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
        // Later operations fail at once: the group no longer agrees on its sequence.
        if (group.rank() == 0) group.barrier()->wait();
      },
      options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(errors[0].find("allreduce timed out after 300 ms"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("rank 2"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 2"), std::string::npos) << errors[1];
}

TEST(ProcessGroupTest, RendezvousNamesTheRanksThatNeverCame) {
  auto store = make_hash_store(10s);
  ProcessGroupOptions options;
  options.timeout = 300ms;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)  // ranks 2 and 3 of a world of 4 never start
    threads.emplace_back([&, rank] {
      try {
        ProcessGroup group(store, rank, 4, options);
      } catch (const TimeoutError& error) {
        errors[rank] = error.what();
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_NE(errors[0].find("rank(s) 2, 3 never connected"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank(s) 2, 3 never connected"), std::string::npos) << errors[1];
}

TEST(ProcessGroupTest, ForeignConnectionsAndGarbageAreRefused) {
  auto store = make_hash_store(10s);
  std::vector<std::thread> threads;
  std::atomic<bool> attacked{false};
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      ProcessGroup group(store, rank, 2);
      if (rank == 0) {
        const std::string address(reinterpret_cast<const char*>(store->get("address/0").data()),
                                  store->get("address/0").size());
        const auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
        asio::io_context io;
        for (const std::string& garbage :
             {std::string(48, 'x'), std::string("GET / HTTP/1.1\r\n\r\n"), std::string(3, '\0')}) {
          asio::ip::tcp::socket socket(io);
          socket.connect({asio::ip::make_address("127.0.0.1"), port});
          asio::write(socket, asio::buffer(garbage));
          std::array<char, 1> byte;
          asio::error_code error;
          if (garbage.size() == 48) {
            socket.read_some(asio::buffer(byte), error);  // closed on us
            EXPECT_TRUE(error);
          }
        }
        // A hello with the group's own session token (as a peer that knows it would send) that
        // opens a second lane for rank 1, or names no known kind of connection, is refused too.
        const auto session = store->get("session");
        for (const uint32_t slot : {1u, 7u}) {
          tn::dist::FrameHeader hello;
          hello.kind = tn::dist::FrameKind::Hello;
          hello.source = 1;
          hello.slot = slot;
          hello.tag = std::stoull(std::string(session.begin(), session.end()));
          hello.signature.count = 2;
          asio::ip::tcp::socket socket(io);
          socket.connect({asio::ip::make_address("127.0.0.1"), port});
          asio::write(socket, asio::buffer(&hello, sizeof hello));
          std::array<char, 1> byte;
          asio::error_code error;
          socket.read_some(asio::buffer(byte), error);  // closed on us
          EXPECT_TRUE(error) << "slot " << slot;
        }
        attacked = true;
      }
      while (!attacked) std::this_thread::sleep_for(1ms);
      std::vector<int64_t> values{group.rank() + 1};
      group.allreduce(buffer_of(values, ScalarType::Long), ReduceOp::Sum)->wait();
      EXPECT_EQ(values[0], 3);
    });
  for (auto& thread : threads) thread.join();
}

}  // namespace
}  // namespace tn::dist
