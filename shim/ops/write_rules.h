// What the door checks before an operator writes into a tensor (see check_writes in
// dispatcher.cpp): upstream's TensorIterator rules by default, minus the families and
// inputs upstream's kernels write without checking.
#pragma once

#include <string>

namespace tn {

// The family ("add" for add.Tensor, add_.Scalar and add.out) refuses an output whose
// elements share memory (an expanded view).
bool checks_internal_overlap(const std::string& family, const std::string& name);
// The family refuses an input `argument` that overlaps an output in part.
bool checks_partial_overlap(const std::string& family, const std::string& argument);

}  // namespace tn
