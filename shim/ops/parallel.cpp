// core's parallel_for (core/parallel.h) over OpenMP's threads, installed when torch._C loads.
#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "settings.h"

namespace tn {

namespace {

void openmp_parallel_for(int64_t n, int64_t grain, const RangeBody& f) {
  int threads = intra_op_threads();
  if (n <= grain || threads == 1 || omp_in_parallel()) {
    f(0, n);
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_lock;
  // The team's size is set before the region (as upstream does), not with num_threads, so
  // that OpenMP keeps one pool for these loops and oneDNN's.
  omp_set_num_threads(threads);
#pragma omp parallel
  {
    // A grain of 0 (upstream's "split whatever the size") caps nothing: a chunk per thread.
    int64_t chunks = omp_get_num_threads();
    if (grain > 0) chunks = std::min<int64_t>(chunks, (n + grain - 1) / grain);
    int64_t size = (n + chunks - 1) / chunks, begin = omp_get_thread_num() * size;
    if (begin < n) {
      try {
        f(begin, std::min(n, begin + size));
      } catch (...) {
        std::lock_guard<std::mutex> hold(failure_lock);
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Before main and before torch._C's init: the shim's kernels and core's copies split alike in
// any program linking this file (torch._C links tn_ops whole).
const bool installed = (install_parallel_for(openmp_parallel_for), true);

}  // namespace

}  // namespace tn
