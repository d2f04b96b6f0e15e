// Allreduce: every op and dtype in ascending rank order, sixteen-bit rounding, world sizes
// and large buffers, and the reductions it refuses.
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

template <typename T>
void check_allreduce(int world, size_t count, ScalarType dtype, ReduceOp op,
                     ProcessGroupOptions options = {}) {
  const auto want = reference_reduce<T>(world, count, dtype, op);
  run_ranks(
      world,
      [&](ProcessGroup& group) {
        auto values = input_for<T>(group.rank(), count, dtype);
        group.allreduce(buffer_of(values, dtype), op)->wait();
        expect_bits_equal(values, want,
                          std::string("allreduce ") + reduce_op_name(op) + " " + scalar_type_name(dtype) +
                              " world " + std::to_string(world) + " count " + std::to_string(count) +
                              " rank " + std::to_string(group.rank()));
      },
      options);
}

TEST(ProcessGroupTest, AllreduceEveryOpAndDtypeMatchesAscendingRankOrder) {
  for (int world : {1, 2, 3, 5}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
        check_allreduce<float>(world, count, ScalarType::Float, op);
        check_allreduce<double>(world, count, ScalarType::Double, op);
        check_allreduce<float>(world, count, ScalarType::Float, op, block_algorithm_options());
        check_allreduce<float>(world, count, ScalarType::Float, op, peer_memory_options());
      }
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Band,
                          ReduceOp::Bor, ReduceOp::Bxor}) {
        check_allreduce<int64_t>(world, count, ScalarType::Long, op);
        check_allreduce<int32_t>(world, count, ScalarType::Int, op, block_algorithm_options());
        check_allreduce<int16_t>(world, count, ScalarType::Short, op, peer_memory_options());
        check_allreduce<int16_t>(world, count, ScalarType::Short, op);
        check_allreduce<int8_t>(world, count, ScalarType::Char, op);
        check_allreduce<uint8_t>(world, count, ScalarType::Byte, op);
        check_allreduce<bool>(world, count, ScalarType::Bool, op);
      }
    }
  }
}

// float16 and bfloat16 round to their own precision after every step, as a + b on tensors does.
template <typename T>
void check_sixteen_bit_sum(ScalarType dtype) {
  const int world = 4;
  const size_t count = 777;
  auto input = [](int rank) {
    std::vector<T> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = T(static_cast<float>((i * 31 + rank * 17) % 97) / 13.0f);
    return values;
  };
  std::vector<T> want = input(0);
  for (int rank = 1; rank < world; ++rank) {
    const auto next = input(rank);
    for (size_t i = 0; i < count; ++i) want[i] = T(static_cast<float>(want[i]) + static_cast<float>(next[i]));
  }
  for (auto options : {ProcessGroupOptions{}, block_algorithm_options(), peer_memory_options()})
    run_ranks(
        world,
        [&](ProcessGroup& group) {
          auto values = input(group.rank());
          group.allreduce(buffer_of(values, dtype), ReduceOp::Sum)->wait();
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(values[i].bits, want[i].bits) << i;
        },
        options);
}

TEST(ProcessGroupTest, AllreduceSixteenBitFloatsRoundAfterEveryStep) {
  check_sixteen_bit_sum<Half>(ScalarType::Half);
  check_sixteen_bit_sum<BFloat16>(ScalarType::BFloat16);
}

TEST(ProcessGroupTest, WorldsUpToSixteenAndLargeBuffers) {
  for (int world : {4, 8})
    check_allreduce<float>(world, 3 * 1024 * 1024 + 3, ScalarType::Float, ReduceOp::Sum);
  for (size_t count : {size_t{3}, size_t{70001}})
    check_allreduce<double>(16, count, ScalarType::Double, ReduceOp::Sum);
  check_allreduce<int32_t>(2, 5 * 1024 * 1024 + 1, ScalarType::Int, ReduceOp::Sum);
  ProcessGroupOptions over_tcp;
  over_tcp.same_host_memory = false;
  check_allreduce<float>(4, 3 * 1024 * 1024 + 3, ScalarType::Float, ReduceOp::Sum, over_tcp);
}

TEST(ProcessGroupTest, RefusesReductionsWithoutMeaning) {
  run_ranks(1, [](ProcessGroup& group) {
    std::vector<float> floats(3);
    std::vector<int32_t> ints(3);
    EXPECT_THROW(group.allreduce(buffer_of(floats, ScalarType::Float), ReduceOp::Band), InvalidArgument);
    try {
      group.allreduce(buffer_of(ints, ScalarType::Int), ReduceOp::Avg);
      FAIL() << "AVG on int32 was accepted";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find("AVG on int32"), std::string::npos) << error.what();
    }
  });
}

}  // namespace
}  // namespace tn::dist
