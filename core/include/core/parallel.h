// Splitting a loop between torch.get_num_threads() threads as upstream's at::parallel_for does.
// core has no threads of its own: the shim installs its OpenMP implementation (shim/ops/
// parallel.cpp) and core's copies and fills split through it too; in a program without the shim
// (the coordinator, the C++ device client) every loop runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace tn {

// Upstream's internal::GRAIN_SIZE: TensorIterator splits only loops of more elements.
constexpr int64_t kGrainSize = 32768;

using RangeBody = std::function<void(int64_t begin, int64_t end)>;
using ParallelFor = void (*)(int64_t n, int64_t grain, const RangeBody& f);

// Calls f(begin, end) over [0, n) as upstream's parallel_for: one call on [0, n) when n is at
// most `grain`, there is one thread, or the caller is itself inside a parallel region; else
// min(threads, ceil(n / grain)) chunks (a grain of 0: as many as threads) of ceil(n / chunks)
// elements, one per thread. Where an element falls in its chunk decides which of a kernel's
// loops computes it, so the chunks are upstream's, not merely balanced. An exception thrown by
// f is rethrown here, the first one if several threads throw. Without an installed
// implementation: one call on [0, n) (none when n <= 0).
void parallel_for(int64_t n, int64_t grain, const RangeBody& f);

// parallel_for's grain for units (rows, planes, channels) of `values` values each: loops of
// fewer than a grain of values stay in one thread.
inline int64_t units_per_grain(int64_t values) {
  return values < kGrainSize ? kGrainSize / (values > 0 ? values : 1) : 1;
}

// Installs the implementation parallel_for delegates to (once, before any loop runs).
void install_parallel_for(ParallelFor implementation);

}  // namespace tn
