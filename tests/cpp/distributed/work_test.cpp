// Work objects: async collectives progress without a waiter, on_finished runs once.
#include <atomic>

#include "process_group_test_util.h"

namespace tn::dist {
namespace {

// on_finished runs once the work is done, exactly once, with its outcome readable; registered
// after completion it runs at once.
TEST(ProcessGroupTest, AnAsyncCollectiveProgressesWithoutAWaiter) {
  // Rank 0 calls and does not wait (async_op): the group's worker must run its part, or rank 1,
  // which waits, would never finish.
  run_ranks(2, [](ProcessGroup& group) {
    std::vector<int64_t> values{group.rank() + 1};
    auto work = group.allreduce(buffer_of(values, ScalarType::Long), ReduceOp::Sum);
    if (group.rank() == 0) {
      std::this_thread::sleep_for(300ms);
      EXPECT_TRUE(work->is_completed());
    }
    work->wait();
    EXPECT_EQ(values[0], 3);
  });
}

TEST(ProcessGroupTest, OnFinishedRunsOnceTheWorkIsDone) {
  run_ranks(2, [](ProcessGroup& group) {
    std::vector<float> values(100000, 1.0f);
    auto work = group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum);
    std::atomic<int> calls{0};
    std::atomic<bool> saw_done{false};
    work->on_finished([&] {
      saw_done = work->is_completed();
      ++calls;
    });
    work->wait();
    // The callback runs after the waiters are released, possibly on another thread.
    for (int spin = 0; spin < 1000 && calls == 0; ++spin) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(saw_done);
    EXPECT_EQ(values.front(), 2.0f);
    bool ran_inline = false;
    work->on_finished([&] { ran_inline = true; });
    EXPECT_TRUE(ran_inline);
  });
}

}  // namespace
}  // namespace tn::dist
