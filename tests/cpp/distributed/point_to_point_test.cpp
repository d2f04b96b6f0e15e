// Point-to-point sends and receives with tags and any source.
#include "process_group_test_util.h"

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, PointToPointWithTagsAndAnySource) {
  run_ranks(3, [](ProcessGroup& group) {
    const int rank = group.rank();
    if (rank == 0) {
      // Posted before the sends exist, and in the opposite order of the tags sent.
      std::vector<int32_t> seven(4), five(4), any(2);
      auto seven_work = group.recv(buffer_of(seven, ScalarType::Int), 1, 7);
      auto five_work = group.recv(buffer_of(five, ScalarType::Int), 1, 5);
      five_work->wait();
      seven_work->wait();
      EXPECT_EQ(seven, (std::vector<int32_t>{7, 7, 7, 7}));
      EXPECT_EQ(five, (std::vector<int32_t>{5, 5, 5, 5}));
      auto any_work = group.recv(buffer_of(any, ScalarType::Int), -1, 9);
      any_work->wait();
      EXPECT_EQ(any_work->source_rank(), 2);
      EXPECT_EQ(any, (std::vector<int32_t>{2, 2}));
      std::vector<int32_t> wrong(3);
      EXPECT_THROW(group.recv(buffer_of(wrong, ScalarType::Int), 1, 11)->wait(), MismatchError);
    } else if (rank == 1) {
      std::vector<int32_t> five(4, 5), seven(4, 7), four(4, 4);
      group.send(buffer_of(five, ScalarType::Int), 0, 5)->wait();
      group.send(buffer_of(seven, ScalarType::Int), 0, 7)->wait();
      group.send(buffer_of(four, ScalarType::Int), 0, 11)->wait();
    } else {
      std::vector<int32_t> two(2, 2);
      group.send(buffer_of(two, ScalarType::Int), 0, 9)->wait();
    }
  });
}

}  // namespace
}  // namespace tn::dist
