// Derivatives of the activations (kernels/activation.cpp). relu6 is differentiated through
// hardtanh, as upstream's composite relu6 is (record.cpp, kDecomposed).
#include <cmath>
#include <numbers>

#include "formulas.h"

namespace tn::autograd {

namespace {
double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }
Tensor where_positive(const Tensor& test, const Tensor& g, const Tensor& otherwise) {
  return ops::where(ops::gt(test, Scalar(int64_t{0})), g, otherwise);
}
}  // namespace

TN_DERIVATIVE("aten::relu", "ReluBackward0", SAVES_RESULT(),
              { return {where_positive(s.result(), g[0], ops::zeros_like(g[0]))}; });
TN_DERIVATIVE("aten::hardtanh", "HardtanhBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  Tensor inside = ops::logical_and(ops::gt(x, s.args().scalar(1)), ops::lt(x, s.args().scalar(2)));
  return {ops::where(inside, g[0], ops::zeros_like(g[0]))};
});
TN_DERIVATIVE("aten::leaky_relu", "LeakyReluBackward0", SAVES(0),
              { return {where_positive(s.input(0), g[0], ops::mul(g[0], s.args().scalar(1)))}; });
TN_DERIVATIVE("aten::elu", "EluBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  double alpha = s.args().real(1), scale = s.args().real(2), input_scale = s.args().real(3);
  Tensor negative = ops::mul(ops::exp(ops::mul(x, Scalar(input_scale))), Scalar(input_scale * alpha * scale));
  return {where_positive(x, ops::mul(g[0], Scalar(scale)), ops::mul(g[0], negative))};
});
TN_DERIVATIVE("aten::silu", "SiluBackward0", SAVES(0), {
  return {pointwise_grad(g[0], s.input(0), [](double x) {
    double sig = sigmoid(x);
    return sig * (1 + x * (1 - sig));
  })};
});
TN_DERIVATIVE("aten::gelu", "GeluBackward0", SAVES(0), {
  if (s.args().optional_string(1).value_or("none") == "tanh")
    return {pointwise_grad(g[0], s.input(0), [](double x) {
      const double beta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, kappa = 0.044715;
      double inner = std::tanh(beta * (x + kappa * x * x * x));
      return 0.5 * (1 + inner) + 0.5 * x * (1 - inner * inner) * beta * (1 + 3 * kappa * x * x);
    })};
  return {pointwise_grad(g[0], s.input(0), [](double x) {
    double cdf = 0.5 * (1 + std::erf(x * std::numbers::sqrt2 / 2));
    double pdf = std::exp(-0.5 * x * x) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
    return cdf + x * pdf;
  })};
});
// Above the threshold softplus is the identity, as in the forward.
TN_DERIVATIVE("aten::softplus", "SoftplusBackward0", SAVES(0), {
  double beta = s.args().real(1), threshold = s.args().real(2);
  Tensor scaled_x = ops::mul(s.input(0), Scalar(beta));
  Tensor z = ops::exp(scaled_x);
  Tensor smooth = ops::mul(g[0], ops::div(z, ops::add(z, Scalar(int64_t{1}))));
  return {ops::where(ops::gt(scaled_x, Scalar(threshold)), g[0], smooth)};
});
TN_DERIVATIVE("aten::hardswish", "HardswishBackward0", SAVES(0), {
  return {pointwise_grad(g[0], s.input(0), [](double x) {
    return x < -3 ? 0.0 : x <= 3 ? x / 3 + 0.5 : 1.0;
  })};
});
TN_DERIVATIVE("aten::hardsigmoid", "HardsigmoidBackward0", SAVES(0), {
  // Upstream multiplies by 1/6 rounded to float, in float64 too.
  return {
      pointwise_grad(g[0], s.input(0), [](double x) { return x > -3 && x < 3 ? double(1.0f / 6) : 0.0; })};
});

}  // namespace tn::autograd
