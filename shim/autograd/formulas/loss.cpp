// Derivatives of the losses (kernels/loss.cpp). cross_entropy_loss is differentiated
// through its decomposition (log_softmax, nll_loss), as upstream's composite is.
#include "loss.h"  // nll_loss_backward, which sums the total weight as the kernel does

#include "common.h"  // vectorized_elements: which lambda upstream's pointwise loss backwards take
#include "formulas.h"

namespace tn::autograd {

namespace {
enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// d loss / d x elementwise, times the incoming gradient (one per element, or one for a
// reduced loss), over the element count for a mean.
Tensor reduced_grad(const Tensor& elementwise, const Tensor& g, int64_t reduction) {
  Tensor grad = ops::mul(elementwise, g);
  return reduction == kMean ? ops::div(grad, Scalar(elementwise.numel())) : grad;
}

// x - t at the broadcast shape of the pair.
Tensor difference(const Saved& s) { return ops::sub(s.input(0), s.input(1)); }

// Optional weights multiply the elementwise gradient.
Tensor weighted(const Saved& s, size_t weight_argument, const Tensor& t) {
  return s.input_defined(weight_argument) ? ops::mul(t, s.input(weight_argument)) : t;
}

// The pointwise losses' backward kernels (mse, smooth_l1, huber) scale by norm = k / numel for
// a mean (k otherwise).
double loss_norm(const Tensor& x, int64_t reduction, double k) {
  return reduction == kMean ? k / double(x.numel()) : k;
}

// The norm as those kernels hold it: in the dtype they compute in, the promoted one of x - t.
Tensor norm_like(double norm, const Tensor& d) { return ops::scalar_tensor(Scalar(norm), d.dtype()); }

// Upstream's smooth_l1 and huber backward kernels are cpu_kernel_vec over (x, t, g) whose
// vectorized and scalar lambdas round differently: true where the vectorized one runs. Their
// output is allocated contiguous beforehand, so its layout leads the iterator's (a transposed
// x takes the scalar lambda throughout).
Tensor vectorized_mask(const Tensor& x, const Tensor& t, const Tensor& g, ScalarType common) {
  Shape shape = broadcast_shapes(broadcast_shapes(x.sizes(), t.sizes()), g.sizes());
  Tensor output = Tensor::empty(shape, common);
  std::vector<bool> lanes =
      vectorized_elements(shape, {output, x, t, g}, common, 64 / int64_t(element_size(common)));
  Tensor mask = Tensor::empty(shape, ScalarType::Bool);
  std::copy(lanes.begin(), lanes.end(), mask.data_as<bool>());
  return mask;
}

// +v where d > 0, -v elsewhere: the kernels' side outside the quadratic zone (d = 0 is there
// only at beta 0, where upstream's comparisons give it the negative side).
Tensor signed_by(const Tensor& d, const Tensor& v) {
  return ops::where(ops::gt(d, Scalar(int64_t{0})), v, ops::neg(v));
}

// smooth_l1_loss_backward(g, x, t): with d = x - t, outside |d| >= beta the side's norm g;
// inside, the vectorized lambda's norm (d / beta) g, the scalar one's norm d g divided by the
// double beta. The scalar lambda compares d with the double beta, the vectorized with its
// rounding.
Tensor smooth_l1_grad(const Tensor& x, const Tensor& t, const Tensor& g, double norm_value, double beta) {
  Tensor d = ops::sub(x, t), norm = norm_like(norm_value, d);
  Tensor outside = signed_by(d, ops::mul(norm, g));
  Tensor vector_inside = ops::mul(ops::mul(norm, ops::div(d, Scalar(beta))), g);
  Tensor scalar_inside =
      ops::div(ops::mul(ops::mul(norm, d), g).to(ScalarType::Double), Scalar(beta)).to(d.dtype());
  Tensor vector_outside = ops::ge(ops::abs(d), Scalar(beta));
  Tensor scalar_outside = ops::ge(ops::abs(d).to(ScalarType::Double), Scalar(beta));
  return ops::where(vectorized_mask(x, t, g, d.dtype()), ops::where(vector_outside, outside, vector_inside),
                    ops::where(scalar_outside, outside, scalar_inside));
}

// huber_loss_backward(g, x, t): with d = x - t, inside delta norm d g; outside, the vectorized
// lambda's norm (+-delta) g, the scalar one's (+-norm g) times the double delta.
Tensor huber_grad(const Tensor& x, const Tensor& t, const Tensor& g, double norm_value, double delta) {
  Tensor d = ops::sub(x, t), norm = norm_like(norm_value, d);
  Tensor inside = ops::mul(ops::mul(norm, d), g);
  Tensor vector_outside = signed_by(d, ops::mul(ops::mul(norm, Scalar(delta)), g));
  Tensor scalar_outside =
      signed_by(d, ops::mul(ops::mul(norm, g).to(ScalarType::Double), Scalar(delta)).to(d.dtype()));
  Tensor vector_grad = ops::where(ops::ge(ops::abs(d), Scalar(delta)), vector_outside, inside);
  Tensor scalar_grad =
      ops::where(ops::ge(ops::abs(d).to(ScalarType::Double), Scalar(delta)), scalar_outside, inside);
  return ops::where(vectorized_mask(x, t, g, d.dtype()), vector_grad, scalar_grad);
}

// Upstream computes 1- and 2-d inputs with nll_loss, others with nll_loss2d.
std::string nll_loss_function(const Stack& args) {
  return args.at(0).get<Tensor>().dim() <= 2 ? "nll_loss_forward" : "nll_loss2d_forward";
}
}  // namespace

TN_DERIVATIVE("aten::nll_loss_nd", "NllLossBackward0",
              SAVES(0, 1, 2).without_derivative({1, 2}).refused_as(nll_loss_function), {
                auto weight = s.input_defined(2) ? std::optional<Tensor>(s.input(2)) : std::nullopt;
                return {nll_loss_backward(g[0], s.input(0), s.input(1), weight, s.args().integer(3),
                                          s.args().integer(4))};
              });
// Upstream's mse_loss_backward(g, x, t): norm (x - t) g, both lambdas alike. Each gradient
// is the kernel's own call (the target's with x and t swapped), so a zero keeps its sign.
TN_DERIVATIVE("aten::mse_loss", "MseLossBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &t = s.input(1);
  double norm = loss_norm(x, s.args().integer(2), 2.0);
  auto grad = [&](const Tensor& a, const Tensor& b) {
    Tensor d = ops::sub(a, b);
    return ops::mul(ops::mul(norm_like(norm, d), d), g[0]);
  };
  return {grad(x, t), grad(t, x)};
});

