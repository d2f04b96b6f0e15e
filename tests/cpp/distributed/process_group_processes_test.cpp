// Ranks as forked processes: agreement, peer memory across processes, killed ranks named.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "process_group_test_util.h"

namespace tn::dist {
namespace {

// Ranks as processes: fork `world` children over a FileStore; `body` runs in each and its exit
// status is the child's result.
std::vector<int> run_processes(int world, const std::function<int(ProcessGroup&)>& body,
                               const std::function<void(std::vector<pid_t>&)>& meddle = {},
                               bool same_host_memory = true) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tn_pg_test_" + std::to_string(getpid()) + "_" + std::to_string(std::rand())))
                               .string();
  std::vector<pid_t> children;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t child = fork();
    if (child == 0) {
      int status = 100;
      try {
        auto store = make_file_store(path, world, 10s);
        ProcessGroupOptions options;
        options.timeout = 5s;
        options.same_host_memory = same_host_memory;
        ProcessGroup group(store, rank, world, options);
        status = body(group);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
        status = 101;
      }
      std::fflush(nullptr);
      _exit(status);
    }
    children.push_back(child);
  }
  if (meddle) meddle(children);
  std::vector<int> statuses;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    statuses.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  std::filesystem::remove(path);
  return statuses;
}

TEST(ProcessGroupProcesses, RanksAsProcessesAgree) {
  const auto statuses = run_processes(4, [](ProcessGroup& group) {
    std::vector<int64_t> values(100000, group.rank() + 1);
    group.allreduce(buffer_of(values, ScalarType::Long), ReduceOp::Sum)->wait();
    for (int64_t value : values)
      if (value != 10) return 1;
    return 0;
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0, 0, 0}));
}

TEST(ProcessGroupProcesses, SixteenProcessesAgreeSmallAndLarge) {
  // Sixteen ranks as processes: small frames on the lanes, large allreduces from peer memory
  // and, with it turned off, over TCP; a sum of integers is exact whatever the path.
  for (bool same_host_memory : {true, false}) {
    const auto statuses = run_processes(
        16,
        [](ProcessGroup& group) {
          for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}}) {
            std::vector<int64_t> values(count);
            for (size_t i = 0; i < count; ++i) values[i] = static_cast<int64_t>(i) * 16 + group.rank();
            group.allreduce(buffer_of(values, ScalarType::Long), ReduceOp::Sum)->wait();
            for (size_t i = 0; i < count; ++i)
              if (values[i] != static_cast<int64_t>(i) * 256 + 120) return 1;
          }
          std::vector<int64_t> token{group.rank() == 5 ? 42 : 0};
          group.broadcast(buffer_of(token, ScalarType::Long), 5)->wait();
          group.barrier()->wait();
          return token[0] == 42 ? 0 : 2;
        },
        {}, same_host_memory);
    EXPECT_EQ(statuses, std::vector<int>(16, 0)) << "same_host_memory " << same_host_memory;
  }
}

// Processes of one user on one host read each other's memory; large allreduces, allgathers and
// broadcasts then give the bits of the TCP path, and so do the process group's own tests with ranks as
// threads. (This machine and CI run as one user without ptrace restrictions; under a stricter
// Yama policy reads_peer_memory() is false and this test says so.)
TEST(ProcessGroupProcesses, SameHostRanksReadEachOthersMemoryWithTheBitsOfTcp) {
  for (bool same_host_memory : {true, false}) {
    const auto statuses = run_processes(
        3,
        [same_host_memory](ProcessGroup& group) {
          if (group.reads_peer_memory() != same_host_memory) return 1;
          const size_t count = (1 << 20) + 7;
          auto values = input_for<float>(group.rank(), count, ScalarType::Float);
          group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
          if (std::memcmp(values.data(),
                          reference_reduce<float>(3, count, ScalarType::Float, ReduceOp::Sum).data(),
                          count * sizeof(float)) != 0)
            return 2;
          auto mine = input_for<int64_t>(group.rank(), count, ScalarType::Long);
          std::vector<std::vector<int64_t>> gathered(3, std::vector<int64_t>(count));
          std::vector<Buffer> gathered_buffers;
          for (auto& output : gathered) gathered_buffers.push_back(buffer_of(output, ScalarType::Long));
          group.allgather(buffer_of(mine, ScalarType::Long), gathered_buffers)->wait();
          for (int rank = 0; rank < 3; ++rank)
            if (gathered[rank] != input_for<int64_t>(rank, count, ScalarType::Long)) return 4;
          group.broadcast(buffer_of(mine, ScalarType::Long), 1)->wait();
          return mine == input_for<int64_t>(1, count, ScalarType::Long) ? 0 : 3;
        },
        {}, same_host_memory);
    EXPECT_EQ(statuses, (std::vector<int>{0, 0, 0})) << "same_host_memory " << same_host_memory;
  }
}

// Killed at an arbitrary moment of a stream of large allreduces, possibly while a peer copies
// from its memory: the others name it within the timeout, and never return a partial result.
TEST(ProcessGroupProcesses, RankKilledWhileItsMemoryIsReadIsNamed) {
  const auto start = std::chrono::steady_clock::now();
  const auto statuses = run_processes(
      4,
      [](ProcessGroup& group) {
        if (!group.reads_peer_memory()) return 5;
        std::vector<float> values(4 << 20);
        try {
          for (int call = 0; call < 100000; ++call) {
            std::fill(values.begin(), values.end(), 1.0f);
            group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
            for (float value : values)
              if (value != 4.0f) return 3;  // a partial result
          }
          return 2;
        } catch (const DistError& error) {
          std::fprintf(stderr, "rank %d raised: %s\n", group.rank(), error.what());
          return std::string(error.what()).find("rank 3") != std::string::npos ? 0 : 4;
        }
      },
      [](std::vector<pid_t>& children) {
        std::this_thread::sleep_for(1500ms);  // rendezvous done, allreduces under way
        kill(children[3], SIGKILL);
      });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0, 0, -SIGKILL}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
}

TEST(ProcessGroupProcesses, KilledRankMidAllreduceIsNamedWithinTheTimeout) {
  // Rank 3 stops before its part of a large allreduce and is killed; the others must raise an
  // error naming rank 3 well within the 5 s timeout, whether the data goes over TCP or not.
  for (bool same_host_memory : {true, false}) {
    const auto start = std::chrono::steady_clock::now();
    const auto statuses = run_processes(
        4,
        [](ProcessGroup& group) {
          std::vector<float> values(8 << 20, 1.0f);
          if (group.rank() == 3) {
            raise(SIGSTOP);  // the parent kills it here
            return 2;
          }
          try {
            group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
            return 3;  // a result without rank 3 would be wrong
          } catch (const DistError& error) {
            std::fprintf(stderr, "rank %d raised: %s\n", group.rank(), error.what());
            return std::string(error.what()).find("rank 3") != std::string::npos ? 0 : 4;
          }
        },
        [](std::vector<pid_t>& children) {
          int status = 0;
          waitpid(children[3], &status, WUNTRACED);
          std::this_thread::sleep_for(200ms);  // the others are inside the allreduce by now
          kill(children[3], SIGKILL);
        },
        same_host_memory);
    EXPECT_EQ(statuses, (std::vector<int>{0, 0, 0, -SIGKILL})) << "same_host_memory " << same_host_memory;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  }
}

}  // namespace
}  // namespace tn::dist
