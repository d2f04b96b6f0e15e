#include "scratch.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace tn::dist {

namespace {

// Scratch buffers are reused: a fresh 100 MiB allocation costs its pages' first-touch faults
// again on every call, which on loopback took longer than moving the bytes. Released buffers
// are kept (the largest few), shared by the process's groups, and handed out best-fit so a
// small request never takes the big buffer a large operation will want next. Small requests
// bypass the pool: malloc serves them from memory it already has.
class ScratchPool {
 public:
  std::shared_ptr<uint8_t[]> take(uint64_t bytes) {
    std::unique_ptr<uint8_t[]> memory;
    uint64_t capacity = bytes;
    if (bytes < kPooledFrom) return std::shared_ptr<uint8_t[]>(new uint8_t[std::max<uint64_t>(bytes, 1)]);
    {
      std::lock_guard lock(mutex_);
      // free_ is sorted largest first: the last entry that fits is the best fit.
      auto fit = std::find_if(free_.rbegin(), free_.rend(),
                              [&](const Entry& entry) { return entry.bytes >= bytes; });
      if (fit != free_.rend()) {
        memory = std::move(fit->memory);
        capacity = fit->bytes;
        free_.erase(std::next(fit).base());
      }
    }
    // Not zeroed: every byte is received before it is read.
    if (!memory) memory.reset(new uint8_t[std::max<uint64_t>(bytes, 1)]);
    uint8_t* raw = memory.release();
    return std::shared_ptr<uint8_t[]>(raw,
                                      [this, capacity](uint8_t* released) { give_back(released, capacity); });
  }

 private:
  struct Entry {
    std::unique_ptr<uint8_t[]> memory;
    uint64_t bytes;
  };
  static constexpr size_t kKept = 8;
  static constexpr uint64_t kPooledFrom = 256 * 1024;

  void give_back(uint8_t* released, uint64_t bytes) {
    std::unique_ptr<uint8_t[]> memory(released);
    std::lock_guard lock(mutex_);
    free_.push_back({std::move(memory), bytes});
    std::sort(free_.begin(), free_.end(), [](const Entry& a, const Entry& b) { return a.bytes > b.bytes; });
    if (free_.size() > kKept) free_.pop_back();  // the smallest goes
  }

  std::mutex mutex_;
  std::vector<Entry> free_;
};

}  // namespace

std::shared_ptr<uint8_t[]> scratch(uint64_t bytes) {
  static ScratchPool* pool = new ScratchPool;  // never destroyed: buffers may come back at exit
  return pool->take(bytes);
}

}  // namespace tn::dist
