// torch.nn.functional's operators: losses, normalizations, dropout, padding,
// convolution (im2col + GEMM), pooling, upsampling, distances; plus a few index
// builders (tril_indices, searchsorted, cartesian_prod...). Most compose other
// operators through the door, as upstream's composite kernels do.
#include <cmath>
#include <limits>

#include "common.h"

namespace tn {

namespace {

Tensor mul(const Tensor& a, const Tensor& b) { return op("aten::mul", "Tensor", {a, b}); }
Tensor add(const Tensor& a, const Tensor& b) { return op("aten::add", "Tensor", {a, b, Scalar(int64_t{1})}); }
Tensor sub(const Tensor& a, const Tensor& b) { return op("aten::sub", "Tensor", {a, b, Scalar(int64_t{1})}); }
Tensor S(double v) { return scalar_tensor(Scalar(v)); }

// reduction: 0 none, 1 mean, 2 sum (upstream's Reduction enum).
Tensor reduce(const Tensor& loss, int64_t reduction) {
  if (reduction == 1) return op("aten::mean", "", {loss, IValue()});
  if (reduction == 2) return op("aten::sum", "", {loss, IValue()});
  return loss;
}

void check_same_size(const Tensor& input, const Tensor& target, const char* name) {
  if (input.sizes() != target.sizes())
    throw Error(std::string(name) + ": input and target sizes must match: " + shape_str(input.sizes()) +
                " vs " + shape_str(target.sizes()));
}

template <typename F>
Tensor pointwise_loss(const Tensor& input, const Tensor& target, int64_t reduction, F f) {
  Tensor x = input, t = target;
  ScalarType type = result_type(x, t);
  Tensor loss = TN_DISPATCH_ALL_TYPES(type, "loss", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    // float32 reaches a generic `f` as float: upstream's loss kernels compute in the
    // storage type, and their sums add exactly those values.
    if constexpr (std::is_same_v<scalar_t, float>)
      return map_binary<scalar_t>(x, t, type, type,
                                  [&](double a, double b) -> double { return f(float(a), float(b)); });
    else if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_binary<scalar_t>(x, t, type, type, [&](double a, double b) -> double { return f(a, b); });
    else
      return Tensor();
  });
  if (!loss.defined()) dtype_not_implemented("loss", type);
  return reduce(loss, reduction);
}

// Normalizes `x` viewed as (outer, inner) rows: (x - mean) / sqrt(var + eps), biased var.
Tensor normalize_rows(const Tensor& x, int64_t outer, double eps) {
  Tensor rows = op("aten::reshape", "", {x, Shape{outer, outer ? x.numel() / outer : 0}});
  Tensor mean = op("aten::mean", "dim", {rows, std::vector<int64_t>{1}, true, IValue()});
  Tensor var = op("aten::var", "correction", {rows, std::vector<int64_t>{1}, int64_t{0}, true});
  Tensor normalized = op("aten::div", "Tensor", {sub(rows, mean), op("aten::sqrt", "", {add(var, S(eps))})});
  return op("aten::reshape", "", {normalized, x.sizes()});
}

// Shape (1, C, 1, ...) for per-channel parameters of an (N, C, ...) input.
Tensor per_channel(const Tensor& p, int64_t ndim) {
  Shape shape(size_t(ndim), 1);
  shape[1] = p.numel();
  return op("aten::reshape", "", {p, shape});
}

Tensor affine(Tensor y, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, int64_t ndim,
              bool channel) {
  if (weight) y = mul(y, channel ? per_channel(*weight, ndim) : *weight);
  if (bias) y = add(y, channel ? per_channel(*bias, ndim) : *bias);
  return y;
}

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  bool training, double momentum, double eps) {
  if (input.dim() < 2) throw Error("batch_norm: expected input with at least 2 dims");
  int64_t channels = input.size(1), nd = input.dim();
  Shape dims{0};
  for (int64_t d = 2; d < nd; ++d) dims.push_back(d);
  Tensor mean, var;
  if (training) {
    int64_t count = input.numel() / std::max<int64_t>(channels, 1);
    if (count <= 1)
      throw Error("Expected more than 1 value per channel when training, got input size " +
                  shape_str(input.sizes()));
    // Upstream's per-channel statistics add in input order in double (not the cascade sum).
    mean = sequential_mean(input, dims, false, input.dtype());
    var = op("aten::var", "correction", {input, dims, int64_t{0}, false});
    if (running_mean) {
      running_mean->copy_from(add(op("aten::mul", "Scalar", {*running_mean, Scalar(1 - momentum)}),
                                  op("aten::mul", "Scalar", {mean, Scalar(momentum)})));
    }
    if (running_var) {
      Tensor unbiased = op("aten::mul", "Scalar", {var, Scalar(double(count) / double(count - 1))});
      running_var->copy_from(add(op("aten::mul", "Scalar", {*running_var, Scalar(1 - momentum)}),
                                 op("aten::mul", "Scalar", {unbiased, Scalar(momentum)})));
    }
  } else {
    if (!running_mean || !running_var)
      throw Error("running_mean and running_var must be defined in evaluation mode");
    mean = *running_mean;
    var = *running_var;
  }
  Tensor invstd = op("aten::rsqrt", "", {add(var, S(eps))});
  Tensor y = mul(sub(input, per_channel(mean, nd)), per_channel(invstd, nd));
  return affine(y, weight, bias, nd, true);
}

