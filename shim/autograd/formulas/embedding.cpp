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

// _embedding_bag's weight gets each bag's gradient back at its rows, the per-sample weights
// each their row's dot product with their bag's gradient (upstream's two backward operators).
TN_DERIVATIVE("aten::_embedding_bag", "EmbeddingBagBackward0",
              SAVES_RESULT(0, 1, 2, 6).without_derivative({1, 2}), {
                auto a = s.args();
                const Tensor &weight = s.input(0), &indices = s.input(1), &offsets = s.input(2);
                auto psw = s.input_defined(6) ? std::optional<Tensor>(s.input(6)) : std::nullopt;
                int64_t mode = a.integer(4), padding_idx = a.integer(8);
                Stack out(7);
                if (s.needs_grad(0))
                  out[0] = ops::_embedding_bag_backward(g[0], indices, offsets, s.result(1), s.result(2),
                                                        s.result(3), weight.size(0), a.boolean(3), mode,
                                                        a.boolean(5), psw, padding_idx);
                if (psw && s.needs_grad(6))
                  out[6] = ops::_embedding_bag_per_sample_weights_backward(g[0], weight, indices, offsets,
                                                                           s.result(1), mode, padding_idx);
                return out;
              });

}  // namespace tn::autograd
