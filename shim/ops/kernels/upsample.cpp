// Upsampling: upsample_nearest2d, upsample_bilinear2d, upsample_bicubic2d and their backward kernels.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Shape output_size_of(const Tensor& input, const std::optional<std::vector<int64_t>>& size,
                     const std::optional<std::vector<double>>& scales) {
  if (size) return *size;
  if (!scales) throw Error("Must specify exactly one of output_size and scale_factors");
  Shape out;
  for (size_t i = 0; i < scales->size(); ++i)
    out.push_back(int64_t(std::floor(double(input.size(2 + int64_t(i))) * (*scales)[i])));
  return out;
}

// Upstream's nearest_idx: exact for the same size and for doubling, else floor(dst * scale) in
// float, scale = 1 / scale_factor when one was given, in / out otherwise.
int64_t nearest_source(int64_t dst, int64_t in, int64_t out, const std::optional<double>& scale_factor) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  float scale = scale_factor && *scale_factor > 0 ? float(1.0 / *scale_factor) : float(in) / float(out);
  return std::min(int64_t(std::floor(float(dst) * scale)), in - 1);
}

std::optional<double> axis_scale(const std::optional<std::vector<double>>& scales, size_t axis) {
  return scales ? std::optional<double>((*scales)[axis]) : std::nullopt;
}

Tensor upsample_nearest2d(const Tensor& input, const Shape& size,
                          const std::optional<std::vector<double>>& scales) {
  int64_t h = input.size(2), w = input.size(3), oh = size[0], ow = size[1];
  // The meta device: the shape and dtype are the result (the source maps would hold values).
  if (input.is_meta()) return Tensor::empty({input.size(0), input.size(1), oh, ow}, input.dtype());
  Tensor iy = Tensor::empty({oh}, ScalarType::Long), ix = Tensor::empty({ow}, ScalarType::Long);
  for (int64_t i = 0; i < oh; ++i) iy.data_as<int64_t>()[i] = nearest_source(i, h, oh, axis_scale(scales, 0));
  for (int64_t j = 0; j < ow; ++j) ix.data_as<int64_t>()[j] = nearest_source(j, w, ow, axis_scale(scales, 1));
  return ops::index_select(ops::index_select(input, int64_t{2}, iy), int64_t{3}, ix);
}

// The gradient planes (N C, oh, ow) of an upsampling of (N, C, H, W) and the zeroed planes of
// its input's gradient; `accumulate(in, out)` adds one plane's gradient in upstream's loop
// order, in the gradient's dtype (float32 sums in float, as upstream's kernels).
template <typename Accumulate>
Tensor upsample_backward(const Tensor& grad_output, const Shape& input_size, const char* kernel_name,
                         Accumulate&& accumulate) {
  if (input_size.size() != 4)
    throw Error("It is expected input_size equals to 4, but got size " + std::to_string(input_size.size()));
  Tensor g = grad_output.contiguous();
  Tensor grad_input = ops::zeros(input_size, g.dtype());
  int64_t planes = input_size[0] * input_size[1];
  TN_DISPATCH_ALL_TYPES(g.dtype(), kernel_name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      if (grad_input.is_meta()) return;  // the meta device: the shape and dtype are the result
      int64_t in_plane = input_size[2] * input_size[3], out_plane = g.size(2) * g.size(3);
      for (int64_t c = 0; c < planes; ++c)
        accumulate.template operator()<scalar_t>(grad_input.data_as<scalar_t>() + c * in_plane,
                                                 g.data_as<scalar_t>() + c * out_plane);
    } else {
      dtype_not_implemented(kernel_name, g.dtype());
    }
  });
  return grad_input;
}

Shape backward_output_size(const Tensor& grad_output, const std::optional<std::vector<int64_t>>& size) {
  return size ? *size : Shape{grad_output.size(2), grad_output.size(3)};
}

// Upstream's compute_source_index_and_lambda in opmath (float for float32): the two source
// rows (or columns) of an output one and their weights.
template <typename opmath_t>
void source_and_lambdas(int64_t& i0, int64_t& i1, opmath_t& l0, opmath_t& l1, opmath_t ratio, int64_t dst,
                        int64_t in, int64_t out, bool align_corners) {
  if (out == in) {
    i0 = i1 = dst;
    l0 = 1;
    l1 = 0;
    return;
  }
  opmath_t real =
      align_corners ? opmath_t(ratio * opmath_t(dst)) : opmath_t(ratio * (double(dst) + 0.5) - 0.5);
  if (!align_corners && real < 0) real = 0;
  i0 = int64_t(real);
  i1 = i0 + (i0 < in - 1 ? 1 : 0);
  l1 = std::min(std::max(real - opmath_t(i0), opmath_t(0)), opmath_t(1));
  l0 = opmath_t(1) - l1;
}

