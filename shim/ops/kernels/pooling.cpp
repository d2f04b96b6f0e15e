// Pooling: max_pool1d/2d (with indices), avg_pool1d/2d, adaptive_avg_pool1d/2d, adaptive_max_pool2d.
// The 1-D operators are the 2-D kernels over height 1, as upstream computes them.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Shape pool_stride(const Shape& stride, const Shape& kernel) { return stride.empty() ? kernel : stride; }

int64_t pool_out(int64_t size, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil) {
  if (k <= 0) throw Error("kernel_size must be greater than zero, but got " + std::to_string(k));
  if (stride <= 0) throw Error("stride must be greater than zero, but got " + std::to_string(stride));
  if (dilation <= 0) throw Error("dilation must be greater than zero, but got " + std::to_string(dilation));
  int64_t numerator = size + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = numerator / stride + 1;
  if (ceil && (out - 1) * stride >= size + pad) --out;
  return out;
}

// max_pool2d over (N, C, H, W) or (C, H, W): values and flat H*W indices.
std::pair<Tensor, Tensor> max_pool2d(const Tensor& input, Shape kernel, Shape stride, Shape padding,
                                     Shape dilation, bool ceil) {
  if (kernel.size() == 1) kernel.push_back(kernel[0]);
  stride = pool_stride(stride, kernel);
  if (stride.size() == 1) stride.push_back(stride[0]);
  if (padding.size() == 1) padding.push_back(padding[0]);
  if (dilation.size() == 1) dilation.push_back(dilation[0]);
  if (padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1])
    throw Error(
        "pad should be at most half of effective kernel size, but got pad=" + std::to_string(padding[0]) +
        ", kernel_size=" + std::to_string(kernel[0]) + " and dilation=" + std::to_string(dilation[0]));
  bool batched = input.dim() == 4;
  Tensor x = (batched ? input : ops::unsqueeze(input, int64_t{0})).contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  int64_t oh = pool_out(h, kernel[0], padding[0], stride[0], dilation[0], ceil),
          ow = pool_out(w, kernel[1], padding[1], stride[1], dilation[1], ceil);
  if (oh <= 0 || ow <= 0) throw Error("Output size is too small");
  Tensor values = Tensor::empty({n, c, oh, ow}, x.dtype());
  Tensor indices = Tensor::empty({n, c, oh, ow}, ScalarType::Long);
  // The meta device: the shapes and dtypes are the results.
  if (!values.is_meta())
    TN_DISPATCH_ALL_TYPES(x.dtype(), "max_pool2d", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      const scalar_t* in = x.template data_as<scalar_t>();
      scalar_t* out_values = values.template data_as<scalar_t>();
      int64_t* out_indices = indices.template data_as<int64_t>();
      const int64_t kh = kernel[0], kw = kernel[1], sh = stride[0], sw = stride[1], dh = dilation[0],
                    dw = dilation[1];
      for (int64_t p = 0; p < n * c; ++p) {
        const scalar_t* plane = in + p * h * w;
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            double best = -std::numeric_limits<double>::infinity();
            int64_t best_index = -1;
            for (int64_t i = 0, iy = y * sh - padding[0]; i < kh; ++i, iy += dh) {
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0, ix = xx * sw - padding[1]; j < kw; ++j, ix += dw) {
                if (ix < 0 || ix >= w) continue;
                double v = double(compute_t<scalar_t>(plane[iy * w + ix]));
                // The first maximum, or the first NaN, wins.
                if ((best_index < 0 || v > best || std::isnan(v)) && !(best_index >= 0 && std::isnan(best))) {
                  best = v;
                  best_index = iy * w + ix;
                }
              }
            }
            out_values[(p * oh + y) * ow + xx] = scalar_t(compute_t<scalar_t>(best));
            out_indices[(p * oh + y) * ow + xx] = best_index;
          }
      }
    });
  if (!batched) return {ops::squeeze(values, int64_t{0}), ops::squeeze(indices, int64_t{0})};
  return {values, indices};
}