// Pads the last len(pad)/2 dims; pad lists (left, right) pairs from the last dim backwards.
Tensor pad(const Tensor& self, const std::vector<int64_t>& p, const std::string& mode, double value) {
  if (p.size() % 2 != 0) throw Error("Padding length must be divisible by 2");
  int64_t n = int64_t(p.size()) / 2;
  if (n > self.dim()) throw Error("Padding length too large");
  if (mode == "constant") {
    Shape shape = self.sizes();
    for (int64_t i = 0; i < n; ++i) {
      int64_t d = self.dim() - 1 - i;
      shape[size_t(d)] += p[size_t(2 * i)] + p[size_t(2 * i + 1)];
      if (shape[size_t(d)] < 0)
        throw Error("The input size " + std::to_string(self.size(d)) + ", plus negative padding " +
                    std::to_string(p[size_t(2 * i)]) + " and " + std::to_string(p[size_t(2 * i + 1)]) +
                    " resulted in a negative output size, which is invalid. Check dimension " +
                    std::to_string(d) + " of your input.");
    }
    Tensor out = Tensor::empty(shape, self.dtype());
    out.copy_from(scalar_tensor(Scalar(value)));
    Tensor dst = out, src = self;
    for (int64_t i = 0; i < n; ++i) {
      int64_t d = self.dim() - 1 - i, lo = p[size_t(2 * i)], hi = p[size_t(2 * i + 1)];
      int64_t s0 = std::max<int64_t>(-lo, 0), s1 = self.size(d) - std::max<int64_t>(-hi, 0);
      src = op("aten::slice", "Tensor", {src, d, s0, s1, int64_t{1}});
      dst = op("aten::slice", "Tensor",
               {dst, d, std::max<int64_t>(lo, 0), std::max<int64_t>(lo, 0) + (s1 - s0), int64_t{1}});
    }
    dst.copy_from(src);
    return out;
  }
  // reflect / replicate / circular: gather along each padded dim with an index map.
  Tensor out = self;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = self.dim() - 1 - i, lo = p[size_t(2 * i)], hi = p[size_t(2 * i + 1)], size = out.size(d);
    if (mode == "reflect" && (lo >= size || hi >= size))
      throw Error(
          "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
          "(" +
          std::to_string(lo) + ", " + std::to_string(hi) + ") at dimension " + std::to_string(d) +
          " of input " + shape_str(self.sizes()));
    Tensor index = Tensor::empty({size + lo + hi}, ScalarType::Long);
    for (int64_t j = -lo; j < size + hi; ++j) {
      int64_t k;
      if (mode == "reflect")
        k = j < 0 ? -j : j >= size ? 2 * (size - 1) - j : j;
      else if (mode == "replicate")
        k = std::clamp<int64_t>(j, 0, size - 1);
      else if (mode == "circular")
        k = ((j % size) + size) % size;
      else
        throw Error("Unrecognised padding mode " + mode);
      index.data_as<int64_t>()[j + lo] = k;
    }
    out = op("aten::index_select", "", {out, d, index});
  }
  return out;
}

// Upstream's convolution checks: a zero or negative stride, dilation or kernel extent is
// refused before any output size is computed from it.
void require_positive(const Shape& values, const char* message) {
  for (int64_t v : values)
    if (v <= 0) throw Error(message);
}

// im2col on (N, C, H, W): (N, C*kh*kw, L) with zero padding.
Tensor im2col(const Tensor& input, const Shape& kernel, const Shape& dilation, const Shape& padding,
              const Shape& stride) {
  if (kernel.size() != 2 || dilation.size() != 2 || padding.size() != 2 || stride.size() != 2)
    throw Error("im2col: kernel_size, dilation, padding and stride must each have 2 values");
  require_positive(stride, "non-positive stride is not supported");
  require_positive(dilation, "dilation should be greater than zero");
  require_positive(kernel, "kernel size should be greater than zero");
  if (input.dim() != 4)
    throw Error(
        "Expected 4D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions");
  int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  int64_t oh = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
  int64_t ow = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
  if (oh <= 0 || ow <= 0)
    throw Error("Given input with spatial size (" + std::to_string(h) + ", " + std::to_string(w) +
                "), kernel_size (" + std::to_string(kernel[0]) + ", " + std::to_string(kernel[1]) +
                "), the calculated shape of the array of sliding blocks is non-positive.");
  Tensor x = input.contiguous();
  Tensor out = Tensor::empty({n, c * kernel[0] * kernel[1], oh * ow}, input.dtype());
  TN_DISPATCH_ALL_TYPES(input.dtype(), "im2col", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = x.template data_as<scalar_t>();
    scalar_t* o = out.template data_as<scalar_t>();
    int64_t rows = c * kernel[0] * kernel[1];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t ch = r / (kernel[0] * kernel[1]), ki = (r / kernel[1]) % kernel[0], kj = r % kernel[1];
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            int64_t iy = y * stride[0] - padding[0] + ki * dilation[0],
                    ix = xx * stride[1] - padding[1] + kj * dilation[1];
            bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
            o[(b * rows + r) * oh * ow + y * ow + xx] =
                inside ? in[((b * c + ch) * h + iy) * w + ix] : scalar_t(0);
          }
      }
  });
  return out;
}

