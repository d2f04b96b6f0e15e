// Deadline reduce: who contributed, in memory, deferred and spooled, late, refused and dying
// ranks, and root's memory bound (measured by this binary's counted heap, defined here).
#include <malloc.h>

#include <asio.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>

// The wire format, for a test that plays a rank on the wire.
#include "distributed/frame.h"
#include "process_group_test_util.h"

// The heap of this test binary, counted: the global allocation functions are replaced (as C++
// allows) so that a test can measure the most an operation had allocated at once, on any thread.
namespace heap {
std::atomic<int64_t> in_use{0};
std::atomic<int64_t> peak{0};

void* allocate(std::size_t bytes) noexcept {
  void* memory = std::malloc(bytes == 0 ? 1 : bytes);
  if (!memory) return nullptr;
  const int64_t now = in_use += static_cast<int64_t>(malloc_usable_size(memory));
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  return memory;
}

void release(void* memory) noexcept {
  if (!memory) return;
  in_use -= static_cast<int64_t>(malloc_usable_size(memory));
  std::free(memory);
}

void* allocate_or_throw(std::size_t bytes) {
  if (void* memory = allocate(bytes)) return memory;
  throw std::bad_alloc();
}
}  // namespace heap

void* operator new(std::size_t bytes) { return heap::allocate_or_throw(bytes); }
void* operator new[](std::size_t bytes) { return heap::allocate_or_throw(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return heap::allocate(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept { return heap::allocate(bytes); }
void operator delete(void* memory) noexcept { heap::release(memory); }
void operator delete[](void* memory) noexcept { heap::release(memory); }
void operator delete(void* memory, std::size_t) noexcept { heap::release(memory); }
void operator delete[](void* memory, std::size_t) noexcept { heap::release(memory); }
void operator delete(void* memory, const std::nothrow_t&) noexcept { heap::release(memory); }
void operator delete[](void* memory, const std::nothrow_t&) noexcept { heap::release(memory); }

namespace tn::dist {
namespace {

TEST(ProcessGroupTest, DeadlineReduceReportsExactlyWhoContributed) {
  run_ranks(4, [](ProcessGroup& group) {
    const int rank = group.rank();
    std::vector<double> values{static_cast<double>(rank + 1), 10.0 * (rank + 1)};
    auto result = std::make_shared<DeadlineReduceResult>();
    if (rank == 3) std::this_thread::sleep_for(600ms);  // misses the 300 ms deadline
    group.deadline_reduce(buffer_of(values, ScalarType::Double), 0, ReduceOp::Sum, 300ms, result)->wait();
    if (rank == 0) {
      EXPECT_EQ(result->contributors, (std::vector<int>{0, 1, 2}));
      EXPECT_EQ(result->missing, (std::vector<int>{3}));
      EXPECT_EQ(values, (std::vector<double>{6.0, 60.0}));
    }
    // The late contribution is never folded into the next round.
    std::vector<double> next{1.0};
    auto second = std::make_shared<DeadlineReduceResult>();
    group.deadline_reduce(buffer_of(next, ScalarType::Double), 0, ReduceOp::Sum, 2000ms, second)->wait();
    if (rank == 0) {
      EXPECT_EQ(second->contributors, (std::vector<int>{0, 1, 2, 3}));
      EXPECT_EQ(next[0], 4.0);
    }
  });
}

template <typename T>
void check_deadline_reduce_in_memory_and_spooled(ScalarType dtype, ReduceOp op) {
  const int world = 4;
  const size_t count = 10007;  // segments of 1024 elements or fewer, the last one short
  const auto want = reference_over<T>({0, 1, 2, 3}, count, op);
  for (int root : {0, 2}) {  // root first in rank order, and root in the middle
    std::vector<std::vector<T>> results;
    std::mutex mutex;
    for (uint64_t spool_bytes : {uint64_t{256} << 20, uint64_t{0}}) {
      ProcessGroupOptions options;
      options.segment_bytes = 4096;
      options.deadline_reduce_spool_bytes = spool_bytes;
      run_ranks(
          world,
          [&](ProcessGroup& group) {
            auto values = contribution_for<T>(group.rank(), count);
            auto result = std::make_shared<DeadlineReduceResult>();
            group.deadline_reduce(buffer_of(values, dtype), root, op, 10s, result)->wait();
            if (group.rank() != root) return;
            const std::string what = std::string("deadline_reduce ") + reduce_op_name(op) + " " +
                                     scalar_type_name(dtype) + " root " + std::to_string(root) +
                                     (spool_bytes == 0 ? " spooled" : " in memory");
            EXPECT_EQ(result->contributors, (std::vector<int>{0, 1, 2, 3})) << what;
            EXPECT_EQ(result->spooled_bytes, spool_bytes == 0 ? 3 * count * sizeof(T) : 0) << what;
            expect_bits_equal(values, want, what);
            std::lock_guard lock(mutex);
            results.push_back(values);
          },
          options);
    }
    ASSERT_EQ(results.size(), 2u);
    expect_bits_equal(results[1], results[0], "spooled against in memory");
  }
}

// Root keeps the contributions and folds them a range at a time, in memory and spooled: the bits
// of the reference over the other ranks (root contributes nothing), whatever the ranges.
template <typename T>
void check_deadline_reduce_deferred(ScalarType dtype, ReduceOp op) {
  const size_t count = 10007;
  const auto want = reference_over<T>({1, 2, 3}, count, op);
  for (uint64_t spool_bytes : {uint64_t{256} << 20, uint64_t{0}}) {
    ProcessGroupOptions options;
    options.segment_bytes = 4096;
    options.deadline_reduce_spool_bytes = spool_bytes;
    run_ranks(
        4,
        [&](ProcessGroup& group) {
          auto result = std::make_shared<DeadlineReduceResult>();
          if (group.rank() != 0) {
            auto values = contribution_for<T>(group.rank(), count);
            EXPECT_THROW(group.deadline_reduce_deferred(dtype, int64_t(count), 0, op, 10s, result),
                         InvalidArgument);
            group.deadline_reduce(buffer_of(values, dtype), 0, op, 10s, result)->wait();
            return;
          }
          group.deadline_reduce_deferred(dtype, int64_t(count), 0, op, 10s, result)->wait();
          const std::string what = std::string("deferred deadline_reduce ") + reduce_op_name(op) + " " +
                                   scalar_type_name(dtype) + (spool_bytes == 0 ? " spooled" : " in memory");
          EXPECT_EQ(result->contributors, (std::vector<int>{0, 1, 2, 3})) << what;
          EXPECT_EQ(result->spooled_bytes, spool_bytes == 0 ? 3 * count * sizeof(T) : 0) << what;
          ASSERT_TRUE(result->deferred) << what;
          std::vector<T> folded(count);
          // Uneven ranges across segment boundaries, the last first.
          for (auto [first, size] : {std::pair<size_t, size_t>{9000, 1007}, {0, 1}, {1, 4000}, {4001, 4999}})
            result->deferred->fold(first, size, folded.data() + first);
          expect_bits_equal(folded, want, what);
          EXPECT_THROW(result->deferred->fold(count, 1, folded.data()), InvalidArgument);
          // Each contribution reads back exactly as it was sent, over segment boundaries.
          for (int rank = 1; rank < 4; ++rank) {
            std::vector<T> read(count);
            for (auto [first, size] : {std::pair<size_t, size_t>{4095, 5000}, {0, 4095}, {9095, 912}})
              result->deferred->read(rank, first, size, read.data() + first);
            expect_bits_equal(read, contribution_for<T>(rank, count),
                              what + " read of rank " + std::to_string(rank));
          }
          EXPECT_THROW(result->deferred->read(1, count - 1, 2, folded.data()), InvalidArgument);
          EXPECT_THROW(result->deferred->read(0, 0, 1, folded.data()),
                       InvalidArgument);  // root keeps nothing
        },
        options);
  }
}

TEST(ProcessGroupTest, DeadlineReduceDeferredFoldsRangesWithTheBitsOfTheReference) {
  check_deadline_reduce_deferred<double>(ScalarType::Double, ReduceOp::Sum);
  check_deadline_reduce_deferred<float>(ScalarType::Float, ReduceOp::Avg);
  check_deadline_reduce_deferred<int32_t>(ScalarType::Int, ReduceOp::Sum);
}

TEST(ProcessGroupTest, DeadlineReduceSpooledGivesTheBitsOfInMemoryAndOfTheReference) {
  check_deadline_reduce_in_memory_and_spooled<float>(ScalarType::Float, ReduceOp::Sum);
  check_deadline_reduce_in_memory_and_spooled<float>(ScalarType::Float, ReduceOp::Avg);
  check_deadline_reduce_in_memory_and_spooled<double>(ScalarType::Double, ReduceOp::Sum);
  check_deadline_reduce_in_memory_and_spooled<double>(ScalarType::Double, ReduceOp::Min);
  check_deadline_reduce_in_memory_and_spooled<int32_t>(ScalarType::Int, ReduceOp::Sum);
}

TEST(ProcessGroupTest, DeadlineReduceSpooledLeavesOutTheLateRankAndItsLateFrames) {
  ProcessGroupOptions options;
  options.segment_bytes = 4096;
  options.deadline_reduce_spool_bytes = 0;  // one landing segment for all senders
  const size_t count = 50000;
  run_ranks(
      4,
      [&](ProcessGroup& group) {
        const int rank = group.rank();
        auto values = contribution_for<float>(rank, count);
        auto result = std::make_shared<DeadlineReduceResult>();
        if (rank == 3) std::this_thread::sleep_for(1500ms);  // misses the 500 ms deadline
        group.deadline_reduce(buffer_of(values, ScalarType::Float), 0, ReduceOp::Sum, 500ms, result)->wait();
        if (rank == 0) {
          EXPECT_EQ(result->contributors, (std::vector<int>{0, 1, 2}));
          EXPECT_EQ(result->missing, (std::vector<int>{3}));
          EXPECT_EQ(result->spooled_bytes, 2 * count * sizeof(float));
          expect_bits_equal(values, reference_over<float>({0, 1, 2}, count, ReduceOp::Sum), "first round");
        }
        // Rank 3's first contribution is never folded into the next round.
        auto next = contribution_for<float>(10 + rank, count);
        auto second = std::make_shared<DeadlineReduceResult>();
        group.deadline_reduce(buffer_of(next, ScalarType::Float), 0, ReduceOp::Sum, 10s, second)->wait();
        if (rank == 0) {
          EXPECT_EQ(second->contributors, (std::vector<int>{0, 1, 2, 3}));
          expect_bits_equal(next, reference_over<float>({10, 11, 12, 13}, count, ReduceOp::Sum),
                            "second round");
        }
      },
      options);
}

// Root's check sees every segment of every other rank in order; a refused rank is named with
// the check's reason, left out of the sum like a missing one, and its sender still completes.
TEST(ProcessGroupTest, DeadlineReduceLeavesOutARefusedContributionNamingWhy) {
  for (uint64_t spool_bytes : {uint64_t{1} << 30, uint64_t{0}}) {  // in memory, then spooled
    ProcessGroupOptions options;
    options.segment_bytes = 4096;
    options.deadline_reduce_spool_bytes = spool_bytes;
    const size_t count = 20000;
    std::vector<uint64_t> checked_bytes(4, 0);
    ContributionCheck no_nan = [&](int rank, uint64_t offset, const void* data, uint64_t bytes) {
      EXPECT_EQ(offset, checked_bytes[size_t(rank)]) << "segments are checked in order";
      checked_bytes[size_t(rank)] += bytes;
      const auto* values = static_cast<const float*>(data);
      for (uint64_t i = 0; i < bytes / sizeof(float); ++i)
        if (std::isnan(values[i]))
          return std::optional<std::string>("NaN at element " + std::to_string(offset / sizeof(float) + i));
      return std::optional<std::string>();
    };
    run_ranks(
        4,
        [&](ProcessGroup& group) {
          const int rank = group.rank();
          auto values = contribution_for<float>(rank, count);
          if (rank == 2) values[15000] = std::nanf("");
          auto result = std::make_shared<DeadlineReduceResult>();
          group
              .deadline_reduce(buffer_of(values, ScalarType::Float), 0, ReduceOp::Sum, 10s, result,
                               rank == 0 ? no_nan : ContributionCheck())
              ->wait();
          if (rank != 0) return;
          EXPECT_EQ(result->contributors, (std::vector<int>{0, 1, 3}));
          EXPECT_TRUE(result->missing.empty());
          ASSERT_EQ(result->refused.size(), 1u);
          EXPECT_EQ(result->refused[0], (std::pair<int, std::string>{2, "NaN at element 15000"}));
          expect_bits_equal(values, reference_over<float>({0, 1, 3}, count, ReduceOp::Sum), "without rank 2");
          EXPECT_EQ(checked_bytes[1], count * sizeof(float));
          EXPECT_EQ(checked_bytes[3], count * sizeof(float));
        },
        options);
  }
}

std::string store_text(Store& store, const std::string& key) {
  const Bytes bytes = store.get(key);
  return std::string(bytes.begin(), bytes.end());
}

// Plays spoke `rank` of a star group on the wire: says hello to hub 0, starts operation #1, a
// deadline_reduce of `count` float32 to rank 0 (deadline_reduce.cpp's protocol: slot = phase << 24
// | number, phases segment 0, credit 1, ready 2), sends segment 0 when credited and dies halfway
// through segment 1.
void play_spoke_that_dies_mid_segment(Store& store, int rank, int world, uint64_t count,
                                      uint64_t segment_bytes) {
  const std::string address = store_text(store, "address/0");
  const auto colon = address.rfind(':');
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address(address.substr(0, colon)),
                  static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))});
  FrameHeader hello;
  hello.kind = FrameKind::Hello;
  hello.source = rank;
  hello.tag = std::stoull(store_text(store, "session"));
  hello.signature.count = static_cast<uint64_t>(world);
  asio::write(socket, asio::buffer(&hello, sizeof hello));
  FrameHeader frame;
  frame.source = rank;
  frame.tag = 1;
  frame.signature.collective = Collective::DeadlineReduce;
  frame.signature.dtype = static_cast<int8_t>(ScalarType::Float);
  frame.signature.reduce_op = static_cast<uint8_t>(ReduceOp::Sum);
  frame.signature.root = 0;
  frame.signature.count = count;
  frame.slot = 2 << 24;
  asio::write(socket, asio::buffer(&frame, sizeof frame));
  const std::vector<uint8_t> payload(segment_bytes, 0);
  uint64_t granted = 0;
  for (uint32_t segment = 0; segment < 2; ++segment) {
    while (segment >= granted) {
      FrameHeader credit;
      asio::read(socket, asio::buffer(&credit, sizeof credit));
      asio::read(socket, asio::buffer(&granted, sizeof granted));
    }
    frame.slot = segment;
    frame.length = segment_bytes;
    asio::write(socket, asio::buffer(&frame, sizeof frame));
    asio::write(socket, asio::buffer(payload.data(), segment == 0 ? segment_bytes : segment_bytes / 2));
  }
}

TEST(ProcessGroupTest, DeadlineReduceLeavesOutARankThatDiesInTheMiddleOfASegment) {
  for (uint64_t spool_bytes : {uint64_t{256} << 20, uint64_t{0}}) {
    auto store = make_hash_store(10s);
    ProcessGroupOptions options;
    options.topology = Topology::Star;
    options.segment_bytes = 4096;
    options.deadline_reduce_spool_bytes = spool_bytes;
    const size_t count = 4096;  // four segments
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      try {
        play_spoke_that_dies_mid_segment(*store, 2, 3, count, options.segment_bytes);
      } catch (const std::exception& error) {
        ADD_FAILURE() << "the dying spoke: " << error.what();
      }
    });
    for (int rank = 0; rank < 2; ++rank)
      threads.emplace_back([&, rank] {
        ProcessGroup group(store, rank, 3, options);
        auto values = contribution_for<float>(rank, count);
        auto result = std::make_shared<DeadlineReduceResult>();
        const auto start = std::chrono::steady_clock::now();
        group.deadline_reduce(buffer_of(values, ScalarType::Float), 0, ReduceOp::Sum, 20s, result)->wait();
        if (rank != 0) return;
        // Settled when its connection closed, not at the deadline.
        EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
        EXPECT_EQ(result->contributors, (std::vector<int>{0, 1}));
        EXPECT_EQ(result->missing, (std::vector<int>{2}));
        expect_bits_equal(values, reference_over<float>({0, 1}, count, ReduceOp::Sum),
                          "without the dead rank");
      });
    for (auto& thread : threads) thread.join();
  }
}