Tensor avg_pool2d(const Tensor& input, Shape kernel, Shape stride, Shape padding, bool ceil,
                  bool count_include_pad, std::optional<int64_t> divisor) {
  if (divisor && *divisor == 0) throw Error("divisor must be not zero");
  if (kernel.size() == 1) kernel.push_back(kernel[0]);
  stride = pool_stride(stride, kernel);
  if (stride.size() == 1) stride.push_back(stride[0]);
  if (padding.size() == 1) padding.push_back(padding[0]);
  if (padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1])
    throw Error("pad should be at most half of kernel size, but got pad=" + std::to_string(padding[0]) +
                " and kernel_size=" + std::to_string(kernel[0]));
  bool batched = input.dim() == 4;
  Tensor x = (batched ? input : ops::unsqueeze(input, int64_t{0})).contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  int64_t oh = pool_out(h, kernel[0], padding[0], stride[0], 1, ceil),
          ow = pool_out(w, kernel[1], padding[1], stride[1], 1, ceil);
  if (oh <= 0 || ow <= 0) throw Error("Output size is too small");
  Tensor out = Tensor::empty({n, c, oh, ow}, x.dtype());
  if (!out.is_meta())
    TN_DISPATCH_ALL_TYPES(x.dtype(), "avg_pool2d", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      const scalar_t* in = x.template data_as<scalar_t>();
      for (int64_t p = 0; p < n * c; ++p)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            int64_t y0 = y * stride[0] - padding[0], x0 = xx * stride[1] - padding[1];
            int64_t y1 = std::min(y0 + kernel[0], h + padding[0]),
                    x1 = std::min(x0 + kernel[1], w + padding[1]);
            int64_t pool_size = (y1 - y0) * (x1 - x0);
            y0 = std::max<int64_t>(y0, 0);
            x0 = std::max<int64_t>(x0, 0);
            y1 = std::min(y1, h);
            x1 = std::min(x1, w);
            double total = 0;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix)
                total += double(compute_t<scalar_t>(in[(p * h + iy) * w + ix]));
            int64_t d = divisor ? *divisor : count_include_pad ? pool_size : (y1 - y0) * (x1 - x0);
            out.template data_as<scalar_t>()[(p * oh + y) * ow + xx] =
                scalar_t(compute_t<scalar_t>(total / double(d)));
          }
    });
  return batched ? out : ops::squeeze(out, int64_t{0});
}

// Adaptive pooling: output cell i covers [floor(i*in/out), ceil((i+1)*in/out)).
template <bool Max>
std::pair<Tensor, Tensor> adaptive_pool2d(const Tensor& input, const Shape& output_size) {
  bool batched = input.dim() == 4;
  Tensor x = (batched ? input : ops::unsqueeze(input, int64_t{0})).contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = output_size[0],
          ow = output_size[1];
  Tensor out = Tensor::empty({n, c, oh, ow}, x.dtype());
  Tensor indices = Tensor::empty({n, c, oh, ow}, ScalarType::Long);
  if (!out.is_meta())
    TN_DISPATCH_ALL_TYPES(x.dtype(), "adaptive_pool2d", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      const scalar_t* in = x.template data_as<scalar_t>();
      for (int64_t p = 0; p < n * c; ++p)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            int64_t y0 = (y * h) / oh, y1 = ((y + 1) * h + oh - 1) / oh, x0 = (xx * w) / ow,
                    x1 = ((xx + 1) * w + ow - 1) / ow;
            double acc = Max ? -std::numeric_limits<double>::infinity() : 0.0;
            int64_t best = y0 * w + x0;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) {
                double v = double(compute_t<scalar_t>(in[(p * h + iy) * w + ix]));
                if constexpr (Max) {
                  if (v > acc || std::isnan(v)) {
                    acc = v;
                    best = iy * w + ix;
                  }
                } else {
                  acc += v;
                }
              }
            if (!Max) acc /= double((y1 - y0) * (x1 - x0));
            out.template data_as<scalar_t>()[(p * oh + y) * ow + xx] = scalar_t(compute_t<scalar_t>(acc));
            indices.template data_as<int64_t>()[(p * oh + y) * ow + xx] = best;
          }
    });
  if (!batched) return {ops::squeeze(out, int64_t{0}), ops::squeeze(indices, int64_t{0})};
  return {out, indices};
}

