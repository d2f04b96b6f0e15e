#include "core/overlap.h"

#include <algorithm>
#include <numeric>

namespace tn {

bool is_non_overlapping_and_dense(const Tensor& t) {
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  if (t.dim() == 1) return sizes[0] < 2 || strides[0] == 1;
  // Dims by increasing stride, those of size 0 or 1 last (they take no memory of their own).
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] < 2 || sizes[b] < 2) return sizes[a] >= 2 && sizes[b] < 2;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (size_t d : order) {
    if (sizes[d] < 2) return true;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

InternalOverlap internal_overlap(const Tensor& t) {
  if (is_non_overlapping_and_dense(t)) return InternalOverlap::No;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[size_t(d)] == 0 && t.sizes()[size_t(d)] > 1) return InternalOverlap::Yes;
  return InternalOverlap::TooHard;
}

Overlap overlap(const Tensor& a, const Tensor& b) {
  if (a.same(b)) return Overlap::Full;
  if (a.numel() == 0 || b.numel() == 0) return Overlap::No;
  if (!is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b)) return Overlap::TooHard;
  if (a.storage() != b.storage()) return Overlap::No;
  // Byte offsets in the shared storage (a meta storage has no addresses).
  int64_t a_begin = a.offset() * int64_t(a.itemsize());
  int64_t a_end = a_begin + a.numel() * int64_t(a.itemsize());
  int64_t b_begin = b.offset() * int64_t(b.itemsize());
  int64_t b_end = b_begin + b.numel() * int64_t(b.itemsize());
  if (a_begin == b_begin && a_end == b_end)
    return a.strides() == b.strides() ? Overlap::Full : Overlap::Partial;
  return a_begin < b_end && b_begin < a_end ? Overlap::Partial : Overlap::No;
}

namespace {
const char* const kSharedInput =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
    "memory location. Please clone() the tensor before performing the operation.";
}  // namespace

void assert_no_internal_overlap(const Tensor& t) {
  if (internal_overlap(t) == InternalOverlap::Yes)
    throw Error(
        "unsupported operation: more than one element of the written-to tensor refers to a single memory "
        "location. Please clone() the tensor before performing the operation.");
}

void assert_no_partial_overlap(const Tensor& written, const Tensor& input) {
  if (overlap(written, input) == Overlap::Partial) throw Error(kSharedInput);
}

void assert_no_overlap(const Tensor& written, const Tensor& input) {
  Overlap o = overlap(written, input);
  if (o == Overlap::Partial || o == Overlap::Full) throw Error(kSharedInput);
}

}  // namespace tn
