// ProcessGroupLocal against references computed here, element by element in ascending rank
// order, with ranks as threads (a shared HashStore) and as processes (a FileStore).
#include "distributed/process_group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "core.h"
#include "distributed/store.h"

namespace tn::dist {
namespace {

using namespace std::chrono_literals;

// Runs fn(group) on `world` threads, one group per thread, and rethrows the first failure.
void run_ranks(int world, const std::function<void(ProcessGroup&)>& fn, ProcessGroupOptions options = {}) {
  auto store = make_hash_store(10s);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      try {
        ProcessGroup group(store, rank, world, options);
        fn(group);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

template <typename T>
Buffer buffer_of(std::vector<T>& values, ScalarType dtype) {
  return Buffer{values.data(), dtype, static_cast<int64_t>(values.size()), nullptr};
}

// bool travels as one byte per element (std::vector<bool> has no data()).
template <typename T>
using Element = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// Deterministic per-rank inputs with exactly representable values in every dtype tested.
template <typename T>
std::vector<Element<T>> input_for(int rank, size_t count, ScalarType dtype) {
  std::vector<Element<T>> values(count);
  std::mt19937 generator(static_cast<unsigned>(rank * 7919 + count));
  for (size_t i = 0; i < count; ++i) {
    const int raw = static_cast<int>(generator() % 61) - 30;
    if constexpr (std::is_same_v<T, bool>)
      values[i] = (raw & 1) != 0;
    else if (dtype == ScalarType::Byte)
      values[i] = static_cast<T>(static_cast<uint8_t>(raw + 100));
    else if constexpr (std::is_floating_point_v<T>)
      values[i] = static_cast<T>(raw) / static_cast<T>(7);  // inexact: rounding order matters
    else
      values[i] = static_cast<T>(raw);
  }
  return values;
}

template <typename T>
T reference_combine(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Max:
      case ReduceOp::Bor:
        return a || b;
      case ReduceOp::Bxor:
        return a != b;
      default:
        return a && b;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        return a + b;
      case ReduceOp::Product:
        return a * b;
      case ReduceOp::Min:
        return std::fmin(a, b);
      default:
        return std::fmax(a, b);
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::Sum:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::Product:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::Min:
        return a < b ? a : b;
      case ReduceOp::Max:
        return a > b ? a : b;
      case ReduceOp::Band:
        return static_cast<T>(a & b);
      case ReduceOp::Bor:
        return static_cast<T>(a | b);
      default:
        return static_cast<T>(a ^ b);
    }
  }
}

template <typename T>
std::vector<Element<T>> reference_reduce(int world, size_t count, ScalarType dtype, ReduceOp op) {
  std::vector<Element<T>> result = input_for<T>(0, count, dtype);
  for (int rank = 1; rank < world; ++rank) {
    const std::vector<Element<T>> next = input_for<T>(rank, count, dtype);
    for (size_t i = 0; i < count; ++i)
      result[i] =
          static_cast<Element<T>>(reference_combine(static_cast<T>(result[i]), static_cast<T>(next[i]), op));
  }
  if constexpr (std::is_floating_point_v<T>)
    if (op == ReduceOp::Avg)
      for (auto& value : result) value /= static_cast<T>(world);
  return result;
}

template <typename T>
void expect_bits_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0) << what << " at element " << i;
}

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

ProcessGroupOptions block_algorithm_options() {
  ProcessGroupOptions options;
  options.small_message_bytes = 0;  // every size takes the segmented block algorithm
  options.segment_bytes = 64;       // many segments, uneven last ones
  return options;
}

