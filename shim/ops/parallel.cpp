// core's parallel_for (core/parallel.h) over OpenMP's threads, installed when torch._C loads.
#include "core/parallel.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "settings.h"

namespace tn {

namespace {

// libgomp's thread pool does not survive fork: a child's first parallel region waits for the
// parent's threads, which the child does not have (a forked child hung in GOMP_parallel once its
// parent had run a region). In a forked child the chunks run one after another on the calling
// thread (upstream's chunks, so the same results) and OpenMP gets one thread.
void after_fork_in_child() {
  note_forked_child();
  omp_set_num_threads(1);
}

void openmp_parallel_for(int64_t n, int64_t grain, const RangeBody& f) {
  int threads = intra_op_threads();
  if (n <= grain || threads == 1 || omp_in_parallel()) {
    f(0, n);
    return;
  }
  if (in_forked_child()) {
    int64_t chunks = grain > 0 ? std::min<int64_t>(threads, (n + grain - 1) / grain) : threads;
    int64_t size = (n + chunks - 1) / chunks;
    for (int64_t begin = 0; begin < n; begin += size) f(begin, std::min(n, begin + size));
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
// any program linking this file (torch._C links tn_ops whole), and a forked child knows it is one.
const bool installed =
    (install_parallel_for(openmp_parallel_for), pthread_atfork(nullptr, nullptr, after_fork_in_child), true);

}  // namespace

}  // namespace tn
