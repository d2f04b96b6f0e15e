// Broadcast and reduce from every root.
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, BroadcastReduceFromEveryRoot) {
  for (int world : {1, 2, 3, 4}) {
    for (auto options : {ProcessGroupOptions{}, block_algorithm_options(), peer_memory_options()}) {
      for (int root = 0; root < world; ++root) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{4099}}) {
          run_ranks(
              world,
              [&](ProcessGroup& group) {
                auto values = input_for<float>(group.rank(), count, ScalarType::Float);
                group.broadcast(buffer_of(values, ScalarType::Float), root)->wait();
                expect_bits_equal(values, input_for<float>(root, count, ScalarType::Float), "broadcast");

                auto mine = input_for<double>(group.rank(), count, ScalarType::Double);
                group.reduce(buffer_of(mine, ScalarType::Double), root, ReduceOp::Sum)->wait();
                if (group.rank() == root)
                  expect_bits_equal(mine,
                                    reference_reduce<double>(world, count, ScalarType::Double, ReduceOp::Sum),
                                    "reduce at root");
                else
                  expect_bits_equal(mine, input_for<double>(group.rank(), count, ScalarType::Double),
                                    "reduce leaves other ranks' buffers alone");
              },
              options);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tn::dist
