// Frames arrive whatever the sockets do: senders that never block each other, small frames
// queued behind a busy peer, and what a rank sent before it left.
#include <atomic>

#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, SendsNeverBlockOnAPeerThatIsAlsoSending) {
  // Both ranks post a 64 MiB send before their receive, the classic deadlock for blocking sends.
  run_ranks(2, [](ProcessGroup& group) {
    const int peer = 1 - group.rank();
    std::vector<float> out(16 << 20, static_cast<float>(group.rank())), in(16 << 20);
    auto send = group.send(buffer_of(out, ScalarType::Float), peer, 1);
    auto recv = group.recv(buffer_of(in, ScalarType::Float), peer, 1);
    send->wait();
    recv->wait();
    EXPECT_EQ(in.front(), static_cast<float>(peer));
    EXPECT_EQ(in.back(), static_cast<float>(peer));
  });
}

TEST(ProcessGroupTest, SmallFramesQueuedAheadOfABusyPeerAllArrive) {
  // Root sends far more small broadcasts than a socket buffer holds while the other rank is
  // busy elsewhere: root waits while the peer's lane is full (frames cut across writes), and
  // every one arrives intact and in its own place.
  constexpr int kCalls = 400;
  constexpr size_t kCount = 15000;  // 60 KB of int32: a lane's frame
  run_ranks(2, [](ProcessGroup& group) {
    std::vector<std::vector<int32_t>> buffers(kCalls, std::vector<int32_t>(kCount));
    if (group.rank() == 0)
      for (int call = 0; call < kCalls; ++call)
        for (size_t i = 0; i < kCount; ++i) buffers[call][i] = static_cast<int32_t>(call * 100003 + i);
    else
      std::this_thread::sleep_for(300ms);
    std::vector<std::shared_ptr<Work>> works;
    for (auto& values : buffers) works.push_back(group.broadcast(buffer_of(values, ScalarType::Int), 0));
    for (auto& work : works) work->wait();
    for (int call = 0; call < kCalls; ++call)
      for (size_t i = 0; i < kCount; i += 997)
        ASSERT_EQ(buffers[call][i], static_cast<int32_t>(call * 100003 + i)) << "call " << call;
  });
}

TEST(ProcessGroupTest, WhatARankSentBeforeItLeftStillArrives) {
  // Rank 0's small broadcast is complete once written; it then destroys its group. Its frame
  // and its disconnection travel on two sockets; rank 1 must get the frame, not the loss.
  auto store = make_hash_store(10s);
  std::atomic<bool> left{false};
  std::vector<int64_t> received(3, 0);
  std::thread root([&] {
    {
      ProcessGroup group(store, 0, 2);
      std::vector<int64_t> values{7, 8, 9};
      group.broadcast(buffer_of(values, ScalarType::Long), 0)->wait();
    }
    left = true;
  });
  std::string failure;
  std::thread other([&] {
    ProcessGroup group(store, 1, 2);
    while (!left) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // the disconnection is seen before the frame is read
    try {
      group.broadcast(buffer_of(received, ScalarType::Long), 0)->wait();
    } catch (const DistError& error) {
      failure = error.what();
    }
  });
  root.join();
  other.join();
  EXPECT_EQ(failure, "");
  EXPECT_EQ(received, (std::vector<int64_t>{7, 8, 9}));
}

}  // namespace
}  // namespace tn::dist
