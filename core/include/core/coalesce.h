// Merging the dims of a strided loop over several operands into as few rows as they allow: the
// converting copy's and the kernels' elementwise loops walk rows of memory, not elements.
#pragma once

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

}  // namespace tn