// How much root's heap grew at most during a deadline_reduce of six 8 MiB contributions in
// 256 KiB segments, spooling past `spool_bytes`; `correct` says whether the result was right.
int64_t root_heap_growth(uint64_t spool_bytes, bool& correct) {
  const int world = 6;
  const size_t count = size_t{2} << 20;
  ProcessGroupOptions options;
  options.topology = Topology::Star;
  options.segment_bytes = 256 << 10;
  options.deadline_reduce_spool_bytes = spool_bytes;
  int64_t growth = 0;
  run_ranks(
      world,
      [&](ProcessGroup& group) {
        auto values = contribution_for<float>(group.rank(), count);
        auto result = std::make_shared<DeadlineReduceResult>();
        group.barrier()->wait();
        const int64_t before = heap::in_use.load();
        if (group.rank() == 0) heap::peak.store(before);
        group.deadline_reduce(buffer_of(values, ScalarType::Float), 0, ReduceOp::Sum, 60s, result)->wait();
        if (group.rank() == 0) growth = heap::peak.load() - before;
        // No rank frees its buffer before root has measured (the count is the whole process's).
        group.barrier()->wait();
        if (group.rank() != 0) return;
        const uint64_t copies = (world - 1) * count * sizeof(float);
        const auto want = reference_over<float>({0, 1, 2, 3, 4, 5}, count, ReduceOp::Sum);
        correct = result->contributors.size() == static_cast<size_t>(world) &&
                  result->spooled_bytes == (copies > spool_bytes ? copies : 0) &&
                  std::memcmp(values.data(), want.data(), count * sizeof(float)) == 0;
      },
      options);
  return growth;
}