// Upstream's area_pixel_compute_scale in opmath.
template <typename opmath_t>
opmath_t linear_ratio(int64_t in, int64_t out, bool align_corners,
                      const std::optional<double>& scale_factor) {
  if (align_corners) return out > 1 ? opmath_t(in - 1) / opmath_t(out - 1) : opmath_t(0);
  return scale_factor && *scale_factor > 0 ? opmath_t(1.0 / *scale_factor) : opmath_t(in) / opmath_t(out);
}

Tensor upsample_bilinear2d(const Tensor& input, const Shape& size, bool align_corners,
                           const std::optional<std::vector<double>>& scales) {
  Tensor x = input.contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = size[0], ow = size[1];
  auto ratio = [&](int64_t in, int64_t out, size_t axis) {
    if (align_corners) return out > 1 ? double(in - 1) / double(out - 1) : 0.0;
    return scales ? 1.0 / (*scales)[axis] : double(in) / double(out);
  };
  double rh = ratio(h, oh, 0), rw = ratio(w, ow, 1);
  Tensor out = Tensor::empty({n, c, oh, ow}, x.dtype());
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
  TN_DISPATCH_ALL_TYPES(x.dtype(), "upsample_bilinear2d", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = x.template data_as<scalar_t>();
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t i = 0; i < oh; ++i) {
        double sy = align_corners ? rh * double(i) : std::max(rh * (double(i) + 0.5) - 0.5, 0.0);
        int64_t y0 = std::min<int64_t>(int64_t(sy), h - 1), y1 = std::min<int64_t>(y0 + 1, h - 1);
        double ly = sy - double(y0);
        for (int64_t j = 0; j < ow; ++j) {
          double sx = align_corners ? rw * double(j) : std::max(rw * (double(j) + 0.5) - 0.5, 0.0);
          int64_t x0 = std::min<int64_t>(int64_t(sx), w - 1), x1 = std::min<int64_t>(x0 + 1, w - 1);
          double lx = sx - double(x0);
          auto at = [&](int64_t yy, int64_t xx) {
            return double(compute_t<scalar_t>(in[(p * h + yy) * w + xx]));
          };
          double v = (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) +
                     ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
          out.template data_as<scalar_t>()[(p * oh + i) * ow + j] = scalar_t(compute_t<scalar_t>(v));
        }
      }
  });
  return out;
}

Tensor upsample_nearest2d_backward(const Tensor& grad_output, const Shape& size, const Shape& input_size,
                                   const std::optional<std::vector<double>>& scales) {
  int64_t h = input_size[2], w = input_size[3], oh = size[0], ow = size[1];
  return upsample_backward(grad_output, input_size, "upsample_nearest2d_backward",
                           [&]<typename scalar_t>(scalar_t* in, const scalar_t* out) {
                             for (int64_t i = 0; i < oh; ++i) {
                               int64_t y = nearest_source(i, h, oh, axis_scale(scales, 0));
                               for (int64_t j = 0; j < ow; ++j)
                                 in[y * w + nearest_source(j, w, ow, axis_scale(scales, 1))] +=
                                     out[i * ow + j];
                             }
                           });
}

// Each output's gradient spread over its four sources, (l_row l_col) g in opmath, in
// upstream's order (rows, then columns, then the four corners).
Tensor upsample_bilinear2d_backward(const Tensor& grad_output, const Shape& size, const Shape& input_size,
                                    bool align_corners, const std::optional<std::vector<double>>& scales) {
  int64_t h = input_size[2], w = input_size[3], oh = size[0], ow = size[1];
  return upsample_backward(
      grad_output, input_size, "upsample_bilinear2d_backward",
      [&]<typename scalar_t>(scalar_t* in, const scalar_t* out) {
        using opmath_t = scalar_t;
        opmath_t rh = linear_ratio<opmath_t>(h, oh, align_corners, axis_scale(scales, 0));
        opmath_t rw = linear_ratio<opmath_t>(w, ow, align_corners, axis_scale(scales, 1));
        int64_t y0, y1, x0, x1;
        opmath_t ly0, ly1, lx0, lx1;
        for (int64_t i = 0; i < oh; ++i) {
          source_and_lambdas(y0, y1, ly0, ly1, rh, i, h, oh, align_corners);
          for (int64_t j = 0; j < ow; ++j) {
            source_and_lambdas(x0, x1, lx0, lx1, rw, j, w, ow, align_corners);
            opmath_t v = out[i * ow + j];
            in[y0 * w + x0] += ly0 * lx0 * v;
            in[y0 * w + x1] += ly0 * lx1 * v;
            in[y1 * w + x0] += ly1 * lx0 * v;
            in[y1 * w + x1] += ly1 * lx1 * v;
          }
        }
      });
}

