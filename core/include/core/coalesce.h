// Merging the dims of a strided loop over several operands into as few rows as they allow, and
// walking them: the converting copy's and the kernels' elementwise loops go by rows of memory,
// not elements.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "core/tensor.h"

namespace tn {

// A loop's dims over N operands with each pair that every operand steps through as one run
// merged (the outer dim's stride is the inner's times its size, in each) and size-1 dims
// dropped: contiguous and broadcast operands give long rows, and the order the elements are
// visited in (row-major) is unchanged. Never empty: a single element is one row of one.
template <size_t N>
struct Coalesced {
  Shape sizes;
  std::array<Shape, N> strides;
};

template <size_t N>
Coalesced<N> coalesce(const Shape& sizes, const std::array<Shape, N>& strides) {
  Coalesced<N> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool chains = !out.sizes.empty();
    for (size_t k = 0; k < N && chains; ++k) chains = out.strides[k].back() == sizes[d] * strides[k][d];
    if (chains) {
      out.sizes.back() *= sizes[d];
      for (size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.sizes.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  if (out.sizes.empty()) {
    out.sizes = {1};
    for (Shape& s : out.strides) s = {0};
  }
  return out;
}

// Calls row(offsets, length, steps) for the rows of `layout` (in row-major order) that hold its
// elements [first, last), the first and the last of them possibly in part: each operand's offset
// of the first element in range and its step along the row, in elements. Threads given disjoint
// ranges visit disjoint elements.
template <size_t N, typename Row>
void rows_in_range(const Coalesced<N>& layout, int64_t first, int64_t last, Row&& row) {
  const size_t outer = layout.sizes.size() - 1;
  const int64_t length = layout.sizes[outer];
  std::array<int64_t, N> steps;
  for (size_t k = 0; k < N; ++k) steps[k] = layout.strides[k][outer];
  Shape index(outer);  // the outer index of the row holding `first`, then counted up row by row
  for (int64_t rest = first / length, d = int64_t(outer) - 1; d >= 0; --d) {
    index[size_t(d)] = rest % layout.sizes[size_t(d)];
    rest /= layout.sizes[size_t(d)];
  }
  for (int64_t at = first, start = first % length; at < last; at += length - start, start = 0) {
    std::array<int64_t, N> offsets{};
    for (size_t k = 0; k < N; ++k) {
      for (size_t d = 0; d < outer; ++d) offsets[k] += index[d] * layout.strides[k][d];
      offsets[k] += start * steps[k];
    }
    row(offsets, std::min(length - start, last - at), steps);
    for (size_t d = outer; d-- > 0 && ++index[d] == layout.sizes[d];) index[d] = 0;
  }
}

}  // namespace tn
