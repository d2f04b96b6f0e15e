#include "settings.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace tn {

namespace {

std::atomic<int> chosen_intra_op_threads{0};  // 0: not set
std::atomic<bool> onednn_on{true};
std::atomic<bool> forked_child{false};

int default_intra_op_threads() {
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"})
    if (const char* value = std::getenv(name)) {
      int count = std::atoi(value);
      if (count > 0) return count;
    }
  return default_pool_size();
}

}  // namespace

int default_pool_size() {
  unsigned processors = std::thread::hardware_concurrency();
#if defined(__x86_64__)
  processors /= 2;
#endif
  return int(std::max(1u, processors));
}

int intra_op_threads() {
  int chosen = chosen_intra_op_threads.load();
  return chosen ? chosen : default_intra_op_threads();
}

void set_intra_op_threads(int count) { chosen_intra_op_threads = count; }

bool onednn_enabled() { return onednn_on.load(); }

void set_onednn_enabled(bool enabled) { onednn_on = enabled; }

bool in_forked_child() { return forked_child.load(); }

void note_forked_child() { forked_child = true; }

bool onednn_usable() { return onednn_enabled() && !(in_forked_child() && intra_op_threads() > 1); }

}  // namespace tn