TEST(ProcessGroupTest, AllreduceEveryOpAndDtypeMatchesAscendingRankOrder) {
  for (int world : {1, 2, 3, 5}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
        check_allreduce<float>(world, count, ScalarType::Float, op);
        check_allreduce<double>(world, count, ScalarType::Double, op);
        check_allreduce<float>(world, count, ScalarType::Float, op, block_algorithm_options());
      }
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Band,
                          ReduceOp::Bor, ReduceOp::Bxor}) {
        check_allreduce<int64_t>(world, count, ScalarType::Long, op);
        check_allreduce<int32_t>(world, count, ScalarType::Int, op, block_algorithm_options());
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
  for (auto options : {ProcessGroupOptions{}, block_algorithm_options()})
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

TEST(ProcessGroupTest, BroadcastReduceFromEveryRoot) {
  for (int world : {1, 2, 3, 4}) {
    for (auto options : {ProcessGroupOptions{}, block_algorithm_options()}) {
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

TEST(ProcessGroupTest, GatherScatterAllgatherReduceScatterAlltoall) {
  for (int world : {1, 2, 3, 6}) {
    run_ranks(world, [&](ProcessGroup& group) {
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
            .gather(buffer_of(input, ScalarType::Long), rank == root ? output_buffers : std::vector<Buffer>{},
                    root)
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
    });
  }
}

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

// Each rank records the error its operation raised.
std::vector<std::string> errors_of(int world, const std::function<void(ProcessGroup&)>& fn,
                                   ProcessGroupOptions options) {
  std::vector<std::string> errors(world);
  std::mutex mutex;
  run_ranks(
      world,
      [&](ProcessGroup& group) {
        try {
          fn(group);
        } catch (const DistError& error) {
          std::lock_guard lock(mutex);
          errors[group.rank()] = error.what();
        }
      },
      options);
  return errors;
}

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

TEST(ProcessGroupTest, AbsentRankTimesOutNamingIt) {
  ProcessGroupOptions options;
  options.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto errors = errors_of(
      3,
      [](ProcessGroup& group) {
        std::vector<float> values(4);
        // Rank 2 stays connected but silent past the timeout.
        if (group.rank() == 2) std::this_thread::sleep_for(1s);
        if (group.rank() != 2) group.allreduce(buffer_of(values, ScalarType::Float), ReduceOp::Sum)->wait();
        // Later operations fail at once: the group no longer agrees on its sequence.
        if (group.rank() == 0) group.barrier()->wait();
      },
      options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(errors[0].find("allreduce timed out after 300 ms"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("rank 2"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 2"), std::string::npos) << errors[1];
}

TEST(ProcessGroupTest, RendezvousNamesTheRanksThatNeverCame) {
  auto store = make_hash_store(10s);
  ProcessGroupOptions options;
  options.timeout = 300ms;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)  // ranks 2 and 3 of a world of 4 never start
    threads.emplace_back([&, rank] {
      try {
        ProcessGroup group(store, rank, 4, options);
      } catch (const TimeoutError& error) {
        errors[rank] = error.what();
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_NE(errors[0].find("rank(s) 2, 3 never connected"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank(s) 2, 3 never connected"), std::string::npos) << errors[1];
}

TEST(ProcessGroupTest, ForeignConnectionsAndGarbageAreRefused) {
  auto store = make_hash_store(10s);
  std::vector<std::thread> threads;
  std::atomic<bool> attacked{false};
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      ProcessGroup group(store, rank, 2);
      if (rank == 0) {
        const std::string address(reinterpret_cast<const char*>(store->get("address/0").data()),
                                  store->get("address/0").size());
        const auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
        asio::io_context io;
        for (const std::string& garbage :
             {std::string(48, 'x'), std::string("GET / HTTP/1.1\r\n\r\n"), std::string(3, '\0')}) {
          asio::ip::tcp::socket socket(io);
          socket.connect({asio::ip::make_address("127.0.0.1"), port});
          asio::write(socket, asio::buffer(garbage));
          std::array<char, 1> byte;
          asio::error_code error;
          if (garbage.size() == 48) {
            socket.read_some(asio::buffer(byte), error);  // closed on us
            EXPECT_TRUE(error);
          }
        }
        attacked = true;
      }
      while (!attacked) std::this_thread::sleep_for(1ms);
      std::vector<int64_t> values{group.rank() + 1};
      group.allreduce(buffer_of(values, ScalarType::Long), ReduceOp::Sum)->wait();
      EXPECT_EQ(values[0], 3);
    });
  for (auto& thread : threads) thread.join();
}

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

// Ranks as processes: fork `world` children over a FileStore; `body` runs in each and its exit
// status is the child's result.
std::vector<int> run_processes(int world, const std::function<int(ProcessGroup&)>& body,
                               const std::function<void(std::vector<pid_t>&)>& meddle = {}) {
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

TEST(ProcessGroupProcesses, KilledRankMidAllreduceIsNamedWithinTheTimeout) {
  // Rank 3 stops before its part of a large allreduce and is killed; the others must raise an
  // error naming rank 3 well within the 5 s timeout.
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
      });
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  EXPECT_EQ(statuses[2], 0);
  EXPECT_EQ(statuses[3], -SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace tn::dist
