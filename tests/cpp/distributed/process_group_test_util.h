// What the process group's tests share: running a group's ranks as threads, buffers over
// vectors, deterministic per-rank inputs and the reductions they must give, bit-exact checks.
// The tests check ProcessGroupLocal against references computed here, element by element in
// ascending rank order, with ranks as threads (a shared HashStore) and as processes (a FileStore).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "distributed/process_group.h"
#include "distributed/store.h"

namespace tn::dist {

using namespace std::chrono_literals;

// Runs fn(group) on `world` threads, one group per thread, and rethrows the first failure.
void run_ranks(int world, const std::function<void(ProcessGroup&)>& fn, ProcessGroupOptions options = {});

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

// A contribution of `count` values: for int32 every bit pattern (a masked uint32 vector, which
// secure aggregation sums through int32 SUM, so the sums wrap), for floats inexact sevenths (so
// the order of the additions shows in the bits).
template <typename T>
std::vector<T> contribution_for(int rank, size_t count) {
  std::vector<T> values(count);
  std::mt19937_64 generator(static_cast<uint64_t>(rank) * 104729 + count);
  for (auto& value : values) {
    if constexpr (std::is_integral_v<T>)
      value = static_cast<T>(static_cast<uint32_t>(generator()));
    else
      value = static_cast<T>(static_cast<int>(generator() % 2001) - 1000) / static_cast<T>(7);
  }
  return values;
}

// The reduction of the contributions of `ranks`, in that order.
template <typename T>
std::vector<T> reference_over(const std::vector<int>& ranks, size_t count, ReduceOp op) {
  std::vector<T> result = contribution_for<T>(ranks.front(), count);
  for (size_t i = 1; i < ranks.size(); ++i) {
    const std::vector<T> next = contribution_for<T>(ranks[i], count);
    for (size_t e = 0; e < count; ++e) result[e] = reference_combine(result[e], next[e], op);
  }
  if constexpr (std::is_floating_point_v<T>)
    if (op == ReduceOp::Avg)
      for (auto& value : result) value /= static_cast<T>(ranks.size());
  return result;
}

ProcessGroupOptions block_algorithm_options();

// Every size past zero copies from the peers' memory (the threads of one process can read it).
ProcessGroupOptions peer_memory_options();

// Each rank records the error its operation raised.
std::vector<std::string> errors_of(int world, const std::function<void(ProcessGroup&)>& fn,
                                   ProcessGroupOptions options);

}  // namespace tn::dist
