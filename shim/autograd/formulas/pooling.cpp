// Derivatives of the pooling operators (kernels/pooling.cpp). Max pooling sends each output's
// gradient to the element the forward chose (its indices, recomputed where the operator
// returns none); average pooling spreads it over the window with the forward's divisor.
#include <algorithm>
#include <functional>

#include "formulas.h"

namespace tn::autograd {

namespace {

// The gradient of each (…, oh, ow) output added at its flat (h * W + w) index of the input plane.
Tensor to_chosen(const Tensor& grad, const Tensor& indices, const Shape& input_sizes) {
  Shape planes(input_sizes.begin(), input_sizes.end() - 2);
  planes.push_back(input_sizes[input_sizes.size() - 2] * input_sizes.back());
  Tensor flat = ops::zeros(planes, grad.dtype());
  Tensor summed = ops::scatter_add(flat, -1, ops::flatten(indices, -2, -1), ops::flatten(grad, -2, -1));
  return ops::reshape(summed, input_sizes);
}

Shape pair(const std::vector<int64_t>& v) { return v.size() == 1 ? Shape{v[0], v[0]} : Shape(v); }

// One window of the input per output cell, and the number it divides by: the gradient of
// output o reaches every input element of its window as g_o / divisor_o.
using Window = std::function<void(int64_t oy, int64_t ox, int64_t* y0, int64_t* y1, int64_t* x0, int64_t* x1,
                                  int64_t* divisor)>;

Tensor spread(const Tensor& grad, const Shape& input_sizes, const Window& window) {
  if (grad.is_meta()) return ops::empty(input_sizes, grad.dtype(), std::nullopt, std::string("meta"));
  Tensor g = ops::_to_copy(grad, ScalarType::Double).contiguous();
  int64_t h = input_sizes[input_sizes.size() - 2], w = input_sizes.back();
  int64_t oh = g.size(-2), ow = g.size(-1), cells = oh * ow, planes = cells > 0 ? g.numel() / cells : 0;
  Tensor out = ops::zeros(input_sizes, ScalarType::Double);
  const double* gv = g.data_as<double>();
  double* ov = out.data_as<double>();
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t y0, y1, x0, x1, divisor;
        window(oy, ox, &y0, &y1, &x0, &x1, &divisor);
        double share = gv[(p * oh + oy) * ow + ox] / double(divisor);
        for (int64_t y = y0; y < y1; ++y)
          for (int64_t x = x0; x < x1; ++x) ov[(p * h + y) * w + x] += share;
      }
  return ops::_to_copy(out, grad.dtype());
}

// Windows as the forward's: start o*stride - pad, clipped to the input; the divisor counts the
// padding when count_include_pad (the window clipped to input + padding), else only the input.
Tensor avg_pool2d_backward(const Tensor& grad, const Shape& sizes, const Shape& kernel, const Shape& stride,
                           const Shape& padding, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  int64_t h = sizes[sizes.size() - 2], w = sizes.back();
  return spread(
      grad, sizes,
      [&](int64_t oy, int64_t ox, int64_t* y0, int64_t* y1, int64_t* x0, int64_t* x1, int64_t* divisor) {
        *y0 = oy * stride[0] - padding[0];
        *x0 = ox * stride[1] - padding[1];
        *y1 = std::min(*y0 + kernel[0], h + padding[0]);
        *x1 = std::min(*x0 + kernel[1], w + padding[1]);
        int64_t pool_size = (*y1 - *y0) * (*x1 - *x0);
        *y0 = std::max<int64_t>(*y0, 0);
        *x0 = std::max<int64_t>(*x0, 0);
        *y1 = std::min(*y1, h);
        *x1 = std::min(*x1, w);
        *divisor = divisor_override    ? *divisor_override
                   : count_include_pad ? pool_size
                                       : (*y1 - *y0) * (*x1 - *x0);
      });
}

// Output cell i covers [floor(i in / out), ceil((i + 1) in / out)).
Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Shape& sizes) {
  int64_t h = sizes[sizes.size() - 2], w = sizes.back(), oh = grad.size(-2), ow = grad.size(-1);
  return spread(
      grad, sizes,
      [&](int64_t oy, int64_t ox, int64_t* y0, int64_t* y1, int64_t* x0, int64_t* x1, int64_t* divisor) {
        *y0 = oy * h / oh;
        *y1 = ((oy + 1) * h + oh - 1) / oh;
        *x0 = ox * w / ow;
        *x1 = ((ox + 1) * w + ow - 1) / ow;
        *divisor = (*y1 - *y0) * (*x1 - *x0);
      });
}

