// Storage: the bytes behind tensors, owned (and resizable in place) or borrowed.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace tn {

// Owned or borrowed bytes. Borrowed memory (numpy arrays, mapped files) keeps its owner
// alive through the release callback. A meta storage (the "meta" device) has a size and no
// bytes: its tensors carry shapes, strides and dtypes, and reading or writing their elements
// throws MetaDataAccess.
class Storage {
 public:
  // Allocates `nbytes`, or makes a meta storage of that size while a MetaAllocation lives.
  explicit Storage(size_t nbytes);
  Storage(void* data, size_t nbytes, std::function<void()> release);
  // A window on memory someone else owns (a storage slice): `memory` keeps it alive.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> memory);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const {
    if (meta_) refuse_meta_access();
    return data_;
  }
  bool is_meta() const { return meta_; }
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
  bool meta_ = false;
  [[noreturn]] static void refuse_meta_access();
};

// While one lives, on this thread, every storage allocated by size is a meta storage: the
// door holds one while a call whose results belong on the meta device runs its kernel. One
// made with `meta` false lifts that for a kernel's own temporaries that must hold values (a
// fill value as a 0-dim tensor).
class MetaAllocation {
 public:
  explicit MetaAllocation(bool meta = true);
  ~MetaAllocation();
  MetaAllocation(const MetaAllocation&) = delete;
  MetaAllocation& operator=(const MetaAllocation&) = delete;

 private:
  bool previous_;
};

}  // namespace tn
