// Derivatives of convolution (kernels/convolution.cpp): ConvolutionBackward0 calls
// aten::convolution_backward as upstream's does (its backends' gradients: oneDNN, the slow GEMM
// kernels, Empty), 1-D as 2-D over height 1 as the forward computes it; for channels-last memory,
// which that kernel refuses, a formula of its own (the input's gradient the transposed
// convolution of the output's, the weight's the correlation of the input's patches with it).
#include "convolution.h"  // convolution_backward_implemented, same_padding: the kernel's domain

#include "formulas.h"

namespace tn::autograd {

namespace {

struct Conv {
  Shape stride, padding, dilation;
  int64_t groups = 1;
};

// The weight's gradient of a batched 2-D convolution: the correlation of `patches_of`'s patches
// (im2col) with `grad`, per group, summed over the batch. For a convolution these are x and g;
// for a transposed one, whose weight maps the other way, g and x.
Tensor conv2d_weight_grad(const Tensor& patches_of, const Tensor& grad, const Tensor& w, const Conv& c) {
  int64_t n = patches_of.size(0), rows = w.size(0);
  Tensor patches = ops::im2col(patches_of, {w.size(2), w.size(3)}, c.dilation, c.padding, c.stride);
  int64_t cells = patches.size(2);
  Tensor grouped_patches =
      ops::reshape(patches, {n, c.groups, patches.size(1) / c.groups, cells});  // n may be 0
  Tensor grouped_grad = ops::reshape(grad, {n, c.groups, rows / c.groups, cells});
  Tensor per_sample = ops::matmul(grouped_grad, ops::transpose(grouped_patches, -2, -1));
  return ops::reshape(ops::sum(per_sample, std::vector<int64_t>{0}, false, std::nullopt), w.sizes());
}

// The gradients aten::convolution_backward computes (upstream's backend's: oneDNN's, or its slow
// GEMM kernels' in their order), those asked for.
Stack kernel_grads(const Saved& s, const Tensor& x, const Tensor& w, const Tensor& g, const Conv& c,
                   bool transposed) {
  auto [dx, dw, db] = ops::convolution_backward(
      g, x, w, Shape{transposed ? w.size(1) * c.groups : w.size(0)}, c.stride, c.padding, c.dilation,
      transposed, Shape(c.stride.size(), 0), c.groups, {s.needs_grad(0), s.needs_grad(1), s.needs_grad(2)});
  Stack out(3);
  if (s.needs_grad(0)) out[0] = dx;
  if (s.needs_grad(1)) out[1] = dw;
  if (s.needs_grad(2)) out[2] = db;
  return out;
}

// Gradients for a batched 2-D convolution: x (N, C, H, W), w (OC, C/G, kh, kw),
// g (N, OC, oh, ow). Transposed: w (C, OC/G, kh, kw), and the input's gradient is the plain
// convolution of g. aten::convolution_backward's but for channels-last memory, which it refuses:
// there the input's gradient is the transposed convolution of g, the weight's the correlation of
// the input's patches (im2col) with g.
Stack conv2d_grads(const Saved& s, const Tensor& x, const Tensor& w, const Tensor& g, const Conv& c,
                   bool transposed) {
  if (convolution_backward_implemented(x, w)) return kernel_grads(s, x, w, g, c, transposed);
  Stack out(3);
  if (s.needs_grad(0) && transposed) {
    out[0] = ops::conv2d(g, w, std::nullopt, c.stride, c.padding, c.dilation, c.groups);
  } else if (s.needs_grad(0)) {
    // The rows and columns the forward's stride skipped at the end come back as output padding.
    Shape extra;
    for (size_t i = 0; i < 2; ++i) {
      int64_t produced = (g.size(int64_t(2 + i)) - 1) * c.stride[i] - 2 * c.padding[i] +
                         c.dilation[i] * (w.size(int64_t(2 + i)) - 1) + 1;
      extra.push_back(x.size(int64_t(2 + i)) - produced);
    }
    out[0] = ops::conv_transpose2d(g, w, std::nullopt, c.stride, c.padding, extra, c.groups, c.dilation);
  }
  if (s.needs_grad(1)) out[1] = transposed ? conv2d_weight_grad(g, x, w, c) : conv2d_weight_grad(x, g, w, c);
  if (s.needs_grad(2)) out[2] = ops::sum(g, std::vector<int64_t>{0, 2, 3}, false, std::nullopt);
  return out;
}

// An unbatched input (one dim fewer) is a batch of one, as in the forward. `x` is the input the
// convolution saw: the saved input, or it padded at the end for padding='same'.
Stack conv_grads(const Saved& s, Tensor x, const Tensor& grad, const Conv& c, bool one_dimensional,
                 bool transposed = false) {
  Shape x_sizes = x.sizes();
  Tensor w = s.input(1), g = grad;
  bool batched = x.dim() == (one_dimensional ? 3 : 4);
  auto add_dim = [&](int64_t dim) {
    x = ops::unsqueeze(x, dim);
    g = ops::unsqueeze(g, dim);
  };
  if (one_dimensional) {
    x = x.contiguous();  // as upstream's: a permuted 1-D input is not a channels-last 2-D one
    add_dim(-2);
    w = ops::unsqueeze(w, -2);
  }
  if (!batched) add_dim(0);
  Stack out = conv2d_grads(s, x, w, g, c, transposed);
  if (out[0].is<Tensor>()) out[0] = ops::reshape(out[0].get<Tensor>(), x_sizes);
  if (out[1].is<Tensor>()) out[1] = ops::reshape(out[1].get<Tensor>(), s.input_sizes(1));
  return out;
}

// A 3-D convolution's gradients: aten::convolution_backward's, as upstream's ConvolutionBackward0
// (oneDNN, slow_conv3d or slow_conv_dilated3d as its forward ran), an unbatched input a batch of one.
Stack conv3d_grads(const Saved& s, Tensor x, Tensor g, const Conv& c) {
  Shape x_sizes = x.sizes();
  if (x.dim() == 4) {
    x = ops::unsqueeze(x, 0);
    g = ops::unsqueeze(g, 0);
  }
  const Tensor& w = s.input(1);
  auto [dx, dw, db] = ops::convolution_backward(g, x, w, Shape{w.size(0)}, c.stride, c.padding, c.dilation,
                                                false, Shape{0, 0, 0}, c.groups,
                                                {s.needs_grad(0), s.needs_grad(1), s.needs_grad(2)});
  Stack out(3);
  if (s.needs_grad(0)) out[0] = ops::reshape(dx, x_sizes);
  if (s.needs_grad(1)) out[1] = dw;
  if (s.needs_grad(2)) out[2] = db;
  return out;
}

Conv conv_arguments(const Args& a, size_t first, const Shape& padding) {
  return Conv{a.int_list(first), padding, a.int_list(first + 2), a.integer(first + 3)};
}

// 1-D parameters as the 2-D ones over height 1.
Conv over_height_one(const Conv& c) {
  return Conv{{1, c.stride[0]}, {0, c.padding[0]}, {1, c.dilation[0]}, c.groups};
}

// conv{1,2,3}d.padding(input, weight, bias, stride, padding, dilation, groups): 'valid' is no
// padding; 'same' pads symmetrically what the forward's convolution saw, the input padded at
// the end where the total is odd (as upstream's convolution_same, whose ConstantPadNdBackward0
// keeps the input's part of the padded input's gradient).
Stack convolution_mode_grads(const Saved& s, const Tensor& grad, int64_t spatial) {
  auto a = s.args();
  Shape dilation = a.int_list(5);
  Tensor x = s.input(0);
  Conv c = conv_arguments(a, 3, Shape(size_t(spatial), 0));
  SamePadding same;
  bool is_same = *a.optional_string(4) == "same";
  if (is_same) {
    same = same_padding(s.input_sizes(1), dilation);
    c.padding = same.left;
    x = pad_for_same(x, same);
  }
  Stack out = spatial == 3 ? conv3d_grads(s, x, grad, c)
                           : conv_grads(s, x, grad, spatial == 1 ? over_height_one(c) : c, spatial == 1);
  if (is_same && !same.symmetric() && out[0].is<Tensor>()) {
    Tensor dx = out[0].get<Tensor>();
    const Shape& sizes = s.input_sizes(0);
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t dim = int64_t(sizes.size()) - spatial + i;
      dx = ops::narrow(dx, dim, int64_t{0}, sizes[size_t(dim)]);
    }
    out[0] = dx;
  }
  return out;
}

}  // namespace