// 2-D convolution as im2col + GEMM per group (batched input).
Tensor conv2d(const Tensor& input_in, const Tensor& weight, const std::optional<Tensor>& bias, Shape stride,
              Shape padding, Shape dilation, int64_t groups) {
  bool batched = input_in.dim() == 4;
  if (input_in.dim() != 3 && input_in.dim() != 4)
    throw Error("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: " +
                shape_str(input_in.sizes()));
  Tensor input = batched ? input_in : op("aten::unsqueeze", "", {input_in, int64_t{0}});
  if (weight.dim() != 4) throw Error("conv2d: weight should be 4-D");
  int64_t n = input.size(0), c = input.size(1), oc = weight.size(0);
  if (c != weight.size(1) * groups)
    throw Error("Given groups=" + std::to_string(groups) + ", weight of size " + shape_str(weight.sizes()) +
                ", expected input" + shape_str(input.sizes()) + " to have " +
                std::to_string(weight.size(1) * groups) + " channels, but got " + std::to_string(c) +
                " channels instead");
  if (input.dtype() != weight.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(input.dtype()) + " but found " +
                upstream_type_name(weight.dtype()));
  if (input.dtype() == ScalarType::Half) dtype_not_implemented("slow_conv2d_cpu", input.dtype());
  Shape kernel{weight.size(2), weight.size(3)};
  if (groups <= 0) throw Error("non-positive groups is not supported");
  int64_t cg = c / groups, og = oc / groups;
  std::vector<Tensor> outputs;
  int64_t oh = 0, ow = 0;
  for (int64_t g = 0; g < groups; ++g) {
    Tensor xg = op("aten::narrow", "", {input, int64_t{1}, g * cg, cg});
    Tensor cols = im2col(xg, kernel, dilation, padding, stride);
    oh = (input.size(2) + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
    ow = (input.size(3) + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
    Tensor wg =
        op("aten::reshape", "",
           {op("aten::narrow", "", {weight, int64_t{0}, g * og, og}), Shape{og, cg * kernel[0] * kernel[1]}});
    // One GEMM per sample, as upstream's slow_conv2d does: a batched matmul would go through
    // bmm, whose small-matrix kernel rounds differently from the BLAS GEMM upstream calls.
    std::vector<Tensor> per_sample;
    for (int64_t i = 0; i < n; ++i)
      per_sample.push_back(op("aten::mm", "", {wg, op("aten::select", "int", {cols, int64_t{0}, i})}));
    outputs.push_back(op("aten::stack", "", {per_sample, int64_t{0}}));  // (N, og, L)
  }
  Tensor out = op("aten::reshape", "", {op("aten::cat", "", {outputs, int64_t{1}}), Shape{n, oc, oh, ow}});
  if (bias) out = add(out, per_channel(*bias, 4));
  return batched ? out : op("aten::squeeze", "dim", {out, int64_t{0}});
}

// Transposed 2-D convolution: per group, W^T @ X gives columns that col2im scatters
// (sums) into the output.
Tensor conv_transpose2d(const Tensor& input_in, const Tensor& weight, const std::optional<Tensor>& bias,
                        Shape stride, Shape padding, Shape output_padding, int64_t groups, Shape dilation) {
  if (groups <= 0) throw Error("non-positive groups is not supported");
  require_positive(stride, "non-positive stride is not supported");
  bool batched = input_in.dim() == 4;
  Tensor input = (batched ? input_in : op("aten::unsqueeze", "", {input_in, int64_t{0}})).contiguous();
  if (weight.dim() != 4) throw Error("conv_transpose2d: weight should be 4-D");
  if (input.dtype() == ScalarType::Half) dtype_not_implemented("slow_conv_transpose2d_cpu", input.dtype());
  int64_t n = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  if (cin != weight.size(0))
    throw Error("Given transposed=1, weight of size " + shape_str(weight.sizes()) + ", expected input" +
                shape_str(input.sizes()) + " to have " + std::to_string(weight.size(0)) +
                " channels, but got " + std::to_string(cin) + " channels instead");
  int64_t kh = weight.size(2), kw = weight.size(3), cog = weight.size(1), cout = cog * groups,
          cig = cin / groups;
  int64_t oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1;
  int64_t ow = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1;
  Tensor out = Tensor::empty({n, cout, oh, ow}, ScalarType::Double);
  std::fill_n(out.data_as<double>(), out.numel(), 0.0);
  for (int64_t g = 0; g < groups; ++g) {
    Tensor wg = op("aten::reshape", "",
                   {op("aten::narrow", "", {weight, int64_t{0}, g * cig, cig}), Shape{cig, cog * kh * kw}});
    Tensor xg = op("aten::reshape", "",
                   {op("aten::narrow", "", {input, int64_t{1}, g * cig, cig}), Shape{n, cig, h * w}});
    Tensor cols = op("aten::matmul", "", {op("aten::t", "", {wg}), xg})
                      .to(ScalarType::Double)
                      .contiguous();  // (n, cog*kh*kw, h*w)
    const double* source = cols.data_as<double>();
    double* target = out.data_as<double>();
    int64_t rows = cog * kh * kw;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t co = r / (kh * kw), ki = (r / kw) % kh, kj = r % kw;
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x) {
            int64_t oy = y * stride[0] - padding[0] + ki * dilation[0],
                    ox = x * stride[1] - padding[1] + kj * dilation[1];
            if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
            target[((b * cout + g * cog + co) * oh + oy) * ow + ox] +=
                source[(b * rows + r) * h * w + y * w + x];
          }
      }
  }
  Tensor result = out.to(input.dtype());
  if (bias) result = add(result, per_channel(*bias, 4));
  return batched ? result : op("aten::squeeze", "dim", {result, int64_t{0}});
}

