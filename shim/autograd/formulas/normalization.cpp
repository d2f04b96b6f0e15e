// Derivative of batch_norm (kernels/normalization.cpp). layer_norm, group_norm and
// instance_norm are differentiated through their decompositions (record.cpp, kDecomposed).
#include "common.h"  // per_channel, as the forward shapes its parameters
#include "formulas.h"

namespace tn::autograd {

// batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn):
// with x^ = (x - mean) invstd, training statistics give
//   dx = w invstd (g - mean(g) - x^ mean(g x^)), the means over all but the channel;
// running statistics (eval) are constants: dx = w invstd g. dw = sum(g x^), db = sum(g).
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
                Tensor normalized = ops::mul(ops::sub(x, mean), invstd);
                Tensor scale = s.input_defined(1) ? ops::mul(invstd, per_channel(s.input(1), nd)) : invstd;
                Stack out(3);
                if (s.needs_grad(0)) {
                  Tensor dx = g[0];
                  if (training) {
                    Tensor centred = ops::sub(dx, ops::mean(dx, dims, true, std::nullopt));
                    Tensor projection = ops::mean(ops::mul(dx, normalized), dims, true, std::nullopt);
                    dx = ops::sub(centred, ops::mul(normalized, projection));
                  }
                  out[0] = ops::mul(dx, scale);
                }
                if (s.needs_grad(1)) out[1] = ops::sum(ops::mul(g[0], normalized), dims, false, std::nullopt);
                if (s.needs_grad(2)) out[2] = ops::sum(g[0], dims, false, std::nullopt);
                return out;
              });

}  // namespace tn::autograd
