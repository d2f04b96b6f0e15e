// Derivative of batch_norm (kernels/normalization.cpp). layer_norm, group_norm and
// instance_norm are differentiated through their decompositions (record.cpp, kDecomposed).
#include "formulas.h"

namespace tn::autograd {

// batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn):
// upstream's NativeBatchNormBackward0, which calls native_batch_norm_backward with the
// statistics the forward normalized with: the batch's mean and invstd in training (recomputed
// here by native_batch_norm, bit for bit the forward's, as the forward returns only its output;
// no running statistics, so nothing is updated twice), the running ones in evaluation.
TN_DERIVATIVE("aten::batch_norm", "NativeBatchNormBackward0",
              SAVES(0, 1, 3, 4).without_derivative({3, 4}).refused_as("native_batch_norm"), {
                auto a = s.args();
                const Tensor& x = s.input(0);
                bool training = a.boolean(5);
                double eps = a.real(7);
                std::optional<Tensor> weight, running_mean, running_var, save_mean, save_invstd;
                if (s.input_defined(1)) weight = s.input(1);
                if (training) {
                  auto stats = ops::native_batch_norm(x, std::nullopt, std::nullopt, std::nullopt,
                                                      std::nullopt, true, 0.0, eps);
                  save_mean = std::get<1>(stats);
                  save_invstd = std::get<2>(stats);
                } else {
                  running_mean = s.input(3);
                  running_var = s.input(4);
                }
                std::vector<bool> mask{s.needs_grad(0), s.needs_grad(1), s.needs_grad(2)};
                auto grads = ops::native_batch_norm_backward(g[0], x, weight, running_mean, running_var,
                                                             save_mean, save_invstd, training, eps, mask);
                Stack out(3);
                if (mask[0]) out[0] = std::get<0>(grads);
                if (mask[1]) out[1] = std::get<1>(grads);
                if (mask[2]) out[2] = std::get<2>(grads);
                return out;
              });
}  // namespace tn::autograd
