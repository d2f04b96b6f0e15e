// Storage's memory for tensors of 1 MiB and more: mapped from the OS and kept for reuse when
// freed, so that a training loop's activations and gradients, allocated anew at every step in
// the same sizes, land on pages already faulted in (from malloc, each block past glibc's
// threshold was mapped and zeroed by the kernel again at every allocation, and the blocks under
// it stayed resident as a fragmented heap).
#pragma once

#include <cstddef>
#include <memory>

namespace tn {

// The size from which allocate_large serves blocks (smaller ones stay with malloc).
constexpr size_t kLargeBlockBytes = size_t(1) << 20;

// A 64-byte aligned block of `nbytes` whose shared_ptr returns it to the cache. The
// cache holds at most 64 MiB more than the peak of large blocks live at once minus those live
// now: what is mapped stays within the most the program has needed plus that slack.
std::shared_ptr<void> allocate_large(size_t nbytes);

}  // namespace tn