TN_DERIVATIVE("aten::conv2d", "ConvolutionBackward0", SAVES(0, 1), {
  return conv_grads(s, s.input(0), g[0], conv_arguments(s.args(), 3, s.args().int_list(4)), false);
});
TN_DERIVATIVE("aten::conv1d", "ConvolutionBackward0", SAVES(0, 1), {
  return conv_grads(s, s.input(0), g[0], over_height_one(conv_arguments(s.args(), 3, s.args().int_list(4))),
                    true);
});
TN_DERIVATIVE("aten::conv3d", "ConvolutionBackward0", SAVES(0, 1), {
  return conv3d_grads(s, s.input(0), g[0], conv_arguments(s.args(), 3, s.args().int_list(4)));
});
TN_DERIVATIVE("aten::conv1d.padding", "ConvolutionBackward0", SAVES(0, 1),
              { return convolution_mode_grads(s, g[0], 1); });
TN_DERIVATIVE("aten::conv2d.padding", "ConvolutionBackward0", SAVES(0, 1),
              { return convolution_mode_grads(s, g[0], 2); });
TN_DERIVATIVE("aten::conv3d.padding", "ConvolutionBackward0", SAVES(0, 1),
              { return convolution_mode_grads(s, g[0], 3); });
// convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
TN_DERIVATIVE("aten::convolution", "ConvolutionBackward0", SAVES(0, 1), {
  auto a = s.args();
  Conv c{a.int_list(3), a.int_list(4), a.int_list(5), a.integer(8)};
  size_t spatial = s.input_sizes(1).size() - 2;
  if (spatial == 3) return conv3d_grads(s, s.input(0), g[0], c);
  bool one_dimensional = spatial == 1;
  return conv_grads(s, s.input(0), g[0], one_dimensional ? over_height_one(c) : c, one_dimensional,
                    a.boolean(6));
});
// conv_transpose{1,2}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
TN_DERIVATIVE("aten::conv_transpose1d", "ConvolutionBackward0", SAVES(0, 1), {
  auto a = s.args();
  Conv c{a.int_list(3), a.int_list(4), a.int_list(7), a.integer(6)};
  return conv_grads(s, s.input(0), g[0], over_height_one(c), true, true);
});
TN_DERIVATIVE("aten::conv_transpose2d.input", "ConvolutionBackward0", SAVES(0, 1), {
  auto a = s.args();
  return conv_grads(s, s.input(0), g[0], Conv{a.int_list(3), a.int_list(4), a.int_list(7), a.integer(6)},
                    false, true);
});

// im2col(input, kernel_size, dilation, padding, stride) and col2im(input, output_size, kernel_size,
// dilation, padding, stride) are each other's adjoint: a block copy back is a sum.
TN_DERIVATIVE("aten::im2col", "Im2ColBackward0", SAVES(), {
  auto a = s.args();
  const Shape& x = s.input_sizes(0);
  Shape spatial{x[x.size() - 2], x[x.size() - 1]};
  return {ops::col2im(g[0], spatial, a.int_list(1), a.int_list(2), a.int_list(3), a.int_list(4))};
});
TN_DERIVATIVE("aten::col2im", "Col2ImBackward0", SAVES(), {
  auto a = s.args();
  return {ops::im2col(g[0], a.int_list(2), a.int_list(3), a.int_list(4), a.int_list(5))};
});

}  // namespace tn::autograd
