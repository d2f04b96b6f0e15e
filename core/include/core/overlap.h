// Memory overlap between tensors, judged as upstream's TensorIterator judges it before it
// writes: an output whose elements share memory is refused, an input that overlaps an
// output only in part is refused, and one that is the output itself is computed as if
// through a temporary. Overlap that cannot be decided cheaply (non-dense views) is "too
// hard", which upstream lets through.
#pragma once

#include "core/tensor.h"

namespace tn {

enum class InternalOverlap { No, Yes, TooHard };
enum class Overlap { No, Full, Partial, TooHard };

// The elements fill a dense block of memory, each exactly once, in some order of dims.
bool is_non_overlapping_and_dense(const Tensor& t);
InternalOverlap internal_overlap(const Tensor& t);
Overlap overlap(const Tensor& a, const Tensor& b);

// Upstream's refusals, with its messages.
void assert_no_internal_overlap(const Tensor& t);
void assert_no_partial_overlap(const Tensor& written, const Tensor& input);
void assert_no_overlap(const Tensor& written, const Tensor& input);  // full overlap refused too

}  // namespace tn
