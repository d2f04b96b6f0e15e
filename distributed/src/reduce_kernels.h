// Element-wise reductions of several same-typed arrays, always in ascending source order.
#pragma once

#include <cstddef>

#include "distributed/process_group.h"

namespace tn::dist {

// Refuses by name a reduction that has no meaning for the dtype (bitwise ops on floats,
// AVG on integers and bool, complex and unknown dtypes).
void check_reducible(ScalarType dtype, ReduceOp op, const char* operation);

// dst[i] = ((sources[0][i] op sources[1][i]) op sources[2][i]) ... for i < count, rounding to
// the dtype after every step as the same ops on tensors would. AVG sums, then divides by the
// number of sources. dst may be any one of the sources.
void reduce_in_order(ScalarType dtype, ReduceOp op, void* dst, const void* const* sources, int num_sources,
                     size_t count);

// values[i] / num_sources, rounded as reduce_in_order's AVG rounds it: the last step of an
// average folded one source at a time with SUM, when the sources do not fit in memory together.
void finish_average(ScalarType dtype, void* values, int num_sources, size_t count);

}  // namespace tn::dist
