// Derivatives of the activations (kernels/activation.cpp). relu6 is differentiated through
// hardtanh, as upstream's composite relu6 is (record.cpp, kDecomposed).
#include <cmath>

#include "formulas.h"

namespace tn::autograd {

namespace {
double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }
Tensor where_positive(const Tensor& test, const Tensor& g, const Tensor& otherwise) {
  return ops::where(ops::gt(test, Scalar(int64_t{0})), g, otherwise);
}
}  // namespace

TN_DERIVATIVE("aten::relu", "ReluBackward0", SAVES_RESULT(),
              { return {ops::threshold_backward(g[0], s.result(), Scalar(int64_t{0}))}; });
TN_DERIVATIVE("aten::hardtanh", "HardtanhBackward0", SAVES(0),
              { return {ops::hardtanh_backward(g[0], s.input(0), s.args().scalar(1), s.args().scalar(2))}; });
TN_DERIVATIVE("aten::leaky_relu", "LeakyReluBackward0", SAVES(0),
              { return {where_positive(s.input(0), g[0], ops::mul(g[0], s.args().scalar(1)))}; });
namespace {
// In upstream's order: g input_scale (alpha scale) exp(x input_scale) for x <= 0.
Tensor elu_grad(const Tensor& g, const Tensor& x, double alpha, double scale, double input_scale) {
  Tensor negative = ops::mul(ops::mul(ops::mul(g, Scalar(input_scale)), Scalar(alpha * scale)),
                             ops::exp(ops::mul(x, Scalar(input_scale))));
  return where_positive(x, ops::mul(g, Scalar(scale)), negative);
}
// Upstream's vectorized test: outside when x < -lambda or x > lambda (a NaN is not).
Tensor shrunk_grad(const Tensor& g, const Tensor& x, double lambd) {
  Tensor outside = ops::logical_or(ops::lt(x, Scalar(-lambd)), ops::gt(x, Scalar(lambd)));
  return ops::where(outside, g, ops::zeros_like(g));
}
// selu's constants (upstream's SELU_ALPHA and SELU_SCALE).
constexpr double kSeluAlpha = 1.6732632423543772848170429916717,
                 kSeluScale = 1.0507009873554804934193349852946;
}  // namespace
TN_DERIVATIVE("aten::elu", "EluBackward0", SAVES(0),
              { return {elu_grad(g[0], s.input(0), s.args().real(1), s.args().real(2), s.args().real(3))}; });
// selu and celu are elu with fixed constants upstream too (their node is EluBackward0).
TN_DERIVATIVE("aten::selu", "EluBackward0", SAVES(0),
              { return {elu_grad(g[0], s.input(0), kSeluAlpha, kSeluScale, 1.0)}; });
TN_DERIVATIVE("aten::celu", "EluBackward0", SAVES(0), {
  double alpha = s.args().real(1);
  return {elu_grad(g[0], s.input(0), alpha, 1.0, 1.0 / alpha)};
});
// threshold: the gradient passes where x > threshold (where x was replaced, none).
TN_DERIVATIVE("aten::threshold", "ThresholdBackward0", SAVES(0),
              { return {ops::threshold_backward(g[0], s.input(0), s.args().scalar(1))}; });
// hardshrink and softshrink: the gradient passes outside [-lambda, lambda] (a +0 inside).
TN_DERIVATIVE("aten::hardshrink", "HardshrinkBackward0", SAVES(0),
              { return {shrunk_grad(g[0], s.input(0), s.args().real(1))}; });
TN_DERIVATIVE("aten::softshrink", "SoftshrinkBackward0", SAVES(0),
              { return {shrunk_grad(g[0], s.input(0), s.args().real(1))}; });
// d/dx log sigmoid(x) = sigmoid(-x).
TN_DERIVATIVE("aten::log_sigmoid", "LogSigmoidBackward0", SAVES(0),
              { return {pointwise_grad(g[0], s.input(0), [](double x) { return sigmoid(-x); })}; });
// mish = x tanh(softplus(x)): tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2).
TN_DERIVATIVE("aten::mish", "MishBackward0", SAVES(0), {
  return {pointwise_grad(g[0], s.input(0), [](double x) {
    double t = std::tanh(std::log1p(std::exp(x)));
    return t + x * sigmoid(x) * (1 - t * t);
  })};
});
// glu = a sigmoid(b) over the halves a, b of `dim`: a's gradient g sigmoid(b), b's
// g a sigmoid(b) (1 - sigmoid(b)), joined again along `dim`.
TN_DERIVATIVE("aten::glu", "GluBackward0", SAVES(0), {
  const Tensor& x = s.input(0);
  int64_t dim = s.args().integer(1), half = x.size(dim) / 2;
  Tensor a = ops::narrow(x, dim, 0, half), gate = ops::sigmoid(ops::narrow(x, dim, half, half));
  Tensor a_grad = ops::mul(gate, g[0]);
  Tensor b_grad = ops::mul(ops::mul(ops::mul(ops::rsub(gate, Scalar(int64_t{1})), gate), a), g[0]);
  return {ops::cat({a_grad, b_grad}, dim)};
});
TN_DERIVATIVE("aten::silu", "SiluBackward0", SAVES(0), { return {ops::silu_backward(g[0], s.input(0))}; });
// Upstream's gelu_backward kernel (kernels/activation.cpp), its bits.
TN_DERIVATIVE("aten::gelu", "GeluBackward0", SAVES(0), {
  return {ops::gelu_backward(g[0], s.input(0), s.args().optional_string(1).value_or("none"))};
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
// prelu: g where x > 0, else weight g; the weight gets x g where x <= 0, summed over all but
// the channel dim (over everything for a single weight), as upstream's prelu_backward.
TN_DERIVATIVE("aten::prelu", "PreluBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &w = s.input(1);
  bool single = w.numel() == 1;
  Shape channel_shape(size_t(x.dim()), 1);
  if (!single) channel_shape[1] = w.numel();
  Tensor weight = single ? w : ops::reshape(w, channel_shape);
  Tensor positive = ops::gt(x, Scalar(int64_t{0}));
  Stack out{ops::where(positive, g[0], ops::mul(weight, g[0]))};
  if (!s.needs_grad(1)) return out;
  Tensor collector = ops::where(positive, ops::zeros_like(g[0]), ops::mul(x, g[0]));
  std::vector<int64_t> reduced{0};
  for (int64_t d = 2; d < x.dim(); ++d) reduced.push_back(d);
  Tensor summed = single ? ops::sum(collector) : ops::sum(collector, reduced, false, std::nullopt);
  out.push_back(ops::reshape(summed, w.sizes()));
  return out;
});
// rrelu in evaluation: leaky_relu's gradient with the mean slope, rounded as the forward's.
TN_DERIVATIVE("aten::rrelu", "RreluWithNoiseBackward0", SAVES(0), {
  if (s.args().boolean(3))
    throw NotImplemented("torchnative does not differentiate aten::rrelu with training=True yet");
  double slope = (s.args().scalar(1).to_double() + s.args().scalar(2).to_double()) / 2;
  if (s.input_dtype(0) != ScalarType::Double) slope = double(float(slope));
  return {where_positive(s.input(0), g[0], ops::mul(g[0], Scalar(slope)))};
});

}  // namespace tn::autograd
