#include "core/storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "core/error.h"
#include "large_blocks.h"

namespace tn {

namespace {
thread_local bool meta_allocation = false;

// 64-byte alignment matches what vectorized kernels and numpy expect.
std::shared_ptr<void> allocate_aligned(size_t nbytes) {
  if (nbytes >= kLargeBlockBytes) return allocate_large(nbytes);
  void* data = std::aligned_alloc(64, std::max<size_t>(64, (nbytes + 63) / 64 * 64));
  if (!data) throw std::bad_alloc();
  return std::shared_ptr<void>(data, std::free);
}
}  // namespace

Storage::Storage(size_t nbytes)
    : data_(nullptr),
      nbytes_(nbytes),
      memory_(meta_allocation ? nullptr : allocate_aligned(nbytes)),
      resizable_(true),
      meta_(meta_allocation) {
  data_ = memory_.get();
}

void Storage::refuse_meta_access() {
  throw MetaDataAccess("Cannot copy out of meta tensor; no data!");  // upstream's words
}

MetaAllocation::MetaAllocation(bool meta) : previous_(meta_allocation) { meta_allocation = meta; }
MetaAllocation::~MetaAllocation() { meta_allocation = previous_; }

Storage::Storage(void* data, size_t nbytes, std::function<void()> release)
    : data_(data), nbytes_(nbytes), memory_(data, [release = std::move(release)](void*) {
        if (release) release();
      }) {}

Storage::Storage(void* data, size_t nbytes, std::shared_ptr<void> memory)
    : data_(data), nbytes_(nbytes), memory_(std::move(memory)) {}

void Storage::resize(size_t nbytes) {
  if (!resizable_)
    throw Error("Trying to resize storage that is not resizable (it borrows memory it did not allocate)");
  if (nbytes == nbytes_) return;
  if (meta_) {
    nbytes_ = nbytes;
    return;
  }
  std::shared_ptr<void> memory = allocate_aligned(nbytes);
  std::memcpy(memory.get(), data_, std::min(nbytes, nbytes_));
  memory_ = std::move(memory);
  data_ = memory_.get();
  nbytes_ = nbytes;
}

void Storage::move_to(void* data, std::shared_ptr<void> memory) {
  if (meta_) refuse_meta_access();
  if (nbytes_) std::memcpy(data, data_, nbytes_);
  data_ = data;
  memory_ = std::move(memory);
  resizable_ = false;
}

}  // namespace tn
