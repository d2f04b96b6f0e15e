// Ranks that call different collectives, or disagree on sizes, are refused by name.
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, MismatchedCollectivesAreRefusedByName) {
  ProcessGroupOptions options;
  options.timeout = 5s;
  // A different collective, a different size, a different dtype: each rank is told, with
  // both calls named.
  struct Case {
    std::function<void(ProcessGroup&)> body;
    std::string one, other;
  };
  const std::vector<Case> cases = {
      {[](ProcessGroup& group) {
         std::vector<float> values(10);
         if (group.rank() == 1)
           group.broadcast(buffer_of(values, ScalarType::Float), 0)->wait();
         else
           group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
       },
       "broadcast(float32, 10 elements, root 0)", "allreduce(float32, 10 elements, SUM)"},
      {[](ProcessGroup& group) {
         std::vector<float> values(group.rank() == 2 ? 20 : 10);
         group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
       },
       "allreduce(float32, 20 elements, SUM)", "allreduce(float32, 10 elements, SUM)"},
      {[](ProcessGroup& group) {
         std::vector<double> doubles(4);
         std::vector<int64_t> longs(4);
         if (group.rank() == 0)
           group.allreduce(buffer_of(doubles, ScalarType::Double), ReduceOp::Max)->wait();
         else
           group.allreduce(buffer_of(longs, ScalarType::Long), ReduceOp::Max)->wait();
       },
       "allreduce(float64, 4 elements, MAX)", "allreduce(int64, 4 elements, MAX)"},
  };
  for (const Case& mismatch : cases) {
    auto errors = errors_of(3, mismatch.body, options);
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_NE(errors[rank].find("mismatched collectives"), std::string::npos)
          << rank << ": " << errors[rank];
      EXPECT_NE(errors[rank].find(mismatch.one), std::string::npos) << rank << ": " << errors[rank];
      EXPECT_NE(errors[rank].find(mismatch.other), std::string::npos) << rank << ": " << errors[rank];
    }
  }
}

TEST(ProcessGroupTest, AlltoallSizeDisagreementIsRefused) {
  ProcessGroupOptions options;
  options.timeout = 5s;
  // Rank 0 sends rank 1 two elements; rank 1 expects three from rank 0.
  auto errors = errors_of(
      2,
      [](ProcessGroup& group) {
        const int rank = group.rank();
        std::vector<std::vector<int32_t>> sends{std::vector<int32_t>(1), std::vector<int32_t>(2)};
        std::vector<std::vector<int32_t>> receives{std::vector<int32_t>(rank == 1 ? 3 : 1),
                                                   std::vector<int32_t>(2)};
        if (rank == 1) sends = {std::vector<int32_t>(2), std::vector<int32_t>(2)};
        std::vector<Buffer> send_buffers, receive_buffers;
        for (auto& values : sends) send_buffers.push_back(buffer_of(values, ScalarType::Int));
        for (auto& values : receives) receive_buffers.push_back(buffer_of(values, ScalarType::Int));
        group.alltoall(send_buffers, receive_buffers)->wait();
      },
      options);
  // Rank 1 refuses; rank 0 got all it expected, so its own call may already have completed.
  EXPECT_NE(errors[1].find("rank 0 sent 8 bytes where rank 1 expected 12"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("alltoall(int32"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace tn::dist
