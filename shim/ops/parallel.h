// Splitting an operator's elements between torch.get_num_threads() threads as upstream's
// at::parallel_for does (OpenMP, the same threads oneDNN's primitives run on).
#pragma once

#include <cstdint>
#include <functional>

namespace tn {

// Upstream's internal::GRAIN_SIZE: TensorIterator splits only loops of more elements.
constexpr int64_t kGrainSize = 32768;

// Calls f(begin, end) over [0, n) as upstream's parallel_for: one call on [0, n) when n is at
// most `grain`, there is one thread, or the caller is itself inside a parallel region; else
// min(threads, ceil(n / grain)) chunks (a grain of 0: as many as threads) of ceil(n / chunks)
// elements, one per thread. Where an element falls in its chunk decides which of a kernel's
// loops computes it, so the chunks are upstream's, not merely balanced. An exception thrown by
// f is rethrown here, the first one if several threads throw.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

}  // namespace tn
