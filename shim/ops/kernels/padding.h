// What pad's derivative shares with its kernel (kernels/padding.cpp).
#pragma once

#include <string>

#include "ops.h"

namespace tn {

// Where each element of a dim padded by (lo, hi) in `mode` (reflect, replicate, circular)
// reads from in the input's `size` elements: pad's forward gathers by it, its derivative
// scatters back by it.
Tensor pad_index(int64_t size, int64_t lo, int64_t hi, const std::string& mode);

}  // namespace tn
