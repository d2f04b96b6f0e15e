// Derivatives of unique (kernels/unique.cpp): upstream has none, and raises this error when
// the backward pass reaches the unique values.
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::_unique2", "Unique2Backward0", SAVES(),
              { throw NotImplemented("the derivative for '_unique2' is not implemented."); });

}  // namespace tn::autograd
