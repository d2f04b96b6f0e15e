// The dtypes upstream's CPU kernels are not compiled for. Upstream refuses them inside the
// kernel ("\"addmm_impl_cpu_\" not implemented for 'Bool'"); the door refuses them before
// any kernel of ours runs, so a composite (matmul on bool reaching mm) refuses as upstream's
// does without a check of its own.
#pragma once

#include "ops.h"

namespace tn {

struct KernelDtypeRule;

// The family's rules, resolved once per operator (nullptr: every dtype runs).
const std::vector<KernelDtypeRule>* kernel_dtype_rules(const Operator& op);
// Throws upstream's "not implemented for" error when the call's dtype is refused.
void check_kernel_dtype(const Operator& op, const std::vector<KernelDtypeRule>& rules, const Stack& stack);

}  // namespace tn
