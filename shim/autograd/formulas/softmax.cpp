// Derivatives of softmax and log_softmax (kernels/softmax.cpp), from their results, through
// upstream's backward kernels; and of those kernels (double backward), as upstream's formulas.
#include "formulas.h"

namespace tn::autograd {

namespace {
int64_t along(const Saved& s) { return s.args().integer(1); }
std::vector<int64_t> along_backward(const Saved& s) { return {s.args().integer(2)}; }
Tensor softmax_grad(const Saved& s, const Tensor& g) {
  return ops::_softmax_backward_data(g, s.result(), along(s), s.result().dtype());
}
Tensor log_softmax_grad(const Saved& s, const Tensor& g) {
  return ops::_log_softmax_backward_data(g, s.result(), along(s), s.result().dtype());
}
Tensor summed(const Tensor& t, const Saved& s) { return ops::sum(t, along_backward(s), true, std::nullopt); }
}  // namespace

TN_DERIVATIVE("aten::_softmax", "SoftmaxBackward0", SAVES_RESULT(), { return {softmax_grad(s, g[0])}; });
TN_DERIVATIVE("aten::softmax.int", "SoftmaxBackward0", SAVES_RESULT(), { return {softmax_grad(s, g[0])}; });
TN_DERIVATIVE("aten::_log_softmax", "LogSoftmaxBackward0", SAVES_RESULT(),
              { return {log_softmax_grad(s, g[0])}; });
TN_DERIVATIVE("aten::log_softmax.int", "LogSoftmaxBackward0", SAVES_RESULT(),
              { return {log_softmax_grad(s, g[0])}; });

// gi = y (gO - sum(gO y)). grad_output: the same kernel on g; output: g gO - sum(y gO) g - gO sum(y g).
TN_DERIVATIVE("aten::_softmax_backward_data", "SoftmaxBackwardDataBackward0", SAVES(0, 1), {
  const Tensor &grad_output = s.input(0), &output = s.input(1);
  Tensor for_grad_output =
      ops::_softmax_backward_data(g[0], output, s.args().integer(2), ScalarType(s.args().integer(3)));
  Tensor for_output = ops::sub(
      ops::sub(ops::mul(g[0], grad_output), ops::mul(summed(ops::mul(output, grad_output), s), g[0])),
      ops::mul(grad_output, summed(ops::mul(output, g[0]), s)));
  return {for_grad_output, for_output};
});
// gi = gO - exp(y) sum(gO). grad_output: g - sum(g exp(y)); output: -sum(gO) exp(y) g.
TN_DERIVATIVE("aten::_log_softmax_backward_data", "LogSoftmaxBackwardDataBackward0", SAVES(0, 1), {
  const Tensor &grad_output = s.input(0), &output = s.input(1);
  Tensor exp_output = ops::exp(output);
  Tensor for_grad_output = ops::sub(g[0], summed(ops::mul(g[0], exp_output), s));
  Tensor for_output = ops::mul(ops::mul(ops::neg(summed(grad_output, s)), exp_output), g[0]);
  return {for_grad_output, for_output};
});

}  // namespace tn::autograd