Shape same_padding(const Tensor& weight, const Shape& dilation, int64_t spatial) {
  Shape p;
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t total = dilation[size_t(i)] * (weight.size(2 + i) - 1);
    if (total % 2 != 0)
      throw NotImplemented("torchnative: conv padding='same' with asymmetric padding is not implemented");
    p.push_back(total / 2);
  }
  return p;
}

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
  Tensor x = (batched ? input : op("aten::unsqueeze", "", {input, int64_t{0}})).contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  int64_t oh = pool_out(h, kernel[0], padding[0], stride[0], dilation[0], ceil),
          ow = pool_out(w, kernel[1], padding[1], stride[1], dilation[1], ceil);
  if (oh <= 0 || ow <= 0) throw Error("Output size is too small");
  Tensor values = Tensor::empty({n, c, oh, ow}, x.dtype());
  Tensor indices = Tensor::empty({n, c, oh, ow}, ScalarType::Long);
  TN_DISPATCH_ALL_TYPES(x.dtype(), "max_pool2d", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = x.template data_as<scalar_t>();
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t best_index = -1;
          for (int64_t i = 0; i < kernel[0]; ++i)
            for (int64_t j = 0; j < kernel[1]; ++j) {
              int64_t iy = y * stride[0] - padding[0] + i * dilation[0],
                      ix = xx * stride[1] - padding[1] + j * dilation[1];
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              double v = double(compute_t<scalar_t>(in[(p * h + iy) * w + ix]));
              if (best_index < 0 || v > best || std::isnan(v)) {
                if (!(best_index >= 0 && std::isnan(best))) {
                  best = v;
                  best_index = iy * w + ix;
                }
              }
            }
          values.template data_as<scalar_t>()[(p * oh + y) * ow + xx] = scalar_t(compute_t<scalar_t>(best));
          indices.template data_as<int64_t>()[(p * oh + y) * ow + xx] = best_index;
        }
  });
  if (!batched)
    return {op("aten::squeeze", "dim", {values, int64_t{0}}),
            op("aten::squeeze", "dim", {indices, int64_t{0}})};
  return {values, indices};
}

Tensor avg_pool2d(const Tensor& input, Shape kernel, Shape stride, Shape padding, bool ceil,
                  bool count_include_pad, std::optional<int64_t> divisor) {
  if (divisor && *divisor == 0) throw Error("divisor must be not zero");
  if (kernel.size() == 1) kernel.push_back(kernel[0]);
  stride = pool_stride(stride, kernel);
  if (stride.size() == 1) stride.push_back(stride[0]);
  if (padding.size() == 1) padding.push_back(padding[0]);
  bool batched = input.dim() == 4;
  Tensor x = (batched ? input : op("aten::unsqueeze", "", {input, int64_t{0}})).contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  int64_t oh = pool_out(h, kernel[0], padding[0], stride[0], 1, ceil),
          ow = pool_out(w, kernel[1], padding[1], stride[1], 1, ceil);
  Tensor out = Tensor::empty({n, c, oh, ow}, x.dtype());
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
  return batched ? out : op("aten::squeeze", "dim", {out, int64_t{0}});
}

// Adaptive pooling: output cell i covers [floor(i*in/out), ceil((i+1)*in/out)).
template <bool Max>
std::pair<Tensor, Tensor> adaptive_pool2d(const Tensor& input, const Shape& output_size) {
  bool batched = input.dim() == 4;
  Tensor x = (batched ? input : op("aten::unsqueeze", "", {input, int64_t{0}})).contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = output_size[0],
          ow = output_size[1];
  Tensor out = Tensor::empty({n, c, oh, ow}, x.dtype());
  Tensor indices = Tensor::empty({n, c, oh, ow}, ScalarType::Long);
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
  if (!batched)
    return {op("aten::squeeze", "dim", {out, int64_t{0}}), op("aten::squeeze", "dim", {indices, int64_t{0}})};
  return {out, indices};
}

Shape output_size_of(const Tensor& input, const std::optional<std::vector<int64_t>>& size,
                     const std::optional<std::vector<double>>& scales) {
  if (size) return *size;
  if (!scales) throw Error("Must specify exactly one of output_size and scale_factors");
  Shape out;
  for (size_t i = 0; i < scales->size(); ++i)
    out.push_back(int64_t(std::floor(double(input.size(2 + int64_t(i))) * (*scales)[i])));
  return out;
}

Tensor upsample_nearest2d(const Tensor& input, const Shape& size,
                          const std::optional<std::vector<double>>& scales) {
  int64_t h = input.size(2), w = input.size(3), oh = size[0], ow = size[1];
  // As upstream: with a scale factor, source = floor(dst / scale), else floor(dst * in / out).
  auto source = [&](int64_t dst, int64_t in, int64_t out, size_t axis) {
    double scale = scales ? 1.0 / (*scales)[axis] : double(in) / double(out);
    return std::min(int64_t(std::floor(double(dst) * scale)), in - 1);
  };
  Tensor iy = Tensor::empty({oh}, ScalarType::Long), ix = Tensor::empty({ow}, ScalarType::Long);
  for (int64_t i = 0; i < oh; ++i) iy.data_as<int64_t>()[i] = source(i, h, oh, 0);
  for (int64_t j = 0; j < ow; ++j) ix.data_as<int64_t>()[j] = source(j, w, ow, 1);
  return op("aten::index_select", "",
            {op("aten::index_select", "", {input, int64_t{2}, iy}), int64_t{3}, ix});
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

Tensor p_distance(const Tensor& diff, double p, int64_t dim, bool keepdim) {
  return op("aten::linalg_vector_norm", "", {diff, Scalar(p), std::vector<int64_t>{dim}, keepdim, IValue()});
}

Tensor index_pairs(int64_t row, int64_t col, int64_t offset, bool lower) {
  std::vector<int64_t> rows, cols;
  for (int64_t i = 0; i < row; ++i)
    for (int64_t j = 0; j < col; ++j)
      if (lower ? j - i <= offset : j - i >= offset) {
        rows.push_back(i);
        cols.push_back(j);
      }
  int64_t n = int64_t(rows.size());
  Tensor out = Tensor::empty({2, n}, ScalarType::Long);
  std::copy(rows.begin(), rows.end(), out.data_as<int64_t>());
  std::copy(cols.begin(), cols.end(), out.data_as<int64_t>() + n);
  return out;
}

Tensor searchsorted(const Tensor& sorted, const Tensor& values, bool out_int32, bool right) {
  if (sorted.dim() != 1 &&
      (sorted.dim() == 0 || Shape(sorted.sizes().begin(), sorted.sizes().end() - 1) !=
                                Shape(values.sizes().begin(), values.sizes().end() - (values.dim() ? 1 : 0))))
    throw Error(
        "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
        "boundaries tensor and input value tensor must match");
  Tensor seq = sorted.to(ScalarType::Double).contiguous(), vals = values.to(ScalarType::Double).contiguous();
  int64_t length = seq.size(-1);
  Tensor out = Tensor::empty(values.sizes(), out_int32 ? ScalarType::Int : ScalarType::Long);
  int64_t per_row = sorted.dim() == 1 ? vals.numel() : (values.dim() ? values.size(-1) : 1);
  for (int64_t i = 0; i < vals.numel(); ++i) {
    const double* row = seq.data_as<double>() + (sorted.dim() == 1 ? 0 : (i / per_row) * length);
    double v = vals.data_as<double>()[i];
    const double* pos =
        right ? std::upper_bound(row, row + length, v) : std::lower_bound(row, row + length, v);
    int64_t k = pos - row;
    if (out_int32)
      out.data_as<int32_t>()[i] = int32_t(k);
    else
      out.data_as<int64_t>()[i] = k;
  }
  return out;
}

}  // namespace

