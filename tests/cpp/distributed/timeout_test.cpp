// Timeouts: a receive that is never sent, and a call's own timeout over the group's.
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, ReceiveThatIsNeverSentTimesOutNamingThePeer) {
  ProcessGroupOptions options;
  options.timeout = 200ms;
  auto errors = errors_of(
      2,
      [](ProcessGroup& group) {
        std::vector<int32_t> values(2);
        if (group.rank() == 0) group.recv(buffer_of(values, ScalarType::Int), 1, 4)->wait();
        if (group.rank() == 1) std::this_thread::sleep_for(400ms);  // connected, silent
      },
      options);
  EXPECT_NE(errors[0].find("recv with tag 4 timed out after 200 ms on rank 0 waiting for rank 1"),
            std::string::npos)
      << errors[0];
}

// A call's own timeout (c10d's option timeouts) applies instead of the group's 30 s, for a
// collective and for a receive; a timeout that is not positive is refused.
TEST(ProcessGroupTest, ACallsOwnTimeoutReplacesTheGroups) {
  ProcessGroupOptions options;
  options.timeout = 30s;
  for (bool collective : {true, false}) {
    const auto start = std::chrono::steady_clock::now();
    auto errors = errors_of(
        2,
        [collective](ProcessGroup& group) {
          std::vector<float> values(4);
          if (group.rank() == 1) {
            std::this_thread::sleep_for(600ms);  // connected, silent
            return;
          }
          if (collective)
            group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum, 200ms)->wait();
          else
            group.recv(buffer_of(values, ScalarType::Float), 1, 9, 200ms)->wait();
        },
        options);
    EXPECT_NE(errors[0].find("timed out after 200 ms"), std::string::npos) << errors[0];
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  }
  run_ranks(1, [](ProcessGroup& group) {
    std::vector<float> values(1);
    EXPECT_THROW(group.barrier(0ms), InvalidArgument);
    EXPECT_THROW(group.send(buffer_of(values, ScalarType::Float), 0, 1, -5ms), InvalidArgument);
  });
}

}  // namespace
}  // namespace tn::dist
