// Derivative of embedding (kernels/embedding.cpp): each looked-up row's gradient summed into
// its row of the weight; the padding row gets none.
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::embedding", "EmbeddingBackward0", SAVES(1).without_derivative({1}), {
  const Shape& weight = s.input_sizes(0);
  const Tensor& indices = s.input(1);
  int64_t padding_idx = s.args().integer(2);
  if (s.args().boolean(3))
    throw NotImplemented("torchnative does not differentiate embedding with scale_grad_by_freq=True yet");
  Tensor rows = ops::reshape(g[0], {-1, weight.back()});
  Tensor flat = ops::reshape(indices, {-1});
  if (padding_idx >= 0)
    rows = ops::masked_fill(rows, ops::unsqueeze(ops::eq(flat, Scalar(padding_idx)), 1), Scalar(int64_t{0}));
  return {ops::index_add(ops::zeros(weight, g[0].dtype()), 0, flat, rows)};
});

}  // namespace tn::autograd