TN_KERNEL("aten::mse_loss", {
  check_same_size(a.tensor(0), a.tensor(1), "mse_loss");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2),
                        [](auto x, auto t) { return (x - t) * (x - t); });
});
TN_KERNEL("aten::l1_loss", {
  check_same_size(a.tensor(0), a.tensor(1), "l1_loss");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2),
                        [](auto x, auto t) { return std::abs(x - t); });
});
TN_KERNEL("aten::smooth_l1_loss", {
  double beta = a.real(3);
  if (beta < 0) throw Error("smooth_l1_loss does not support negative values for beta.");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2), [beta](auto x, auto t) {
    using T = decltype(x);
    T d = std::abs(x - t), b = T(beta), half = T(0.5);
    return beta == 0 ? d : d < b ? half * d * d / b : d - half * b;
  });
});
TN_KERNEL("aten::huber_loss", {
  double delta = a.real(3);
  if (delta <= 0) throw Error("huber_loss does not support non-positive values for delta.");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2), [delta](auto x, auto t) {
    using T = decltype(x);
    T d = std::abs(x - t), k = T(delta), half = T(0.5);
    return d < k ? half * d * d : k * (d - half * k);
  });
});
TN_KERNEL("aten::soft_margin_loss", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  if (!is_floating(x.dtype()))
    return pointwise_loss(x, t, a.integer(2),
                          [](double v, double w) { return std::log(1 + std::exp(-v * w)); });
  // Upstream's chain of in-place steps in the input's dtype, log(1 + exp(-input * target)),
  // with exp and log through the vml (SLEEF) kernels.
  Tensor product = mul(op("aten::neg", "", {x}), t).to(x.dtype());
  Tensor loss = op(
      "aten::log", "",
      {op("aten::add", "Scalar", {op("aten::exp", "", {product}), Scalar(int64_t{1}), Scalar(int64_t{1})})});
  return reduce(loss, a.integer(2));
});
TN_KERNEL("aten::binary_cross_entropy", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  check_same_size(x, t, "binary_cross_entropy");
  Tensor loss = pointwise_loss(x, t, 0, [](double p, double y) {
    if (p < 0 || p > 1) throw Error("all elements of input should be between 0 and 1");
    return -(y * std::max(std::log(p), -100.0) + (1 - y) * std::max(std::log1p(-p), -100.0));
  });
  if (auto w = a.optional_tensor(2)) loss = mul(loss, *w);
  return reduce(loss, a.integer(3));
});
TN_KERNEL("aten::binary_cross_entropy_with_logits", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  auto pos_weight = a.optional_tensor(3);
  Tensor log_sig = pointwise_loss(
      x, x, 0, [](double v, double) { return std::log1p(std::exp(-std::abs(v))) + std::max(-v, 0.0); });
  Tensor loss;
  if (pos_weight) {
    Tensor coefficient = add(op("aten::mul", "Tensor", {sub(*pos_weight, S(1.0)), t}), S(1.0));
    loss = add(mul(sub(S(1.0), t), x), mul(coefficient, log_sig));
  } else {
    loss = add(mul(sub(S(1.0), t), x), log_sig);
  }
  if (auto w = a.optional_tensor(2)) loss = mul(loss, *w);
  return reduce(loss, a.integer(4));
});
TN_KERNEL("aten::kl_div", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  Tensor loss = a.boolean(3) ? mul(op("aten::exp", "", {t}), sub(t, x))
                             : sub(op("aten::xlogy", "Tensor", {t, t}), mul(t, x));
  return reduce(loss, a.integer(2));
});
TN_KERNEL("aten::nll_loss_nd", {
  const Tensor& x = a.tensor(0);
  const Tensor& target = a.tensor(1);
  auto weight = a.optional_tensor(2);
  int64_t reduction = a.integer(3), ignore = a.integer(4);
  if (x.dim() < 1) throw Error("input tensor should be 1D or more");
  if (target.dtype() != ScalarType::Long)
    throw Error("expected scalar type Long but found " + std::string(upstream_type_name(target.dtype())));
  bool single = x.dim() == 1;
  Tensor input = single ? op("aten::unsqueeze", "", {x, int64_t{0}}) : x;
  Tensor tgt = single ? op("aten::unsqueeze", "", {target, int64_t{0}}) : target;
  int64_t classes = input.size(1);
  // Class dim last, everything else flattened: (M, C) and (M,).
  Tensor moved = op("aten::movedim", "int", {input, int64_t{1}, int64_t{-1}});
  Tensor rows = op("aten::reshape", "", {moved, Shape{-1, classes}}).to(ScalarType::Double).contiguous();
  Tensor t = op("aten::reshape", "", {tgt, Shape{-1}}).contiguous();
  if (rows.size(0) != t.numel())
    throw Error("Expected input batch_size (" + std::to_string(input.size(0)) +
                ") to match target batch_size (" + std::to_string(tgt.size(0)) + ").");
  Tensor w = weight ? weight->to(ScalarType::Double).contiguous() : Tensor();
  Tensor losses = Tensor::empty({t.numel()}, ScalarType::Double);
  double total = 0, total_weight = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t c = t.data_as<int64_t>()[i];
    double l = 0;
    if (c != ignore) {
      if (c < 0 || c >= classes) throw IndexError("Target " + std::to_string(c) + " is out of bounds.");
      double wc = weight ? w.data_as<double>()[c] : 1.0;
      l = -rows.data_as<double>()[i * classes + c] * wc;
      total_weight += wc;
    }
    losses.data_as<double>()[i] = l;
    total += l;
  }
  ScalarType out_type = x.dtype();
  if (reduction == 0)
    return op("aten::reshape", "", {losses.to(out_type), tgt.sizes()})
        .view_as_strided(target.sizes(), contiguous_strides(target.sizes()), 0);
  Tensor result = Tensor::empty({}, ScalarType::Double);
  *result.data_as<double>() = reduction == 2 ? total : total / total_weight;
  return result.to(out_type);
});
TN_KERNEL("aten::cross_entropy_loss", {
  const Tensor& x = a.tensor(0);
  const Tensor& target = a.tensor(1);
  auto weight = a.optional_tensor(2);
  int64_t reduction = a.integer(3), ignore = a.integer(4);
  double smoothing = a.real(5);
  int64_t class_dim = x.dim() == 1 ? 0 : 1;
  Tensor logp = op("aten::log_softmax", "int", {x, class_dim, IValue()});
  if (is_floating(target.dtype())) {
    // Class probabilities.
    Tensor t = smoothing > 0 ? add(op("aten::mul", "Scalar", {target, Scalar(1 - smoothing)}),
                                   S(smoothing / double(x.size(class_dim))))
                             : target;
    Tensor product = mul(logp, t);
    if (weight) product = mul(product, x.dim() == 1 ? *weight : per_channel(*weight, x.dim()));
    Tensor loss =
        op("aten::neg", "",
           {op("aten::sum", "dim_IntList", {product, std::vector<int64_t>{class_dim}, false, IValue()})});
    if (reduction == 1)
      return op(
          "aten::div", "Scalar",
          {op("aten::sum", "", {loss, IValue()}),
           Scalar(x.dim() == 1 ? int64_t{1}
                               : x.size(0) * (x.numel() / std::max<int64_t>(x.size(0) * x.size(1), 1)))});
    return reduce(loss, reduction);
  }
  Tensor nll =
      op("aten::nll_loss_nd", "", {logp, target, weight ? IValue(*weight) : IValue(), reduction, ignore});
  if (smoothing <= 0) return nll;
  // Label smoothing mixes in the mean negative log-probability over classes.
  Tensor per_class = op("aten::neg", "",
                        {weight ? mul(logp, x.dim() == 1 ? *weight : per_channel(*weight, x.dim())) : logp});
  Tensor smooth =
      op("aten::sum", "dim_IntList", {per_class, std::vector<int64_t>{class_dim}, false, IValue()});
  Tensor ignored = op("aten::eq", "Scalar", {target, Scalar(ignore)});
  smooth = op("aten::masked_fill", "Scalar", {smooth, ignored, Scalar(int64_t{0})});
  if (reduction == 1) {
    if (weight) {
      Tensor wt = op("aten::masked_fill", "Scalar",
                     {op("aten::index_select", "",
                         {*weight, int64_t{0},
                          op("aten::reshape", "",
                             {op("aten::clamp_min", "", {target, Scalar(int64_t{0})}), Shape{-1}})}),
                      op("aten::reshape", "", {ignored, Shape{-1}}), Scalar(int64_t{0})});
      smooth = op("aten::div", "Tensor",
                  {op("aten::sum", "", {smooth, IValue()}), op("aten::sum", "", {wt, IValue()})});
    } else {
      Tensor count = op("aten::sum", "", {op("aten::logical_not", "", {ignored}), IValue()});
      smooth = op("aten::div", "Tensor", {op("aten::sum", "", {smooth, IValue()}), count});
    }
  } else if (reduction == 2) {
    smooth = op("aten::sum", "", {smooth, IValue()});
  }
  return add(op("aten::mul", "Scalar", {nll, Scalar(1 - smoothing)}),
             op("aten::mul", "Scalar", {smooth, Scalar(smoothing / double(x.size(class_dim)))}));
});

