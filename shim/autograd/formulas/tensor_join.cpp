// Derivatives of cat and stack (kernels/tensor_join.cpp): each input gets its part.
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::cat", "CatBackward0", SAVES(), {
  const std::vector<GradientMeta>& parts = s.input_list(0);
  std::vector<Tensor> grads;
  int64_t dim = 0, offset = 0;
  for (const GradientMeta& p : parts)
    if (p.sizes != Shape{0}) dim = wrap_dim(s.args().integer(1), int64_t(p.sizes.size()));
  for (const GradientMeta& p : parts) {
    if (p.sizes == Shape{0}) {  // a legacy empty input takes no part of the result
      grads.push_back(ops::zeros({0}, g[0].dtype()));
      continue;
    }
    int64_t length = p.sizes[size_t(dim)];
    grads.push_back(ops::narrow(g[0], dim, offset, length));
    offset += length;
  }
  return {grads};
});
TN_DERIVATIVE("aten::stack", "StackBackward0", SAVES(), {
  const std::vector<GradientMeta>& parts = s.input_list(0);
  std::vector<Tensor> grads;
  int64_t dim = wrap_dim(s.args().integer(1), g[0].dim());
  for (size_t i = 0; i < parts.size(); ++i) grads.push_back(ops::select(g[0], dim, int64_t(i)));
  return {grads};
});

}  // namespace tn::autograd
