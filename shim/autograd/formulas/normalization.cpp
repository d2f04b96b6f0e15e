// Derivatives of native_batch_norm and native_layer_norm (kernels/normalization.cpp). batch_norm,
// layer_norm, group_norm and instance_norm are differentiated through their decompositions
// (record.cpp, kDecomposed): batch_norm's and layer_norm's are those native calls.
#include "formulas.h"

namespace tn::autograd {

// native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
// -> (output, save_mean, save_invstd): upstream's NativeBatchNormBackward0, which calls
// native_batch_norm_backward with the statistics the forward normalized with: the batch's mean
// and invstd the forward returned in training, the running ones in evaluation. batch_norm
// reaches it through its decomposition (record.cpp).
TN_DERIVATIVE("aten::native_batch_norm", "NativeBatchNormBackward0",
              SAVES_RESULT(0, 1, 3, 4).without_derivative({3, 4}).refused_as("native_batch_norm"), {
                auto a = s.args();
                bool training = a.boolean(5);
                std::optional<Tensor> weight, running_mean, running_var, save_mean, save_invstd;
                if (s.input_defined(1)) weight = s.input(1);
                if (training) {
                  save_mean = s.result(1);
                  save_invstd = s.result(2);
                } else {
                  running_mean = s.input(3);
                  running_var = s.input(4);
                }
                std::vector<bool> mask{s.needs_grad(0), s.needs_grad(1), s.needs_grad(2)};
                auto grads =
                    ops::native_batch_norm_backward(g[0], s.input(0), weight, running_mean, running_var,
                                                    save_mean, save_invstd, training, a.real(7), mask);
                Stack out(3);
                if (mask[0]) out[0] = std::get<0>(grads);
                if (mask[1]) out[1] = std::get<1>(grads);
                if (mask[2]) out[2] = std::get<2>(grads);
                return out;
              });
// native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd): upstream's
// NativeLayerNormBackward0, native_layer_norm_backward with the forward's mean and rstd (only the
// output's gradient flows, as in upstream's formula).
TN_DERIVATIVE("aten::native_layer_norm", "NativeLayerNormBackward0", SAVES_RESULT(0, 2, 3), {
  std::optional<Tensor> weight, bias;
  if (s.input_defined(2)) weight = s.input(2);
  if (s.input_defined(3)) bias = s.input(3);
  std::vector<bool> mask{s.needs_grad(0), s.needs_grad(2), s.needs_grad(3)};
  auto [dx, dw, db] = ops::native_layer_norm_backward(g[0], s.input(0), s.args().int_list(1), s.result(1),
                                                      s.result(2), weight, bias, mask);
  Stack out(4);
  if (mask[0]) out[0] = dx;
  if (mask[1]) out[2] = dw;
  if (mask[2]) out[3] = db;
  return out;
});
}  // namespace tn::autograd