// Spooling past 1 MiB, root lends 1 MiB of landing segments and reduces through one more; in
// memory it holds the 40 MiB of copies. Exits 0 when both hold and both results are right.
[[noreturn]] void measure_root_heap_and_exit() {
  bool spooled_correct = false, in_memory_correct = false;
  const int64_t spooled = root_heap_growth(1 << 20, spooled_correct);
  const int64_t in_memory = root_heap_growth(uint64_t{256} << 20, in_memory_correct);
  std::fprintf(stderr, "root's heap grew by %.2f MiB spooled (result %s), %.2f MiB in memory (result %s)\n",
               static_cast<double>(spooled) / (1 << 20), spooled_correct ? "right" : "WRONG",
               static_cast<double>(in_memory) / (1 << 20), in_memory_correct ? "right" : "WRONG");
  const bool bounded = spooled < (int64_t{3} << 20) && in_memory >= (int64_t{40} << 20);
  std::_Exit(spooled_correct && in_memory_correct && bounded ? 0 : 1);
}

TEST(ProcessGroupTest, DeadlineReduceSpoolKeepsRootsMemoryBounded) {
  // In a process of its own (the death-test machinery runs this binary again), so that no
  // scratch memory pooled by earlier tests hides what root allocates.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(measure_root_heap_and_exit(), ::testing::ExitedWithCode(0), "root's heap grew by");
}

TEST(ProcessGroupTest, DeadlineReduceNamesASpoolDirectoryItCannotUse) {
  ProcessGroupOptions options;
  options.timeout = 10s;
  options.deadline_reduce_spool_bytes = 0;
  options.deadline_reduce_spool_directory = "/nonexistent/torchnative-spool";
  auto errors = errors_of(
      3,
      [](ProcessGroup& group) {
        std::vector<float> values(1000);
        auto result = std::make_shared<DeadlineReduceResult>();
        group.deadline_reduce(buffer_of(values, ScalarType::Float), 0, ReduceOp::Sum, 5s, result)->wait();
      },
      options);
  EXPECT_NE(errors[0].find("cannot create a spool file in /nonexistent/torchnative-spool"), std::string::npos)
      << errors[0];
  // The other ranks hear why from root instead of waiting for credit until they time out.
  EXPECT_NE(errors[1].find("cannot create a spool file"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace tn::dist
