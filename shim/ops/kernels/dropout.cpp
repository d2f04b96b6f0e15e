// dropout.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

TN_KERNEL("aten::dropout", {
  const Tensor& x = a.tensor(0);
  double p = a.real(1);
  if (p < 0 || p > 1)
    throw Error("dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  if (!a.boolean(2) || p == 0) return x;
  if (p == 1) return ops::mul(x, Scalar(int64_t{0}));
  // Upstream: noise = empty_like(x).bernoulli_(1 - p) / (1 - p); x * noise.
  Tensor noise = Tensor::empty(x.sizes(), x.dtype());
  ops::bernoulli_(noise, 1 - p);
  noise = ops::div(noise, Scalar(1 - p));
  return ops::mul(x, noise);
});

}  // namespace tn
