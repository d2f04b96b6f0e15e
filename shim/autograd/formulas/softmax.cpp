// Derivatives of softmax and log_softmax (kernels/softmax.cpp), from their results.
#include "formulas.h"

namespace tn::autograd {

namespace {
std::vector<int64_t> along(const Saved& s) { return {s.args().integer(1)}; }
// y (g - sum(g y))
Tensor softmax_grad(const Saved& s, const Tensor& g) {
  const Tensor& y = s.result();
  return ops::mul(y, ops::sub(g, ops::sum(ops::mul(g, y), along(s), true, std::nullopt)));
}
// g - exp(y) sum(g)
Tensor log_softmax_grad(const Saved& s, const Tensor& g) {
  return ops::sub(g, ops::mul(ops::exp(s.result()), ops::sum(g, along(s), true, std::nullopt)));
}
}  // namespace

TN_DERIVATIVE("aten::_softmax", "SoftmaxBackward0", SAVES_RESULT(), { return {softmax_grad(s, g[0])}; });
TN_DERIVATIVE("aten::softmax.int", "SoftmaxBackward0", SAVES_RESULT(), { return {softmax_grad(s, g[0])}; });
TN_DERIVATIVE("aten::_log_softmax", "LogSoftmaxBackward0", SAVES_RESULT(),
              { return {log_softmax_grad(s, g[0])}; });
TN_DERIVATIVE("aten::log_softmax.int", "LogSoftmaxBackward0", SAVES_RESULT(),
              { return {log_softmax_grad(s, g[0])}; });

}  // namespace tn::autograd
