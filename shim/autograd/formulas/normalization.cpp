// Derivative of batch_norm (kernels/normalization.cpp). layer_norm, group_norm and
// instance_norm are differentiated through their decompositions (record.cpp, kDecomposed).
#include "common.h"  // per_channel, as the forward shapes its parameters
#include "formulas.h"

namespace tn::autograd {

// batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn),
// in upstream's kernel's terms: per channel, sum_dy = sum(g) and dotp = sum((x - mean) g) over
// all but the channel, N elements each; training statistics give
//   dx = (g - sum_dy / N - (x - mean) dotp invstd^2 / N) invstd w,
// running statistics (eval) are constants: dx = g invstd w. dw = dotp invstd, db = sum_dy.
TN_DERIVATIVE("aten::batch_norm", "NativeBatchNormBackward0",
              SAVES(0, 1, 3, 4).without_derivative({3, 4}).refused_as("native_batch_norm"), {
                auto a = s.args();
                const Tensor& x = s.input(0);
                bool training = a.boolean(5);
                double eps = a.real(7);
                int64_t nd = x.dim();
                std::vector<int64_t> dims{0};
                for (int64_t d = 2; d < nd; ++d) dims.push_back(d);
                Tensor mean, var;
                if (training) {
                  mean = ops::mean(x, dims, true, std::nullopt);
                  var = ops::var_correction(x, dims, int64_t{0}, true);
                } else {
                  mean = per_channel(s.input(3), nd);
                  var = per_channel(s.input(4), nd);
                }
                Tensor invstd = ops::rsqrt(ops::add(var, Scalar(eps)));
                Tensor centred = ops::sub(x, mean);
                Tensor sum_dy = ops::sum(g[0], dims, true, std::nullopt);
                Tensor dotp = ops::sum(ops::mul(centred, g[0]), dims, true, std::nullopt);
                double n = double(x.numel()) / double(x.size(1));
                Stack out(3);
                if (s.needs_grad(0)) {
                  Tensor dx = g[0];
                  if (training) {
                    Tensor k = ops::div(ops::mul(ops::mul(dotp, invstd), invstd), Scalar(n));
                    dx = ops::sub(ops::sub(g[0], ops::div(sum_dy, Scalar(n))), ops::mul(centred, k));
                  }
                  dx = ops::mul(dx, invstd);
                  out[0] = s.input_defined(1) ? ops::mul(dx, per_channel(s.input(1), nd)) : dx;
                }
                if (s.needs_grad(1)) out[1] = ops::reshape(ops::mul(dotp, invstd), {x.size(1)});
                if (s.needs_grad(2)) out[2] = ops::reshape(sum_dy, {x.size(1)});
                return out;
              });
}  // namespace tn::autograd
