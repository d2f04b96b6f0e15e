// Derivatives of the summaries (kernels/summary_ops.cpp): upstream has none for bincount's
// weighted counts.
#include "formulas.h"

namespace tn::autograd {

TN_NO_DERIVATIVE_UPSTREAM("aten::bincount", "aten::bincount");

}  // namespace tn::autograd
