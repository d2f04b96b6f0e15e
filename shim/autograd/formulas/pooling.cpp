// Derivatives of the pooling operators (kernels/pooling.cpp). Max pooling sends each output's
// gradient to the element the forward chose (its indices, recomputed where the operator
// returns none); average pooling spreads it over the window with the forward's divisor.
#include "pooling.h"  // the windows the forward pooled over

#include "formulas.h"

namespace tn::autograd {

namespace {

// A 2-D operator's int list (one int or two) as depth, height and width.
Dims3 dims2d(const std::vector<int64_t>& v, int64_t depth) {
  return v.size() == 1 ? Dims3{depth, v[0], v[0]} : Dims3{depth, v[0], v[1]};
}
// A 3-D operator's (one int or three).
Dims3 dims3d(const std::vector<int64_t>& v) {
  return v.size() == 1 ? Dims3{v[0], v[0], v[0]} : Dims3{v[0], v[1], v[2]};
}

// avg_pool2d/3d's windows from the call's arguments (kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override from 1 on); an omitted stride is the kernel.
AvgPoolWindows avg_windows(const Args& a, int spatial) {
  auto dims = [&](const std::vector<int64_t>& v, int64_t depth) {
    return spatial == 3 ? dims3d(v) : dims2d(v, depth);
  };
  Dims3 kernel = dims(a.int_list(1), 1);
  return {kernel, a.int_list(2).empty() ? kernel : dims(a.int_list(2), 1), dims(a.int_list(3), 0),
          a.boolean(5), a.optional_integer(6)};
}

// A max pooling's gradient of its gradient (and max unpooling's gradient): `grad`, over its
// last `spatial` dims, at each of `indices`.
Tensor gather_chosen(const Tensor& grad, const Tensor& indices, int spatial) {
  return ops::reshape(ops::gather(ops::flatten(grad, -spatial, -1), -1, ops::flatten(indices, -spatial, -1)),
                      indices.sizes());
}

// The sizes of a 1-D operator's input seen as 2-D over height 1.
Shape with_height_one(Shape sizes) {
  sizes.insert(sizes.end() - 1, 1);
  return sizes;
}

}  // namespace

TN_DERIVATIVE("aten::max_pool2d_with_indices", "MaxPool2DWithIndicesBackward0", SAVES_RESULT(),
              { return {max_pool_backward(g[0], s.result(1), s.input_sizes(0), 2)}; });
// A 1-D max pool is a 2-D one over height 1, as the forward computes it. Upstream's node has
// the 2-D name (its graph adds a SqueezeBackward1 above it; one node here).
TN_DERIVATIVE("aten::max_pool1d", "MaxPool2DWithIndicesBackward0", SAVES(0), {
  auto a = s.args();
  Shape stride = a.int_list(2);
  Tensor x = ops::unsqueeze(s.input(0), -2);
  auto chosen =
      ops::max_pool2d_with_indices(x, {1, a.int_list(1)[0]}, stride.empty() ? Shape{} : Shape{1, stride[0]},
                                   {0, a.int_list(3)[0]}, {1, a.int_list(4)[0]}, a.boolean(5));
  return {ops::squeeze(max_pool_backward(ops::unsqueeze(g[0], -2), std::get<1>(chosen), x.sizes(), 2), -2)};
});
TN_DERIVATIVE("aten::adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0", SAVES_RESULT(),
              { return {max_pool_backward(g[0], s.result(1), s.input_sizes(0), 2)}; });
TN_DERIVATIVE("aten::avg_pool2d", "AvgPool2DBackward0", SAVES(),
              { return {avg_pool_backward(g[0], s.input_sizes(0), 2, avg_windows(s.args(), 2))}; });
// The 1-D operators are upstream's 2-D ones over height 1 (its nodes are the 2-D ones').
TN_DERIVATIVE("aten::avg_pool1d", "AvgPool2DBackward0", SAVES(), {
  auto a = s.args();
  Dims3 kernel{1, 1, a.int_list(1)[0]};
  AvgPoolWindows windows{kernel,
                         a.int_list(2).empty() ? kernel : Dims3{1, 1, a.int_list(2)[0]},
                         {0, 0, a.int_list(3)[0]},
                         a.boolean(5),
                         std::nullopt};
  return {ops::squeeze(
      avg_pool_backward(ops::unsqueeze(g[0], -2), with_height_one(s.input_sizes(0)), 2, windows), -2)};
});
TN_DERIVATIVE("aten::max_pool1d_with_indices", "MaxPool2DWithIndicesBackward0", SAVES_RESULT(), {
  Tensor grad = max_pool_backward(ops::unsqueeze(g[0], -2), ops::unsqueeze(s.result(1), -2),
                                  with_height_one(s.input_sizes(0)), 2);
  return {ops::squeeze(grad, -2)};
});
TN_DERIVATIVE("aten::_adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0", SAVES(),
              { return {adaptive_avg_pool_backward(g[0], s.input_sizes(0), 2)}; });
TN_DERIVATIVE("aten::adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0", SAVES(),
              { return {adaptive_avg_pool_backward(g[0], s.input_sizes(0), 2)}; });
TN_DERIVATIVE("aten::adaptive_avg_pool1d", "AdaptiveAvgPool2DBackward0", SAVES(), {
  Tensor grad = adaptive_avg_pool_backward(ops::unsqueeze(g[0], -2), with_height_one(s.input_sizes(0)), 2);
  return {ops::squeeze(grad, -2)};
});

// The 3-D operators (max_pool3d and adaptive_avg_pool3d are upstream's composites of these).
TN_DERIVATIVE("aten::max_pool3d_with_indices", "MaxPool3DWithIndicesBackward0", SAVES_RESULT(),
              { return {max_pool_backward(g[0], s.result(1), s.input_sizes(0), 3)}; });
TN_DERIVATIVE("aten::adaptive_max_pool3d", "AdaptiveMaxPool3DBackward0", SAVES_RESULT(),
              { return {max_pool_backward(g[0], s.result(1), s.input_sizes(0), 3)}; });
TN_DERIVATIVE("aten::avg_pool3d", "AvgPool3DBackward0", SAVES(),
              { return {avg_pool_backward(g[0], s.input_sizes(0), 3, avg_windows(s.args(), 3))}; });
TN_DERIVATIVE("aten::_adaptive_avg_pool3d", "AdaptiveAvgPool3DBackward0", SAVES(),
              { return {adaptive_avg_pool_backward(g[0], s.input_sizes(0), 3)}; });

// The 3-D backward operators' own derivatives (double backward): linear in grad_output, their
// self only giving sizes.
TN_DERIVATIVE("aten::max_pool3d_with_indices_backward", "MaxPool3DWithIndicesBackwardBackward0", SAVES(7), {
  return {gather_chosen(g[0], s.input(7), 3), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::adaptive_max_pool3d_backward", "AdaptiveMaxPool3DBackwardBackward0", SAVES(2), {
  return {gather_chosen(g[0], s.input(2), 3), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::avg_pool3d_backward", "AvgPool3DBackwardBackward0", SAVES(), {
  auto a = s.args();
  return {ops::avg_pool3d(g[0], a.int_list(2), a.int_list(3), a.int_list(4), a.boolean(5), a.boolean(6),
                          a.optional_integer(7)),
          ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::_adaptive_avg_pool3d_backward", "AdaptiveAvgPool3DBackwardBackward0", SAVES(), {
  const Shape& out = s.input_sizes(0);
  return {ops::_adaptive_avg_pool3d(g[0], Shape(out.end() - 3, out.end())),
          ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});

// The 2-D backward operators' own derivatives, as the 3-D ones'.
TN_DERIVATIVE("aten::max_pool2d_with_indices_backward", "MaxPool2DWithIndicesBackwardBackward0", SAVES(7), {
  return {gather_chosen(g[0], s.input(7), 2), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::adaptive_max_pool2d_backward", "AdaptiveMaxPool2DBackwardBackward0", SAVES(2), {
  return {gather_chosen(g[0], s.input(2), 2), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::avg_pool2d_backward", "AvgPool2DBackwardBackward0", SAVES(), {
  auto a = s.args();
  return {ops::avg_pool2d(g[0], a.int_list(2), a.int_list(3), a.int_list(4), a.boolean(5), a.boolean(6),
                          a.optional_integer(7)),
          ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::_adaptive_avg_pool2d_backward", "AdaptiveAvgPool2DBackwardBackward0", SAVES(), {
  const Shape& out = s.input_sizes(0);
  return {ops::_adaptive_avg_pool2d(g[0], Shape(out.end() - 2, out.end())),
          ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});

// Fractional max pooling sends each output's gradient to the element its forward chose (the
// indices its forward returned); the random samples placing the windows have none (upstream
// refuses them requiring grad). Its backward operators' own derivatives are the 2-D and 3-D
// max poolings' (grad_output's at the indices, self only giving sizes).
TN_DERIVATIVE("aten::fractional_max_pool2d", "FractionalMaxPool2DBackward0",
              SAVES_RESULT(0).without_derivative({3}).refused_as("fractional_max_pool2d"), {
                auto a = s.args();
                return {ops::fractional_max_pool2d_backward(g[0], s.input(0), a.int_list(1), a.int_list(2),
                                                            s.result(1))};
              });
TN_DERIVATIVE("aten::fractional_max_pool3d", "FractionalMaxPool3DBackward0",
              SAVES_RESULT(0).without_derivative({3}).refused_as("fractional_max_pool3d"), {
                auto a = s.args();
                return {ops::fractional_max_pool3d_backward(g[0], s.input(0), a.int_list(1), a.int_list(2),
                                                            s.result(1))};
              });
TN_DERIVATIVE("aten::fractional_max_pool2d_backward", "FractionalMaxPool2DBackwardBackward0", SAVES(4), {
  return {gather_chosen(g[0], s.input(4), 2), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::fractional_max_pool3d_backward", "FractionalMaxPool3DBackwardBackward0", SAVES(4), {
  return {gather_chosen(g[0], s.input(4), 3), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});

// Max unpooling sends each input element the gradient at the index it was written to.
TN_DERIVATIVE("aten::max_unpool2d", "MaxUnpool2DBackward0", SAVES(1),
              { return {gather_chosen(g[0], s.input(1), 2)}; });
TN_DERIVATIVE("aten::max_unpool3d", "MaxUnpool3DBackward0", SAVES(1),
              { return {gather_chosen(g[0], s.input(1), 3)}; });

}  // namespace tn::autograd
