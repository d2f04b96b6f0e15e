// Derivative of embedding (kernels/embedding.cpp): each looked-up row's gradient summed into
// its row of the weight; the padding row gets none.
#include "formulas.h"

namespace tn::autograd {

// Upstream 1.13's node saves the weight itself (for its row count): writing into the weight
// afterwards (a later call's max_norm renormalisation) fails the backward as upstream's.
TN_DERIVATIVE("aten::embedding", "EmbeddingBackward0", SAVES(0, 1).without_derivative({1}), {
  Shape weight = s.input(0).sizes();  // unpacked, so version-checked, as upstream unpacks it
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

// Upstream's not_implemented("embedding_renorm"): F.embedding calls it under no_grad.
TN_NO_DERIVATIVE_UPSTREAM("aten::embedding_renorm_", "embedding_renorm");

}  // namespace tn::autograd
