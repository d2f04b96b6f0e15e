// Derivatives of the unary functions (kernels/unary_ops.cpp and the vml table).
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::neg", "NegBackward0", SAVES(), { return {ops::neg(g[0])}; });
TN_DERIVATIVE("aten::exp", "ExpBackward0", SAVES_RESULT(), { return {ops::mul(g[0], s.result())}; });
TN_DERIVATIVE("aten::log", "LogBackward0", SAVES(0), { return {ops::div(g[0], s.input(0))}; });
TN_DERIVATIVE("aten::sqrt", "SqrtBackward0", SAVES_RESULT(),
              { return {ops::div(g[0], ops::mul(s.result(), Scalar(int64_t{2})))}; });
// d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
TN_DERIVATIVE("aten::rsqrt", "RsqrtBackward0", SAVES_RESULT(), {
  const Tensor& y = s.result();
  return {ops::mul(scaled(g[0], -0.5), ops::pow(y, Scalar(int64_t{3})))};
});
TN_DERIVATIVE("aten::abs", "AbsBackward0", SAVES(0), { return {ops::mul(g[0], ops::sgn(s.input(0)))}; });
TN_DERIVATIVE("aten::tanh", "TanhBackward0", SAVES_RESULT(), {
  const Tensor& y = s.result();
  return {ops::mul(g[0], ops::rsub(ops::mul(y, y), Scalar(int64_t{1})))};
});
TN_DERIVATIVE("aten::sigmoid", "SigmoidBackward0", SAVES_RESULT(), {
  const Tensor& y = s.result();
  return {ops::mul(ops::mul(g[0], y), ops::rsub(y, Scalar(int64_t{1})))};
});

}  // namespace tn::autograd
