// Storage: the bytes behind tensors, owned (and resizable in place) or borrowed.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace tn {

// Owned or borrowed bytes. Borrowed memory (numpy arrays, mapped files) keeps its owner
// alive through the release callback.
class Storage {
 public:
  explicit Storage(size_t nbytes);
  Storage(void* data, size_t nbytes, std::function<void()> release);
  // A window on memory someone else owns (a storage slice): `memory` keeps it alive.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> memory);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // Keeps the current bytes alive even if this storage is later resized: what a slice or an
  // asynchronous operation holds on to, so neither can see freed memory.
  const std::shared_ptr<void>& memory() const { return memory_; }
  // Only memory the storage allocated itself can grow or shrink; every tensor and storage
  // object sharing it sees the new bytes (the first min(old, new) are kept), as upstream's.
  bool resizable() const { return resizable_; }
  void resize(size_t nbytes);
  // Moves the bytes to `data` (the same size, kept alive by `memory`), in place: every tensor
  // on this storage then reads and writes there (shared memory). The storage no longer resizes.
  void move_to(void* data, std::shared_ptr<void> memory);

 private:
  void* data_;
  size_t nbytes_;
  std::shared_ptr<void> memory_;
  bool resizable_ = false;
};

}  // namespace tn