TN_DERIVATIVE("aten::l1_loss", "L1LossBackward0", SAVES(0, 1), {
  Tensor grad = reduced_grad(ops::sgn(difference(s)), g[0], s.args().integer(2));
  return {grad, ops::neg(grad)};
});
TN_DERIVATIVE("aten::smooth_l1_loss", "SmoothL1LossBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &t = s.input(1);
  double norm = loss_norm(x, s.args().integer(2), 1.0);
  double beta = s.args().real(3);
  return {smooth_l1_grad(x, t, g[0], norm, beta), smooth_l1_grad(t, x, g[0], norm, beta)};
});
TN_DERIVATIVE("aten::huber_loss", "HuberLossBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &t = s.input(1);
  double norm = loss_norm(x, s.args().integer(2), 1.0);
  double delta = s.args().real(3);
  return {huber_grad(x, t, g[0], norm, delta), huber_grad(t, x, g[0], norm, delta)};
});
// -t exp(-t x) / (1 + exp(-t x)) g, over the count for a mean, in upstream's steps.
TN_DERIVATIVE("aten::soft_margin_loss", "SoftMarginLossBackward0",
              SAVES(0, 1).without_derivative({1}).refused_as("soft_margin_loss"), {
                const Tensor &x = s.input(0), &t = s.input(1);
                double norm = s.args().integer(2) == kMean ? 1.0 / double(x.numel()) : 1.0;
                Tensor z = ops::exp(ops::mul(ops::neg(t), x));
                Tensor grad = ops::mul(ops::mul(t, z), Scalar(-norm));
                return {ops::mul(ops::div(grad, ops::add(z, Scalar(int64_t{1}))), g[0])};
              });
// x: (x - t) / max(x (1 - x), 1e-12); t: log(1 - x) - log(x), each log clamped at -100 as the
// forward's (upstream's EPSILON and clamp).
TN_DERIVATIVE("aten::binary_cross_entropy", "BinaryCrossEntropyBackward0",
              SAVES(0, 1, 2).without_derivative({2}).refused_as("binary_cross_entropy"), {
                const Tensor &x = s.input(0), &t = s.input(1);
                int64_t reduction = s.args().integer(3);
                Tensor spread = ops::clamp_min(ops::mul(x, ops::rsub(x, Scalar(int64_t{1}))), Scalar(1e-12));
                Tensor self_grad =
                    reduced_grad(weighted(s, 2, ops::div(ops::sub(x, t), spread)), g[0], reduction);
                if (!s.needs_grad(1)) return {self_grad};
                Tensor log_x = ops::clamp_min(ops::log(x), Scalar(-100.0));
                Tensor log_rest = ops::clamp_min(ops::log1p(ops::neg(x)), Scalar(-100.0));
                return {self_grad, reduced_grad(weighted(s, 2, ops::sub(log_rest, log_x)), g[0], reduction)};
              });
// loss = (1 - t) x + c softplus(-x), c = 1 + (pos_weight - 1) t. In upstream's order: x gets
// ((pw t + 1) - t) sigmoid(x) - pw t (sigmoid(x) - t without pos_weight), t gets
// log_sigmoid(-x) - pw log_sigmoid(x) (-x without), each times g, then the weight, then 1/N.
TN_DERIVATIVE("aten::binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0",
              SAVES(0, 1, 2, 3).without_derivative({2, 3}).refused_as("binary_cross_entropy_with_logits"), {
                const Tensor &x = s.input(0), &t = s.input(1);
                int64_t reduction = s.args().integer(4);
                bool has_pos_weight = s.input_defined(3);
                auto finish = [&](const Tensor& elementwise) {
                  Tensor grad = weighted(s, 2, ops::mul(elementwise, g[0]));
                  return reduction == kMean ? ops::div(grad, Scalar(grad.numel())) : grad;
                };
                Tensor self_elementwise;
                if (has_pos_weight) {
                  Tensor pt = ops::mul(s.input(3), t);
                  self_elementwise =
                      ops::sub(ops::mul(ops::sub(ops::add(pt, Scalar(int64_t{1})), t), ops::sigmoid(x)), pt);
                } else {
                  self_elementwise = ops::sub(ops::sigmoid(x), t);
                }
                Tensor self_grad = finish(self_elementwise);
                if (!s.needs_grad(1)) return {self_grad};
                Tensor target_elementwise =
                    has_pos_weight
                        ? ops::sub(ops::log_sigmoid(ops::neg(x)), ops::mul(ops::log_sigmoid(x), s.input(3)))
                        : ops::neg(x);
                return {self_grad, finish(target_elementwise)};
              });

}  // namespace tn::autograd