// A 1-D pooling's input: (N, C, L) or (C, L), as upstream's checkDimRange and check1d refuse others.
Tensor as_height_one(const Tensor& input, const char* name, const std::vector<Shape>& one_element_lists) {
  if (input.dim() != 2 && input.dim() != 3)
    throw Error(std::string("Expected 2 to 3 dimensions, but got ") + std::to_string(input.dim()) +
                "-dimensional tensor for argument #1 'self' (while checking arguments for " + name + ")");
  for (const Shape& list : one_element_lists)
    if (list.size() != 1)
      throw Error(std::string(name) + "() argument must contain one int (got " + std::to_string(list.size()) +
                  ")");
  return ops::unsqueeze(input, int64_t{-2});
}

// Upstream's adaptive_avg_pool2d: a (1, 1) output is the mean over the last two dims (its
// cascade sum, so its bits: the global pooling ending every torchvision classifier), any other
// size the windows of the pooling kernel.
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size) {
  if (output_size == Shape{1, 1}) return ops::mean(x, std::vector<int64_t>{-1, -2}, true, std::nullopt);
  return adaptive_pool2d<false>(x, output_size).first;
}

}  // namespace

TN_KERNEL("aten::max_pool1d_with_indices", {
  Shape stride = a.int_list(2);
  Tensor x = as_height_one(a.tensor(0), "max_pool1d", {a.int_list(1), a.int_list(3), a.int_list(4)});
  auto [v, i] = max_pool2d(x, {1, a.int_list(1)[0]}, stride.empty() ? Shape{} : Shape{1, stride[0]},
                           {0, a.int_list(3)[0]}, {1, a.int_list(4)[0]}, a.boolean(5));
  return IValue::tuple({ops::squeeze(v, int64_t{-2}), ops::squeeze(i, int64_t{-2})});
});
TN_KERNEL("aten::avg_pool1d", {
  Shape kernel = a.int_list(1), stride = a.int_list(2).empty() ? kernel : a.int_list(2);
  Tensor x = as_height_one(a.tensor(0), "avg_pool1d", {kernel, stride, a.int_list(3)});
  return ops::squeeze(avg_pool2d(x, {1, kernel[0]}, {1, stride[0]}, {0, a.int_list(3)[0]}, a.boolean(4),
                                 a.boolean(5), std::nullopt),
                      int64_t{-2});
});
TN_KERNEL("aten::adaptive_avg_pool1d", {
  Tensor x = as_height_one(a.tensor(0), "adaptive_avg_pool1d", {a.int_list(1)});
  return ops::squeeze(adaptive_avg_pool2d(x, {1, a.int_list(1)[0]}), int64_t{-2});
});
TN_KERNEL("aten::max_pool2d", {
  return max_pool2d(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.int_list(4), a.boolean(5))
      .first;
});
TN_KERNEL("aten::max_pool2d_with_indices", {
  auto [v, i] =
      max_pool2d(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.int_list(4), a.boolean(5));
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::max_pool1d", {
  Tensor x = ops::unsqueeze(a.tensor(0), int64_t{-2});
  Shape stride = a.int_list(2);
  auto [v, i] = max_pool2d(x, {1, a.int_list(1)[0]}, stride.empty() ? Shape{} : Shape{1, stride[0]},
                           {0, a.int_list(3)[0]}, {1, a.int_list(4)[0]}, a.boolean(5));
  return ops::squeeze(v, int64_t{-2});
});
TN_KERNEL("aten::avg_pool2d", {
  return avg_pool2d(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.boolean(4), a.boolean(5),
                    a.optional_integer(6));
});
TN_KERNEL("aten::adaptive_avg_pool2d", { return adaptive_avg_pool2d(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::adaptive_max_pool2d", {
  auto [v, i] = adaptive_pool2d<true>(a.tensor(0), a.int_list(1));
  return IValue::tuple({v, i});
});

}  // namespace tn
