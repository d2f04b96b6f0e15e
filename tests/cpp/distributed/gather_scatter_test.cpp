// Gather, scatter, allgather, reduce_scatter and alltoall.
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, GatherScatterAllgatherReduceScatterAlltoall) {
  // Over TCP, and (allgather) out of the peers' memory.
  for (const auto& options : {ProcessGroupOptions{}, peer_memory_options()})
    for (int world : {1, 2, 3, 6}) {
      run_ranks(
          world,
          [&](ProcessGroup& group) {
            const int rank = group.rank();
            const size_t count = 5;
            auto input = input_for<int64_t>(rank, count, ScalarType::Long);
            std::vector<std::vector<int64_t>> outputs(world, std::vector<int64_t>(count, -1));
            std::vector<Buffer> output_buffers;
            for (auto& output : outputs) output_buffers.push_back(buffer_of(output, ScalarType::Long));

            group.allgather(buffer_of(input, ScalarType::Long), output_buffers)->wait();
            for (int r = 0; r < world; ++r)
              expect_bits_equal(outputs[r], input_for<int64_t>(r, count, ScalarType::Long), "allgather");

            for (int root = 0; root < world; ++root) {
              for (auto& output : outputs) std::fill(output.begin(), output.end(), -1);
              group
                  .gather(buffer_of(input, ScalarType::Long),
                          rank == root ? output_buffers : std::vector<Buffer>{}, root)
                  ->wait();
              if (rank == root)
                for (int r = 0; r < world; ++r)
                  expect_bits_equal(outputs[r], input_for<int64_t>(r, count, ScalarType::Long), "gather");

              std::vector<std::vector<int64_t>> pieces;
              std::vector<Buffer> piece_buffers;
              for (int r = 0; r < world; ++r)
                pieces.push_back(input_for<int64_t>(100 * root + r, count, ScalarType::Long));
              for (auto& piece : pieces) piece_buffers.push_back(buffer_of(piece, ScalarType::Long));
              std::vector<int64_t> received(count, -1);
              group
                  .scatter(rank == root ? piece_buffers : std::vector<Buffer>{},
                           buffer_of(received, ScalarType::Long), root)
                  ->wait();
              expect_bits_equal(received, input_for<int64_t>(100 * root + rank, count, ScalarType::Long),
                                "scatter");
            }

            // reduce_scatter: rank r's contribution to rank q is input_for(10 * r + q).
            std::vector<std::vector<double>> contributions;
            std::vector<Buffer> contribution_buffers;
            for (int q = 0; q < world; ++q)
              contributions.push_back(input_for<double>(10 * rank + q, count, ScalarType::Double));
            for (auto& c : contributions) contribution_buffers.push_back(buffer_of(c, ScalarType::Double));
            std::vector<double> reduced(count);
            group.reduce_scatter(contribution_buffers, buffer_of(reduced, ScalarType::Double), ReduceOp::Sum)
                ->wait();
            std::vector<double> want = input_for<double>(rank, count, ScalarType::Double);
            for (int r = 0; r < world; ++r) {
              auto part = input_for<double>(10 * r + rank, count, ScalarType::Double);
              for (size_t i = 0; i < count; ++i) want[i] = r == 0 ? part[i] : want[i] + part[i];
            }
            expect_bits_equal(reduced, want, "reduce_scatter");

            // alltoall with uneven sizes: rank r sends rank q (r + q) elements of value 1000 r + q.
            std::vector<std::vector<int32_t>> sends, receives;
            std::vector<Buffer> send_buffers, receive_buffers;
            for (int q = 0; q < world; ++q) {
              sends.emplace_back(static_cast<size_t>(rank + q), 1000 * rank + q);
              receives.emplace_back(static_cast<size_t>(q + rank), -1);
            }
            for (int q = 0; q < world; ++q) {
              send_buffers.push_back(buffer_of(sends[q], ScalarType::Int));
              receive_buffers.push_back(buffer_of(receives[q], ScalarType::Int));
            }
            group.alltoall(send_buffers, receive_buffers)->wait();
            for (int q = 0; q < world; ++q)
              for (int32_t value : receives[q]) ASSERT_EQ(value, 1000 * q + rank);
            group.barrier()->wait();
          },
          options);
    }
}

}  // namespace
}  // namespace tn::dist
