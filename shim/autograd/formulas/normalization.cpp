// Derivative of batch_norm (kernels/normalization.cpp). layer_norm, group_norm and
// instance_norm are differentiated through their decompositions (record.cpp, kDecomposed).
#include "formulas.h"

namespace tn::autograd {

// batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn):
// upstream's NativeBatchNormBackward0, which calls native_batch_norm_backward with the
// statistics the forward normalized with: the batch's mean and invstd in training (recomputed
// here bit for bit, as the forward returns only its output: batch_norm_update_stats without
// running statistics, so nothing is updated twice), the running ones in evaluation.
TN_DERIVATIVE("aten::batch_norm", "NativeBatchNormBackward0",
              SAVES(0, 1, 3, 4).without_derivative({3, 4}).refused_as("native_batch_norm"), {
                auto a = s.args();
                const Tensor& x = s.input(0);
                bool training = a.boolean(5);
                double eps = a.real(7);
                std::optional<Tensor> weight, running_mean, running_var, save_mean, save_invstd;
                if (s.input_defined(1)) weight = s.input(1);
                if (training) {
                  // bfloat16's in float, as its forward computes them before storing.
                  Tensor source = x.dtype() == ScalarType::BFloat16 ? x.to(ScalarType::Float) : x;
                  auto [mean, var] = ops::batch_norm_update_stats(source, std::nullopt, std::nullopt, 0.0);
                  // Upstream's InvStd of the biased variance, in double: 0 where var and eps are.
                  Tensor invstd = ops::rsqrt(ops::add(var.to(ScalarType::Double), Scalar(eps)));
                  if (eps == 0) invstd = ops::masked_fill(invstd, ops::eq(var, Scalar(0)), Scalar(0));
                  // Stored as native_batch_norm stores them: in the parameters' dtype.
                  ScalarType saved = s.input_defined(1)   ? s.input_dtype(1)
                                     : s.input_defined(3) ? s.input_dtype(3)
                                                          : x.dtype();
                  save_mean = mean.to(saved);
                  save_invstd = invstd.to(saved);
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