TN_KERNEL("aten::layer_norm", {
  const Tensor& x = a.tensor(0);
  Shape normalized = a.int_list(1);
  int64_t k = int64_t(normalized.size());
  if (k > x.dim() || !std::equal(normalized.begin(), normalized.end(), x.sizes().end() - k))
    throw Error("Given normalized_shape=" + shape_str(normalized) + ", expected input with shape [*, " +
                shape_str(normalized).substr(1) + ", but got input of size" + shape_str(x.sizes()));
  int64_t outer = 1;
  for (int64_t d = 0; d < x.dim() - k; ++d) outer *= x.size(d);
  return affine(normalize_rows(x, outer, a.real(4)), a.optional_tensor(2), a.optional_tensor(3), x.dim(),
                false);
});
TN_KERNEL("aten::batch_norm", {
  return batch_norm(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2), a.optional_tensor(3),
                    a.optional_tensor(4), a.boolean(5), a.real(6), a.real(7));
});
TN_KERNEL("aten::group_norm", {
  const Tensor& x = a.tensor(0);
  int64_t groups = a.integer(1), n = x.size(0), c = x.size(1);
  if (groups <= 0) throw Error("group_norm: num_groups must be positive, but got " + std::to_string(groups));
  if (c % groups != 0)
    throw Error(
        "Expected number of channels in input to be divisible by num_groups, but got input of shape " +
        shape_str(x.sizes()) + " and num_groups=" + std::to_string(groups));
  return affine(normalize_rows(x, n * groups, a.real(4)), a.optional_tensor(2), a.optional_tensor(3), x.dim(),
                true);
});
TN_KERNEL("aten::instance_norm", {
  const Tensor& x = a.tensor(0);
  if (!a.boolean(5)) {
    return batch_norm(x, a.optional_tensor(1), a.optional_tensor(2), a.optional_tensor(3),
                      a.optional_tensor(4), false, a.real(6), a.real(7));
  }
  int64_t n = x.size(0), c = x.size(1);
  return affine(normalize_rows(x, n * c, a.real(7)), a.optional_tensor(1), a.optional_tensor(2), x.dim(),
                true);
});
TN_KERNEL("aten::dropout", {
  const Tensor& x = a.tensor(0);
  double p = a.real(1);
  if (p < 0 || p > 1)
    throw Error("dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  if (!a.boolean(2) || p == 0) return x;
  if (p == 1) return op("aten::mul", "Scalar", {x, Scalar(int64_t{0})});
  // Upstream: noise = empty_like(x).bernoulli_(1 - p) / (1 - p); x * noise.
  Tensor noise = Tensor::empty(x.sizes(), x.dtype());
  call_op("aten::bernoulli_", "float", {noise, 1 - p, IValue()});
  noise = op("aten::div", "Scalar", {noise, Scalar(1 - p)});
  return mul(x, noise);
});
TN_KERNEL("aten::pad", {
  return pad(a.tensor(0), a.int_list(1), a.optional_string(2).value_or("constant"),
             a.optional_real(3).value_or(0.0));
});
TN_KERNEL("aten::im2col",
          { return im2col(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.int_list(4)); });
TN_KERNEL("aten::conv2d", {
  return conv2d(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4), a.int_list(5),
                a.integer(6));
});
TN_KERNEL("aten::conv2d.padding", {
  std::string padding = *a.optional_string(4);
  Shape p = padding == "same" ? same_padding(a.tensor(1), a.int_list(5), 2) : Shape{0, 0};
  return conv2d(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3), p, a.int_list(5),
                a.integer(6));
});
TN_KERNEL("aten::conv1d", {
  // A 1-D convolution is a 2-D one over height 1.
  const Tensor& x = a.tensor(0);
  Tensor x2 = op("aten::unsqueeze", "", {x, int64_t{-2}});
  Tensor w2 = op("aten::unsqueeze", "", {a.tensor(1), int64_t{-2}});
  Tensor out = conv2d(x2, w2, a.optional_tensor(2), {1, a.int_list(3)[0]}, {0, a.int_list(4)[0]},
                      {1, a.int_list(5)[0]}, a.integer(6));
  return op("aten::squeeze", "dim", {out, int64_t{-2}});
});
// The generic entry point the functional convolutions decompose into upstream.
TN_KERNEL("aten::convolution", {
  const Tensor &x = a.tensor(0), &weight = a.tensor(1);
  auto bias = a.optional_tensor(2);
  Shape stride = a.int_list(3), padding = a.int_list(4), dilation = a.int_list(5),
        output_padding = a.int_list(7);
  bool transposed = a.boolean(6);
  int64_t groups = a.integer(8);
  int64_t spatial = weight.dim() - 2;
  if (spatial == 1) {
    Tensor x2 = op("aten::unsqueeze", "", {x, int64_t{-2}}),
           w2 = op("aten::unsqueeze", "", {weight, int64_t{-2}});
    Shape s2{1, stride[0]}, p2{0, padding[0]}, d2{1, dilation[0]},
        o2{0, output_padding.empty() ? 0 : output_padding[0]};
    Tensor out = transposed ? conv_transpose2d(x2, w2, bias, s2, p2, o2, groups, d2)
                            : conv2d(x2, w2, bias, s2, p2, d2, groups);
    return op("aten::squeeze", "dim", {out, int64_t{-2}});
  }
  if (spatial != 2)
    throw NotImplemented("torchnative implements aten::convolution for 1-D and 2-D only (got " +
                         std::to_string(spatial) + "-D)");
  if (transposed) return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
});
TN_KERNEL("aten::conv_transpose2d.input", {
  return conv_transpose2d(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4),
                          a.int_list(5), a.integer(6), a.int_list(7));
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
  Tensor x = op("aten::unsqueeze", "", {a.tensor(0), int64_t{-2}});
  Shape stride = a.int_list(2);
  auto [v, i] = max_pool2d(x, {1, a.int_list(1)[0]}, stride.empty() ? Shape{} : Shape{1, stride[0]},
                           {0, a.int_list(3)[0]}, {1, a.int_list(4)[0]}, a.boolean(5));
  return op("aten::squeeze", "dim", {v, int64_t{-2}});
});
TN_KERNEL("aten::avg_pool2d", {
  return avg_pool2d(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.boolean(4), a.boolean(5),
                    a.optional_integer(6));
});
TN_KERNEL("aten::adaptive_avg_pool2d", { return adaptive_pool2d<false>(a.tensor(0), a.int_list(1)).first; });
TN_KERNEL("aten::adaptive_max_pool2d", {
  auto [v, i] = adaptive_pool2d<true>(a.tensor(0), a.int_list(1));
  return IValue::tuple({v, i});
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
TN_KERNEL("aten::pairwise_distance", {
  Tensor diff = add(sub(a.tensor(0), a.tensor(1)), S(a.real(3)));
  int64_t dim = std::max(a.tensor(0).dim(), a.tensor(1).dim()) - 1;
  return p_distance(diff, a.real(2), std::max<int64_t>(dim, 0), a.boolean(4));
});
TN_KERNEL("aten::cdist", {
  const Tensor &x1 = a.tensor(0), &x2 = a.tensor(1);
  if (x1.dim() < 2 || x2.dim() < 2)
    throw Error("cdist only supports at least 2D tensors, X1 got: " + std::to_string(x1.dim()) + "D");
  if (x1.size(-1) != x2.size(-1))
    throw Error("X1 and X2 must have the same number of columns. X1: " + std::to_string(x1.size(-1)) +
                " X2: " + std::to_string(x2.size(-1)));
  Tensor diff =
      sub(op("aten::unsqueeze", "", {x1, int64_t{-2}}), op("aten::unsqueeze", "", {x2, int64_t{-3}}));
  return p_distance(diff, a.real(2), -1, false);
});
// cosine_similarity as upstream (scipy's form): w12 / sqrt(max(w1 * w2, eps^2)).
TN_KERNEL("aten::cosine_similarity", {
  const Tensor &x1 = a.tensor(0), &x2 = a.tensor(1);
  int64_t dim = a.integer(2);
  double eps = a.real(3);
  auto sum = [&](const Tensor& t) {
    return op("aten::sum", "dim_IntList", {t, std::vector<int64_t>{dim}, false, IValue()});
  };
  Tensor w12 = sum(mul(x1, x2)), w1 = sum(mul(x1, x1)), w2 = sum(mul(x2, x2));
  Tensor n12 = op("aten::sqrt", "", {op("aten::clamp_min", "", {mul(w1, w2), Scalar(eps * eps)})});
  return op("aten::div", "Tensor", {w12, n12});
});
TN_KERNEL("aten::tril_indices", {
  return index_pairs(a.integer(0), a.integer(1), a.integer(2), true)
      .to(a.optional_dtype(3).value_or(ScalarType::Long));
});
TN_KERNEL("aten::triu_indices", {
  return index_pairs(a.integer(0), a.integer(1), a.integer(2), false)
      .to(a.optional_dtype(3).value_or(ScalarType::Long));
});
TN_KERNEL("aten::logspace", {
  Tensor exponents =
      op("aten::linspace", "", {a.scalar(0), a.scalar(1), a.integer(2), int64_t(ScalarType::Double)});
  Tensor out = op("aten::pow", "Scalar", {Scalar(a.real(3)), exponents});
  return out.to(a.optional_dtype(4).value_or(default_dtype()));
});
TN_KERNEL("aten::searchsorted.Tensor", {
  bool right = a.boolean(3) || a.optional_string(4).value_or("") == "right";
  if (a.optional_tensor(5))
    throw NotImplemented("torchnative: searchsorted with sorter= is not implemented yet");
  return searchsorted(a.tensor(0), a.tensor(1), a.boolean(2), right);
});
TN_KERNEL("aten::bucketize.Tensor",
          { return searchsorted(a.tensor(1), a.tensor(0), a.boolean(2), a.boolean(3)); });
TN_KERNEL("aten::where", { return call_op("aten::nonzero_numpy", "", {a.tensor(0)}); });
TN_KERNEL("aten::cartesian_prod", {
  auto ts = a.tensor_list(0);
  if (ts.size() == 1) return ts[0];
  auto grids =
      std::get<std::vector<Tensor>>(call_op("aten::meshgrid", "indexing", {ts, std::string("ij")}).value);
  std::vector<Tensor> columns;
  for (const Tensor& g : grids) columns.push_back(op("aten::reshape", "", {g, Shape{-1}}));
  return op("aten::stack", "", {columns, int64_t{1}});
});
TN_KERNEL("aten::combinations", {
  const Tensor& self = a.tensor(0);
  if (self.dim() != 1) throw Error("Expect a 1D vector, but got shape " + shape_str(self.sizes()));
  int64_t r = a.integer(1), n = self.size(0);
  bool with_replacement = a.boolean(2);
  if (r < 0) throw Error("Expect a non-negative number, but got " + std::to_string(r));
  std::vector<std::vector<int64_t>> combos;
  std::vector<int64_t> current;
  std::function<void(int64_t)> walk = [&](int64_t start) {
    if (int64_t(current.size()) == r) {
      combos.push_back(current);
      return;
    }
    for (int64_t i = start; i < n; ++i) {
      current.push_back(i);
      walk(with_replacement ? i : i + 1);
      current.pop_back();
    }
  };
  if (r > 0) walk(0);
  if (r == 0) return Tensor::empty({0}, self.dtype());
  Tensor index = Tensor::empty({int64_t(combos.size()) * r}, ScalarType::Long);
  for (size_t i = 0; i < combos.size(); ++i)
    for (int64_t j = 0; j < r; ++j) index.data_as<int64_t>()[int64_t(i) * r + j] = combos[i][size_t(j)];
  return op("aten::reshape", "",
            {op("aten::index_select", "", {self, int64_t{0}, index}), Shape{int64_t(combos.size()), r}});
});

}  // namespace tn
