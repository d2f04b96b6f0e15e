// What the door checks before an operator writes into a tensor (see check_writes in
// dispatcher.cpp): upstream's TensorIterator rules by default, minus the families and
// inputs upstream's kernels write without checking.
#pragma once

#include <string>

#include "core/scalar_type.h"

namespace tn {

// The family ("add" for add.Tensor, add_.Scalar and add.out) refuses an output whose
// elements share memory (an expanded view).
bool checks_internal_overlap(const std::string& family, const std::string& name);
// How the family checks an input `argument` against an output: not at all, refusing a
// partial overlap (TensorIterator's rule), or refusing any shared memory. A tensor list
// (cat's inputs, index_put_'s indices) is always refused any shared memory.
enum class InputCheck { None, PartialOverlap, AnyOverlap };
InputCheck input_check(const std::string& family, const std::string& argument);

// Checks the dtype of output `index` (of `outputs`) of an in-place or out= call of the family (`name` its
// operator, "add_" or "add") against the dtype `result` it computed, refusing with upstream's
// message what upstream refuses. By default a result must be castable to the output
// (upstream's canCast); some families require an exact dtype, some convert anything.
void check_output_dtype(const std::string& family, const std::string& name, size_t index, size_t outputs,
                        ScalarType output, ScalarType result);

// Reductions whose out= form computes in the out tensor's dtype when no dtype is given.
bool computes_in_out_dtype(const std::string& family);

}  // namespace tn