// Upstream's get_cubic_upsample_coefficients (Keys' cubic convolution, A = -0.75) in opmath:
// the weights of the four sources around a fractional position t. Fused: as the forward's AVX2
// kernel computes them, where the compiler contracted the inner multiply-adds (read off
// upstream's weights by interpolating one-hot inputs); the backward's are unfused.
template <bool Fused, typename opmath_t>
void cubic_coefficients(opmath_t coeffs[4], opmath_t t) {
  const opmath_t A = -0.75;
  auto near = [&](opmath_t x) {
    return (Fused ? std::fma(A + 2, x, -(A + 3)) : (A + 2) * x - (A + 3)) * x * x + 1;
  };
  auto far = [&](opmath_t x) {
    return (Fused ? std::fma(std::fma(A, x, -5 * A), x, 8 * A) : (A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  };
  coeffs[0] = far(opmath_t(double(t) + 1.0));
  coeffs[1] = near(t);
  opmath_t t2 = opmath_t(1.0 - double(t));
  coeffs[2] = near(t2);
  coeffs[3] = far(opmath_t(double(t2) + 1.0));
}

// Upstream's area_pixel_compute_source_index for cubic: never clamped at 0, in double (its
// dst + 0.5 promotes), fused as the coefficients.
template <bool Fused, typename opmath_t>
opmath_t cubic_source(opmath_t ratio, int64_t dst, bool align_corners) {
  if (align_corners) return opmath_t(ratio * opmath_t(dst));
  double half = double(dst) + 0.5;
  return opmath_t(Fused ? std::fma(double(ratio), half, -0.5) : ratio * half - 0.5);
}

void check_bicubic(const Shape& input_size, const Shape& size) {
  if (input_size.size() != 4)
    throw Error("upsample_bicubic2d: expected a 4-D input, but got " + std::to_string(input_size.size()) +
                "-D");
  if (input_size[1] * input_size[2] * input_size[3] == 0)
    throw Error("Non-empty 4D data tensor expected but got a tensor with sizes " + shape_str(input_size));
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0 || input_size[2] <= 0 || input_size[3] <= 0)
    throw Error("Input and output sizes should be greater than 0");
}

// Each output element is sum_i wy_i (sum_j wx_j x[y_i, x_j]) over the 4 x 4 sources around it
// (clamped to the input), in the input's type, rows outer, as upstream's separable Interpolate;
// its sums fused multiply-adds as the compiler contracted them in upstream's AVX2 kernel
// (measured: fused, 4 of 40 float64 values differ from upstream's; unfused sums, 7 to 16).
Tensor upsample_bicubic2d(const Tensor& input, const Shape& size, bool align_corners,
                          const std::optional<std::vector<double>>& scales) {
  check_bicubic(input.sizes(), size);
  Tensor x = input.contiguous();
  int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3), oh = size[0], ow = size[1];
  Tensor out = Tensor::empty({x.size(0), x.size(1), oh, ow}, x.dtype());
  TN_DISPATCH_ALL_TYPES(x.dtype(), "upsample_bicubic2d", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      if (out.is_meta()) return;  // the meta device: the shape and dtype are the result
      // The taps of every output row or column: four clamped sources and their weights.
      auto taps = [&](int64_t in, int64_t out_size, size_t axis, std::vector<int64_t>& at,
                      std::vector<scalar_t>& weight) {
        scalar_t ratio = linear_ratio<scalar_t>(in, out_size, align_corners, axis_scale(scales, axis));
        for (int64_t o = 0; o < out_size; ++o) {
          scalar_t real = cubic_source<true>(ratio, o, align_corners);
          int64_t base = int64_t(floorf(float(real)));
          scalar_t coeffs[4];
          cubic_coefficients<true, scalar_t>(coeffs, scalar_t(real - scalar_t(base)));
          for (int64_t k = 0; k < 4; ++k) {
            at.push_back(std::clamp<int64_t>(base - 1 + k, 0, in - 1));
            weight.push_back(coeffs[k]);
          }
        }
      };
      std::vector<int64_t> ys, xs;
      std::vector<scalar_t> wy, wx;
      taps(h, oh, 0, ys, wy);
      taps(w, ow, 1, xs, wx);
      const scalar_t* in = x.data_as<scalar_t>();
      scalar_t* o = out.data_as<scalar_t>();
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            scalar_t total = 0;
            for (int64_t a = 0; a < 4; ++a) {
              const scalar_t* row = in + (p * h + ys[size_t(i * 4 + a)]) * w;
              scalar_t t = row[xs[size_t(j * 4)]] * wx[size_t(j * 4)];
              for (int64_t b = 1; b < 4; ++b)
                t = std::fma(row[xs[size_t(j * 4 + b)]], wx[size_t(j * 4 + b)], t);
              total = a == 0 ? t * wy[size_t(i * 4)] : std::fma(t, wy[size_t(i * 4 + a)], total);
            }
            o[(p * oh + i) * ow + j] = total;
          }
    } else {
      dtype_not_implemented("upsample_bicubic2d", x.dtype());
    }
  });
  return out;
}

