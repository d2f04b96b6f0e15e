// Derivatives of the losses (kernels/loss.cpp). cross_entropy_loss is differentiated
// through its decomposition (log_softmax, nll_loss), as upstream's composite is.
#include "loss.h"  // nll_loss_backward, which sums the total weight as the kernel does

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
// 2 (x - t) g, over the count for a mean.
TN_DERIVATIVE("aten::mse_loss", "MseLossBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &t = s.input(1);
  int64_t reduction = s.args().integer(2);
  Tensor d = ops::mul(ops::sub(x, t), Scalar(int64_t{2}));
  Tensor grad = ops::mul(d, g[0]);
  if (reduction == kMean) grad = ops::div(grad, Scalar(ops::expand(x, t.sizes(), false).numel()));
  return {grad, ops::neg(grad)};
});

TN_DERIVATIVE("aten::l1_loss", "L1LossBackward0", SAVES(0, 1), {
  Tensor grad = reduced_grad(ops::sgn(difference(s)), g[0], s.args().integer(2));
  return {grad, ops::neg(grad)};
});
// |d| < beta: d / beta, else sign(d) (beta = 0 is l1).
TN_DERIVATIVE("aten::smooth_l1_loss", "SmoothL1LossBackward0", SAVES(0, 1), {
  Tensor d = difference(s);
  double beta = s.args().real(3);
  Tensor inside = ops::lt(ops::abs(d), Scalar(beta));
  Tensor elementwise = beta == 0 ? ops::sgn(d) : ops::where(inside, ops::div(d, Scalar(beta)), ops::sgn(d));
  Tensor grad = reduced_grad(elementwise, g[0], s.args().integer(2));
  return {grad, ops::neg(grad)};
});
// |d| < delta: d, else delta sign(d).
TN_DERIVATIVE("aten::huber_loss", "HuberLossBackward0", SAVES(0, 1), {
  // Upstream scales by 1/N (not divides by N): norm x g, or +-norm g delta outside delta.
  Tensor d = difference(s);
  double delta = s.args().real(3);
  double norm = s.args().integer(2) == kMean ? 1.0 / double(d.numel()) : 1.0;
  Tensor inside = ops::mul(ops::mul(d, Scalar(norm)), g[0]);
  Tensor outside = ops::mul(ops::mul(g[0], Scalar(norm)), ops::mul(ops::sgn(d), Scalar(delta)));
  Tensor grad = ops::where(ops::lt(ops::abs(d), Scalar(delta)), inside, outside);
  return {grad, ops::neg(grad)};
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
