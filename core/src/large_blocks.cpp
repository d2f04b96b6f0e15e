#include "large_blocks.h"

#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace tn {

namespace {

using Blocks = std::vector<std::pair<void*, size_t>>;

// What the cache may hold beyond the peak's headroom: without it a loop whose few large
// tensors alternate sizes (the demo CNN's step: 7 MiB live at most) unmapped one size to map
// the other, and paid the page faults glibc's reused heap had not.
constexpr size_t kSlackBytes = size_t(64) << 20;

void unmap(const Blocks& blocks) {
  for (auto [data, size] : blocks) munmap(data, size);
}

class LargeBlocks {
 public:
  static LargeBlocks& instance() {
    static LargeBlocks* blocks = new LargeBlocks();  // never destroyed: storages outlive statics
    return *blocks;
  }

  // The free block of `size` bytes freed last (its lines likeliest still cached), else a new
  // mapping of `size`.
  void* take(size_t size) {
    if (void* reused = reuse(size)) return reused;
    void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {  // what the cache holds may be what the system lacks
      unmap(release(SIZE_MAX));
      data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (data == MAP_FAILED) {
      std::lock_guard hold(lock_);
      live_ -= size;
      throw std::bad_alloc();
    }
    return data;
  }

  void give(void* data, size_t block) {
    std::lock_guard hold(lock_);
    live_ -= block;
    free_.emplace(block, data);
    cached_ += block;
  }

 private:
  LargeBlocks() {
    // A process forked while another thread holds the lock (a DataLoader worker starting)
    // must not inherit it held.
    pthread_atfork([] { instance().lock_.lock(); }, [] { instance().lock_.unlock(); },
                   [] { instance().lock_.unlock(); });
  }

  // Takes a cached block that fits, or counts a new one of `size` as live and unmaps (outside
  // the lock) the cached blocks that would take the mapped total past the peak of live bytes
  // and the slack.
  void* reuse(size_t size) {
    Blocks evicted;
    void* found = nullptr;
    {
      std::lock_guard hold(lock_);
      if (auto after = free_.upper_bound(size); after != free_.begin() && std::prev(after)->first == size) {
        auto fit = std::prev(after);
        found = fit->second;
        free_.erase(fit);
        cached_ -= size;
      }
      live_ += size;
      peak_live_ = std::max(peak_live_, live_);
      size_t room = peak_live_ - live_ + kSlackBytes;
      if (cached_ > room) evicted = release_locked(cached_ - room);
    }
    unmap(evicted);
    return found;
  }

  // Removes cached blocks, largest first, until at least `bytes` are removed or none is left.
  Blocks release(size_t bytes) {
    std::lock_guard hold(lock_);
    return release_locked(bytes);
  }
  Blocks release_locked(size_t bytes) {
    Blocks out;
    for (size_t freed = 0; freed < bytes && !free_.empty(); freed += out.back().second) {
      auto largest = std::prev(free_.end());
      out.emplace_back(largest->second, largest->first);
      cached_ -= largest->first;
      free_.erase(largest);
    }
    return out;
  }

  std::mutex lock_;
  std::multimap<size_t, void*> free_;  // cached blocks by size
  size_t live_ = 0, cached_ = 0, peak_live_ = 0;
};

}  // namespace

// A block is a page longer than the tensor's pages, and the tensor starts at one of the 64
// cache lines of the first page (by the block's address): tensors all at a page's start
// can make a binary kernel's three streams alias in the store-forwarding check (4K
// aliasing; the demo CNN's step was 3-6% slower than from malloc without the offset, at par
// with it). Under AddressSanitizer everything
// but the tensor's bytes is poisoned (a cached block wholly), as malloc's redzones and freed
// blocks are.
std::shared_ptr<void> allocate_large(size_t nbytes) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t block = (nbytes + page - 1) / page * page + page;
  char* base = static_cast<char*>(LargeBlocks::instance().take(block));
  size_t color = (reinterpret_cast<uintptr_t>(base) / page) % (page / 64) * 64;
  char* data = base + color;
  ASAN_POISON_MEMORY_REGION(base, block);
  ASAN_UNPOISON_MEMORY_REGION(data, nbytes);
  return std::shared_ptr<void>(data, [block, color](void* p) {
    char* base = static_cast<char*>(p) - color;
    ASAN_POISON_MEMORY_REGION(base, block);
    LargeBlocks::instance().give(base, block);
  });
}

}  // namespace tn