// The sizes of a 1-D operator's input seen as 2-D over height 1.
Shape with_height_one(Shape sizes) {
  sizes.insert(sizes.end() - 1, 1);
  return sizes;
}

}  // namespace

TN_DERIVATIVE("aten::max_pool2d_with_indices", "MaxPool2DWithIndicesBackward0", SAVES_RESULT(),
              { return {to_chosen(g[0], s.result(1), s.input_sizes(0))}; });
TN_DERIVATIVE("aten::max_pool2d", "MaxPool2DWithIndicesBackward0", SAVES(0), {
  auto a = s.args();
  auto chosen = ops::max_pool2d_with_indices(s.input(0), a.int_list(1), a.int_list(2), a.int_list(3),
                                             a.int_list(4), a.boolean(5));
  return {to_chosen(g[0], std::get<1>(chosen), s.input_sizes(0))};
});
// A 1-D max pool is a 2-D one over height 1, as the forward computes it. Upstream's node has
// the 2-D name (its graph adds a SqueezeBackward1 above it; one node here).
TN_DERIVATIVE("aten::max_pool1d", "MaxPool2DWithIndicesBackward0", SAVES(0), {
  auto a = s.args();
  Shape stride = a.int_list(2);
  Tensor x = ops::unsqueeze(s.input(0), -2);
  auto chosen =
      ops::max_pool2d_with_indices(x, {1, a.int_list(1)[0]}, stride.empty() ? Shape{} : Shape{1, stride[0]},
                                   {0, a.int_list(3)[0]}, {1, a.int_list(4)[0]}, a.boolean(5));
  return {ops::squeeze(to_chosen(ops::unsqueeze(g[0], -2), std::get<1>(chosen), x.sizes()), -2)};
});
TN_DERIVATIVE("aten::adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0", SAVES_RESULT(),
              { return {to_chosen(g[0], s.result(1), s.input_sizes(0))}; });
TN_DERIVATIVE("aten::avg_pool2d", "AvgPool2DBackward0", SAVES(), {
  auto a = s.args();
  Shape kernel = pair(a.int_list(1));
  return {avg_pool2d_backward(g[0], s.input_sizes(0), kernel,
                              a.int_list(2).empty() ? kernel : pair(a.int_list(2)), pair(a.int_list(3)),
                              a.boolean(5), a.optional_integer(6))};
});
// The 1-D operators are upstream's 2-D ones over height 1 (its nodes are the 2-D ones').
TN_DERIVATIVE("aten::avg_pool1d", "AvgPool2DBackward0", SAVES(), {
  auto a = s.args();
  Shape kernel{1, a.int_list(1)[0]}, stride = a.int_list(2).empty() ? kernel : Shape{1, a.int_list(2)[0]};
  Tensor grad = avg_pool2d_backward(ops::unsqueeze(g[0], -2), with_height_one(s.input_sizes(0)), kernel,
                                    stride, {0, a.int_list(3)[0]}, a.boolean(5), std::nullopt);
  return {ops::squeeze(grad, -2)};
});
TN_DERIVATIVE("aten::max_pool1d_with_indices", "MaxPool2DWithIndicesBackward0", SAVES_RESULT(), {
  Tensor grad =
      to_chosen(ops::unsqueeze(g[0], -2), ops::unsqueeze(s.result(1), -2), with_height_one(s.input_sizes(0)));
  return {ops::squeeze(grad, -2)};
});
TN_DERIVATIVE("aten::adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0", SAVES(),
              { return {adaptive_avg_pool2d_backward(g[0], s.input_sizes(0))}; });
TN_DERIVATIVE("aten::adaptive_avg_pool1d", "AdaptiveAvgPool2DBackward0", SAVES(), {
  Tensor grad = adaptive_avg_pool2d_backward(ops::unsqueeze(g[0], -2), with_height_one(s.input_sizes(0)));
  return {ops::squeeze(grad, -2)};
});

}  // namespace tn::autograd
