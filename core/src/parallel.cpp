#include "core/parallel.h"

#include <atomic>

namespace tn {

namespace {
std::atomic<ParallelFor> installed{nullptr};
}  // namespace

void install_parallel_for(ParallelFor implementation) { installed = implementation; }

void parallel_for(int64_t n, int64_t grain, const RangeBody& f) {
  if (n <= 0) return;
  if (ParallelFor split = installed.load(std::memory_order_relaxed)) return split(n, grain, f);
  f(0, n);
}

}  // namespace tn
