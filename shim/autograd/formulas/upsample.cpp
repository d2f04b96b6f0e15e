// Derivatives of upsampling (kernels/upsample.cpp): the backward kernels spread each output's
// gradient back over the input elements it was read from.
#include "formulas.h"

namespace tn::autograd {

namespace {
std::optional<std::vector<double>> scale_factors(const Args& a, size_t position) {
  if (a[position].is_none()) return std::nullopt;
  return a[position].get<std::vector<double>>();
}
std::optional<std::vector<int64_t>> grad_size(const Tensor& g) {
  return std::vector<int64_t>{g.size(2), g.size(3)};
}
}  // namespace

// upsample_nearest2d.vec(input, output_size, scale_factors)
TN_DERIVATIVE("aten::upsample_nearest2d.vec", "UpsampleNearest2DBackward1", SAVES(), {
  return {
      ops::upsample_nearest2d_backward(g[0], grad_size(g[0]), s.input_sizes(0), scale_factors(s.args(), 2))};
});
// upsample_bilinear2d.vec(input, output_size, align_corners, scale_factors)
TN_DERIVATIVE("aten::upsample_bilinear2d.vec", "UpsampleBilinear2DBackward1", SAVES(), {
  auto a = s.args();
  return {ops::upsample_bilinear2d_backward(g[0], grad_size(g[0]), s.input_sizes(0), a.boolean(2),
                                            scale_factors(a, 3))};
});

// upsample_bicubic2d.vec(input, output_size, align_corners, scale_factors)
TN_DERIVATIVE("aten::upsample_bicubic2d.vec", "UpsampleBicubic2DBackward1", SAVES(), {
  auto a = s.args();
  return {ops::upsample_bicubic2d_backward(g[0], grad_size(g[0]), s.input_sizes(0), a.boolean(2),
                                           scale_factors(a, 3))};
});

}  // namespace tn::autograd
