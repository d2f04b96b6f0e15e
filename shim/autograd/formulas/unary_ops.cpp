// Derivatives of the unary functions (kernels/unary_ops.cpp and the vml table).
#include <cmath>
#include <limits>

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
TN_DERIVATIVE("aten::sigmoid", "SigmoidBackward0", SAVES_RESULT(),
              { return {ops::sigmoid_backward(g[0], s.result())}; });

// Piecewise constant functions: no gradient anywhere (upstream's zeros_like, not a refusal).
TN_DERIVATIVE("aten::sign", "SignBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::floor", "FloorBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::ceil", "CeilBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::trunc", "TruncBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::round", "RoundBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::round.decimals", "RoundBackward1", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::frac", "FracBackward0", SAVES(), { return {g[0]}; });

// The trigonometric and hyperbolic functions, each written in upstream's order of operations
// so that float32 rounds alike.
TN_DERIVATIVE("aten::sin", "SinBackward0", SAVES(0), { return {ops::mul(g[0], ops::cos(s.input(0)))}; });
TN_DERIVATIVE("aten::cos", "CosBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::neg(ops::sin(s.input(0))))}; });
TN_DERIVATIVE("aten::tan", "TanBackward0", SAVES_RESULT(), {
  return {ops::mul(g[0], ops::add(ops::pow(s.result(), Scalar(int64_t{2})), Scalar(int64_t{1})))};
});
TN_DERIVATIVE("aten::sinh", "SinhBackward0", SAVES(0), { return {ops::mul(g[0], ops::cosh(s.input(0)))}; });
TN_DERIVATIVE("aten::cosh", "CoshBackward0", SAVES(0), { return {ops::mul(g[0], ops::sinh(s.input(0)))}; });
namespace {
Tensor one_minus_square(const Tensor& x) { return ops::add(ops::mul(ops::neg(x), x), Scalar(int64_t{1})); }
}  // namespace
TN_DERIVATIVE("aten::asin", "AsinBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::rsqrt(one_minus_square(s.input(0))))}; });
TN_DERIVATIVE("aten::acos", "AcosBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::neg(ops::rsqrt(one_minus_square(s.input(0)))))}; });
TN_DERIVATIVE("aten::atan", "AtanBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  return {ops::div(g[0], ops::add(ops::mul(x, x), Scalar(int64_t{1})))};
});
TN_DERIVATIVE("aten::asinh", "AsinhBackward0", SAVES(0), {
  return {ops::mul(g[0], ops::rsqrt(ops::add(ops::pow(s.input(0), Scalar(int64_t{2})), Scalar(int64_t{1}))))};
});
TN_DERIVATIVE("aten::acosh", "AcoshBackward0", SAVES(0), {
  return {ops::mul(g[0], ops::rsqrt(ops::sub(ops::pow(s.input(0), Scalar(int64_t{2})), Scalar(int64_t{1}))))};
});
TN_DERIVATIVE("aten::atanh", "AtanhBackward0", SAVES(0), {
  return {ops::div(g[0], ops::rsub(ops::pow(s.input(0), Scalar(int64_t{2})), Scalar(int64_t{1})))};
});

// Logarithms and exponentials of other bases.
TN_DERIVATIVE("aten::log1p", "Log1PBackward0", SAVES(0),
              { return {ops::div(g[0], ops::add(s.input(0), Scalar(int64_t{1})))}; });
TN_DERIVATIVE("aten::log2", "Log2Backward0", SAVES(0),
              { return {ops::div(g[0], ops::mul(s.input(0), Scalar(0.6931471805599453)))}; });
TN_DERIVATIVE("aten::log10", "Log10Backward0", SAVES(0),
              { return {ops::div(g[0], ops::mul(s.input(0), Scalar(2.3025850929940456)))}; });
TN_DERIVATIVE("aten::expm1", "Expm1Backward0", SAVES_RESULT(),
              { return {ops::mul(g[0], ops::add(s.result(), Scalar(int64_t{1})))}; });
TN_DERIVATIVE("aten::exp2", "Exp2Backward0", SAVES_RESULT(),
              { return {ops::mul(ops::mul(g[0], s.result()), Scalar(0.6931471805599453))}; });
// square is pow(x, 2) upstream: its node is PowBackward0.
TN_DERIVATIVE("aten::square", "PowBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::mul(s.input(0), Scalar(2.0)))}; });
TN_DERIVATIVE("aten::reciprocal", "ReciprocalBackward0", SAVES_RESULT(), {
  const Tensor& y = s.result();
  return {ops::mul(ops::neg(g[0]), ops::mul(y, y))};
});
TN_DERIVATIVE("aten::rad2deg", "Rad2DegBackward0", SAVES(),
              { return {ops::mul(g[0], Scalar(180.0 / M_PI))}; });
TN_DERIVATIVE("aten::deg2rad", "Deg2RadBackward0", SAVES(),
              { return {ops::mul(g[0], Scalar(M_PI / 180.0))}; });

// The error function and its inverse: 2/sqrt(pi) exp(-x^2), and 1/2 sqrt(pi) exp(erfinv(x)^2).
TN_DERIVATIVE("aten::erf", "ErfBackward0", SAVES(0), {
  Tensor bell = ops::exp(ops::neg(ops::pow(s.input(0), Scalar(int64_t{2}))));
  return {ops::mul(ops::mul(bell, Scalar(2.0 / std::sqrt(M_PI))), g[0])};
});
TN_DERIVATIVE("aten::erfc", "ErfcBackward0", SAVES(0), {
  Tensor bell = ops::exp(ops::neg(ops::pow(s.input(0), Scalar(int64_t{2}))));
  return {ops::mul(ops::mul(bell, Scalar(-2.0 / std::sqrt(M_PI))), g[0])};
});
TN_DERIVATIVE("aten::erfinv", "ErfinvBackward0", SAVES(0), {
  Tensor bell = ops::exp(ops::pow(ops::erfinv(s.input(0)), Scalar(int64_t{2})));
  return {ops::mul(ops::mul(bell, Scalar(0.5 * std::sqrt(M_PI))), g[0])};
});
TN_DERIVATIVE("aten::lgamma", "LgammaBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::digamma(s.input(0)))}; });
// Where nan_to_num replaced a value, the result does not depend on it.
TN_DERIVATIVE("aten::nan_to_num", "NanToNumBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::isfinite(s.input(0)))}; });

// logit: 1 / (x (1 - x)); outside [eps, 1 - eps] (clamped) none; without eps, NaN outside [0, 1].
TN_DERIVATIVE("aten::logit", "LogitBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  auto eps = s.args().optional_real(1);
  Tensor inner = ops::div(g[0], ops::mul(x, ops::rsub(x, Scalar(int64_t{1}))));
  double low = eps ? *eps : 0, high = eps ? 1 - *eps : 1;
  Tensor outside = ops::logical_or(ops::lt(x, Scalar(low)), ops::gt(x, Scalar(high)));
  return {ops::masked_fill(inner, outside, Scalar(eps ? 0.0 : std::numeric_limits<double>::quiet_NaN()))};
});

// sinc: g (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 is 0, in upstream's steps.
TN_DERIVATIVE("aten::sinc", "SincBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  Tensor x_pi = ops::mul(x, Scalar(M_PI));
  Tensor x_squared_pi = ops::mul(ops::mul(x, x), Scalar(M_PI));
  Tensor grad =
      ops::div(ops::mul(g[0], ops::sub(ops::mul(x_pi, ops::cos(x_pi)), ops::sin(x_pi))), x_squared_pi);
  return {ops::where(ops::eq(x_squared_pi, Scalar(0.0)), ops::zeros_like(grad), grad)};
});
// The angle of a real number is piecewise constant (0 or pi).
TN_DERIVATIVE("aten::angle", "AngleBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });

// digamma' = polygamma(1, .), polygamma(n, .)' = polygamma(n + 1, .) (refused by name past n = 1).
TN_DERIVATIVE("aten::digamma", "DigammaBackward0", SAVES(0),
              { return {ops::mul(g[0], ops::polygamma(1, s.input(0)))}; });
TN_DERIVATIVE("aten::polygamma", "PolygammaBackward0", SAVES(1).without_derivative({0}), {
  return {none(), ops::mul(g[0], ops::polygamma(s.args().integer(0) + 1, s.input(1)))};
});

}  // namespace tn::autograd
