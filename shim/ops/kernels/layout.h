// Results computed through a stand-in operand upstream's TensorIterator does not have.
#pragma once

#include "common.h"

namespace tn {

// `result`, computed with a Scalar argument as a wrapped-number operand where upstream's
// TensorIterator iterates over `operands` alone (pow(Tensor, Scalar), clamp with Scalar
// bounds), in the layout upstream gives those: they differ where only the operands' own
// shapes decide (all of the result's shape: contiguous, channels last or one dense layout).
inline Tensor in_layout_of(const Tensor& result, const std::vector<Tensor>& operands) {
  Tensor laid = empty_for_operands(result.sizes(), operands, result.dtype(), result.dtype());
  if (laid.strides() == result.strides()) return result;
  laid.copy_from(result);
  return laid;
}

}  // namespace tn