// Each output's gradient g spread over its 4 x 4 sources as g wy_jj wx_ii (columns outer),
// indices and fractions guarded as upstream's guard_index_and_lambda.
Tensor upsample_bicubic2d_backward(const Tensor& grad_output, const Shape& size, const Shape& input_size,
                                   bool align_corners, const std::optional<std::vector<double>>& scales) {
  check_bicubic(input_size, size);
  int64_t h = input_size[2], w = input_size[3], oh = size[0], ow = size[1];
  return upsample_backward(
      grad_output, input_size, "upsample_bicubic2d_backward",
      [&]<typename scalar_t>(scalar_t* in, const scalar_t* out) {
        using opmath_t = scalar_t;
        opmath_t rh = linear_ratio<opmath_t>(h, oh, align_corners, axis_scale(scales, 0));
        opmath_t rw = linear_ratio<opmath_t>(w, ow, align_corners, axis_scale(scales, 1));
        auto guarded = [](opmath_t real, int64_t in_size, int64_t* index) {
          *index = std::min(int64_t(floorf(float(real))), in_size - 1);
          return std::min(std::max(real - opmath_t(*index), opmath_t(0)), opmath_t(1));
        };
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            int64_t x0, y0;
            opmath_t tx = guarded(cubic_source<false>(rw, j, align_corners), w, &x0);
            opmath_t ty = guarded(cubic_source<false>(rh, i, align_corners), h, &y0);
            opmath_t cx[4], cy[4];
            cubic_coefficients<false, opmath_t>(cx, tx);
            cubic_coefficients<false, opmath_t>(cy, ty);
            opmath_t v = out[i * ow + j];
            for (int64_t ii = 0; ii < 4; ++ii)
              for (int64_t jj = 0; jj < 4; ++jj)
                in[std::clamp<int64_t>(y0 - 1 + jj, 0, h - 1) * w +
                   std::clamp<int64_t>(x0 - 1 + ii, 0, w - 1)] += v * cy[jj] * cx[ii];
          }
      });
}

}  // namespace

TN_KERNEL("aten::upsample_nearest2d_backward.vec", {
  std::optional<std::vector<double>> scales;
  if (!a[3].is_none()) scales = a[3].get<std::vector<double>>();
  return upsample_nearest2d_backward(a.tensor(0), backward_output_size(a.tensor(0), a.optional_int_list(1)),
                                     a.int_list(2), scales);
});
TN_KERNEL("aten::upsample_bilinear2d_backward.vec", {
  std::optional<std::vector<double>> scales;
  if (!a[4].is_none()) scales = a[4].get<std::vector<double>>();
  return upsample_bilinear2d_backward(a.tensor(0), backward_output_size(a.tensor(0), a.optional_int_list(1)),
                                      a.int_list(2), a.boolean(3), scales);
});
TN_KERNEL("aten::upsample_nearest2d.vec", {
  const Tensor& x = a.tensor(0);
  std::optional<std::vector<double>> scales;
  if (!a[2].is_none()) scales = a[2].get<std::vector<double>>();
  return upsample_nearest2d(x, output_size_of(x, a.optional_int_list(1), scales), scales);
});
TN_KERNEL("aten::upsample_bilinear2d.vec", {
  const Tensor& x = a.tensor(0);
  std::optional<std::vector<double>> scales;
  if (!a[3].is_none()) scales = a[3].get<std::vector<double>>();
  return upsample_bilinear2d(x, output_size_of(x, a.optional_int_list(1), scales), a.boolean(2), scales);
});

TN_KERNEL("aten::upsample_bicubic2d.vec", {
  const Tensor& x = a.tensor(0);
  std::optional<std::vector<double>> scales;
  if (!a[3].is_none()) scales = a[3].get<std::vector<double>>();
  if (x.dim() != 4)
    throw Error("upsample_bicubic2d: expected a 4-D input, but got " + std::to_string(x.dim()) + "-D");
  return upsample_bicubic2d(x, output_size_of(x, a.optional_int_list(1), scales), a.boolean(2), scales);
});
TN_KERNEL("aten::upsample_bicubic2d_backward.vec", {
  std::optional<std::vector<double>> scales;
  if (!a[4].is_none()) scales = a[4].get<std::vector<double>>();
  return upsample_bicubic2d_backward(a.tensor(0), backward_output_size(a.tensor(0), a.optional_int_list(1)),
                                     a.int_list(2), a.boolean(3), scales);
});

}  // namespace tn
