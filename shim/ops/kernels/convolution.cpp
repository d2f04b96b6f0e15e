// Convolution: convolution, conv1d, conv2d, conv_transpose2d, im2col, col2im.
#include "convolution.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "common.h"
#include "settings.h"
#include "typed_ops.h"

namespace tn {

namespace {

// Upstream's convolution checks: a zero or negative stride, dilation or kernel extent is
// refused before any output size is computed from it.
void require_positive(const Shape& values, const char* message) {
  for (int64_t v : values)
    if (v <= 0) throw Error(message);
}

// How many positions a window of `kernel` taps, `dilation` apart, takes along `size` elements
// padded by `padding` on each side, moving by `stride`: a convolution's output extent.
int64_t window_positions(int64_t size, int64_t kernel, int64_t padding, int64_t dilation, int64_t stride) {
  return (size + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

// The blocks im2col copies out of an image (N, C, H, W) into columns (N, C*kh*kw, oh*ow) and
// col2im adds back. `visit(column, pixel)` runs for each column element in upstream's loop order
// (batch, block row, block position), pixel the image element's offset or -1 in the padding.
struct Blocks {
  int64_t n, c, h, w;
  const Shape &kernel, &dilation, &padding, &stride;
  int64_t along(size_t axis) const {
    return window_positions(axis == 0 ? h : w, kernel[axis], padding[axis], dilation[axis], stride[axis]);
  }
  template <typename Visit>
  void for_each(Visit&& visit) const {
    int64_t oh = along(0), ow = along(1), rows = c * kernel[0] * kernel[1];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t ch = r / (kernel[0] * kernel[1]), ki = (r / kernel[1]) % kernel[0], kj = r % kernel[1];
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            int64_t iy = y * stride[0] - padding[0] + ki * dilation[0],
                    ix = xx * stride[1] - padding[1] + kj * dilation[1];
            bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
            visit((b * rows + r) * oh * ow + y * ow + xx, inside ? ((b * c + ch) * h + iy) * w + ix : -1);
          }
      }
  }
};

// im2col on (N, C, H, W): (N, C*kh*kw, L) with zero padding.
Tensor im2col(const Tensor& input, const Shape& kernel, const Shape& dilation, const Shape& padding,
              const Shape& stride) {
  if (kernel.size() != 2 || dilation.size() != 2 || padding.size() != 2 || stride.size() != 2)
    throw Error("im2col: kernel_size, dilation, padding and stride must each have 2 values");
  require_positive(stride, "non-positive stride is not supported");
  require_positive(dilation, "dilation should be greater than zero");
  require_positive(kernel, "kernel size should be greater than zero");
  if (input.dim() == 3)
    return ops::squeeze(im2col(ops::unsqueeze(input, 0), kernel, dilation, padding, stride), 0);
  if (input.dim() < 3) wrap_dim(2, input.dim());  // upstream reads size(2) first: its IndexError
  if (input.dim() != 4)
    throw Error(
        "Expected 4D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions");
  Blocks blocks{input.size(0), input.size(1), input.size(2), input.size(3),
                kernel,        dilation,      padding,       stride};
  int64_t oh = blocks.along(0), ow = blocks.along(1);
  if (oh <= 0 || ow <= 0)
    throw Error("Given input with spatial size (" + std::to_string(blocks.h) + ", " +
                std::to_string(blocks.w) + "), kernel_size (" + std::to_string(kernel[0]) + ", " +
                std::to_string(kernel[1]) +
                "), the calculated shape of the array of sliding blocks is non-positive.");
  Tensor x = input.contiguous();
  Tensor out = Tensor::empty({blocks.n, blocks.c * kernel[0] * kernel[1], oh * ow}, input.dtype());
  TN_DISPATCH_ALL_TYPES(input.dtype(), "im2col", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = x.template data_as<scalar_t>();
    scalar_t* o = out.template data_as<scalar_t>();
    blocks.for_each([&](int64_t column, int64_t pixel) { o[column] = pixel >= 0 ? in[pixel] : scalar_t(0); });
  });
  return out;
}

// col2im on (N, C*kh*kw, L): the (N, C, H, W) sums of the blocks' values at their places,
// added in upstream's loop order (block row, then block position) in `accumulate`'s dtype.
Tensor col2im(const Tensor& columns, const Shape& size, const Shape& kernel, const Shape& dilation,
              const Shape& padding, const Shape& stride, ScalarType accumulate) {
  int64_t planes = columns.size(1) / (kernel[0] * kernel[1]);
  Blocks blocks{columns.size(0), planes, size[0], size[1], kernel, dilation, padding, stride};
  Tensor cols = columns.to(accumulate).contiguous();
  Tensor out = ops::zeros({blocks.n, planes, size[0], size[1]}, accumulate);
  TN_DISPATCH_ALL_TYPES(accumulate, "col2im", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* source = cols.template data_as<scalar_t>();
    scalar_t* target = out.template data_as<scalar_t>();
    blocks.for_each([&](int64_t column, int64_t pixel) {
      if (pixel >= 0)
        target[pixel] = scalar_t(compute_t<scalar_t>(target[pixel]) + compute_t<scalar_t>(source[column]));
    });
  });
  return out;
}

// Upstream's col2im_shape_check, in its order and words.
void check_col2im(const Tensor& input, const Shape& size, const Shape& kernel, const Shape& dilation,
                  const Shape& padding, const Shape& stride) {
  auto pair = [](const Shape& v) { return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")"; };
  require_positive(kernel, ("kernel size should be greater than zero, but got kernel_height: " +
                            std::to_string(kernel[0]) + " kernel_width: " + std::to_string(kernel[1]))
                               .c_str());
  require_positive(stride, ("stride should be greater than zero, but got stride_height: " +
                            std::to_string(stride[0]) + " stride_width: " + std::to_string(stride[1]))
                               .c_str());
  require_positive(dilation, ("dilation should be greater than zero, but got dilation_height: " +
                              std::to_string(dilation[0]) + " dilation_width: " + std::to_string(dilation[1]))
                                 .c_str());
  if (padding[0] < 0 || padding[1] < 0)
    throw Error("padding should be non-negative, but got pad_height: " + std::to_string(padding[0]) +
                " pad_width: " + std::to_string(padding[1]));
  int64_t d = input.dim();
  if (!((d == 2 && input.size(0) != 0 && input.size(1) != 0) ||
        (d == 3 && input.size(1) != 0 && input.size(2) != 0)))
    throw Error(
        "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
        "dimensions for input, but got: " +
        shape_str(input.sizes()));
  int64_t planes = input.size(d - 2), length = input.size(d - 1);
  if (planes % (kernel[0] * kernel[1]) != 0)
    throw Error(
        "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
        "input.size(1)=" +
        std::to_string(planes) + " and kernel_size=" + pair(kernel) + ".");
  auto blocks = [&](size_t i) {
    int64_t span = size[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1;
    return (span < 0 ? -((-span + stride[i] - 1) / stride[i]) : span / stride[i]) + 1;  // upstream's div_rtn
  };
  int64_t bh = blocks(0), bw = blocks(1);
  std::string given = "Given output_size=" + pair(size) + ", kernel_size=" + pair(kernel) +
                      ", dilation=" + pair(dilation) + ", padding=" + pair(padding) +
                      ", stride=" + pair(stride);
  if (length != bh * bw)
    throw Error(given +
                ", expected size of input's dimension 2 to match the calculated number of sliding blocks " +
                std::to_string(bh) + " * " + std::to_string(bw) + " = " + std::to_string(bh * bw) +
                ", but got input.size(2)=" + std::to_string(length) + ".");
  if (bh < 1 || bw < 1)
    throw Error(given + ", but calculated shape of the array of sliding blocks as (" + std::to_string(bh) +
                ", " + std::to_string(bw) + "), which is too small (non-positive)");
  if (size[0] < 1 || size[1] < 1)
    throw Error("Expected output spatial size to be positive, but got: output_size=" + pair(size) + ".");
}

// ---- oneDNN: the library upstream's float32 convolution calls (Debian's libdnnl 2.6.3) ----

bool any_not_one(const Shape& values) {
  return std::any_of(values.begin(), values.end(), [](int64_t v) { return v != 1; });
}

// Upstream's suggest_memory_format() == ChannelsLast for a 4-D tensor (is_channels_last_strides_2d):
// strides growing along C, W, H, N, ambiguous size-1 cases taken as contiguous.
bool channels_last(const Tensor& t) {
  const Shape &sizes = t.sizes(), &strides = t.strides();
  if (strides[1] == 0) return false;
  int64_t min = 0;
  for (size_t d : {1, 3, 2, 0}) {
    if (sizes[d] == 0 || strides[d] < min || (d == 0 && min == strides[1])) return false;
    min = sizes[d] > 1 ? strides[d] * sizes[d] : strides[d];
  }
  return true;
}

// Upstream's ConvParams::use_mkldnn for a valid, non-transposed, non-empty float32 convolution
// of a 4-D input (1-D viewed as 2-D), torch.backends.mkldnn.enabled and torch.get_num_threads()
// included: a small 1x1 convolution takes oneDNN only on more than one thread.
bool upstream_uses_onednn(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                          const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups,
                          const Shape& out_sizes) {
  if (!onednn_enabled() || input.dtype() != ScalarType::Float || (bias && bias->dtype() != ScalarType::Float))
    return false;
  if (input.numel() == 0 || weight.numel() == 0) return false;
  // What upstream refuses (negative padding, no output) is refused by the other path's checks.
  if (std::any_of(padding.begin(), padding.end(), [](int64_t p) { return p < 0; }) || out_sizes[2] <= 0 ||
      out_sizes[3] <= 0)
    return false;
  int64_t n = input.size(0), kh = weight.size(2), kw = weight.size(3);
  bool not_a_small_1x1 =
      any_not_one(stride) || any_not_one(dilation) || n >= 16 || kh != 1 || kw != 1 || intra_op_threads() > 1;
  bool native_not_faster = groups > 1 || (kh > 3 && kw > 3) || n > 1 || input.numel() > 20480;
  return not_a_small_1x1 && native_not_faster;
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::dims dims_of(const Shape& shape) { return dnnl::memory::dims(shape.begin(), shape.end()); }

dnnl::memory::desc any_desc(const Shape& shape) {
  return dnnl::memory::desc(dims_of(shape), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A batched 2-D convolution as oneDNN takes it: the weights grouped (g, oc/g, ic/g, kh, kw)
// when groups > 1, the dilation oneDNN's (ours minus one), the padding symmetric; source and
// destination nhwc when upstream's are channels-last (mkldnn_conv_use_channels_last).
struct Geometry {
  Shape src, weights, dst;
  dnnl::memory::dims stride, dilates, padding;
  bool nhwc;
  Shape bias() const { return {dst[1]}; }
};

Geometry geometry(const Shape& input, const Shape& weight, const Shape& out, const Shape& stride,
                  const Shape& padding, const Shape& dilation, int64_t groups, bool nhwc = false) {
  Shape weights = groups > 1 ? Shape{groups, weight[0] / groups, weight[1], weight[2], weight[3]} : weight;
  dnnl::memory::dims dilates;
  for (int64_t d : dilation) dilates.push_back(d - 1);
  return Geometry{input, weights, out, dims_of(stride), dilates, dims_of(padding), nhwc};
}

// The forward primitive as ideep builds it for upstream's mkldnn_convolution: direct
// algorithm, every format `any` (oneDNN picks the blocked layouts, and with them the kernel,
// it picks for upstream), scratchpad owned by the caller. Also the backward ones' hint.
dnnl::convolution_forward::primitive_desc forward_primitive(const Geometry& g, bool bias) {
  using dnnl::algorithm, dnnl::prop_kind, dnnl::convolution_forward;
  auto activation = [&](const Shape& shape) {
    return g.nhwc ? dnnl::memory::desc(dims_of(shape), dnnl::memory::data_type::f32,
                                       dnnl::memory::format_tag::nhwc)
                  : any_desc(shape);
  };
  auto desc = bias ? convolution_forward::desc(prop_kind::forward, algorithm::convolution_direct,
                                               activation(g.src), any_desc(g.weights), any_desc(g.bias()),
                                               activation(g.dst), g.stride, g.dilates, g.padding, g.padding)
                   : convolution_forward::desc(prop_kind::forward, algorithm::convolution_direct,
                                               activation(g.src), any_desc(g.weights), activation(g.dst),
                                               g.stride, g.dilates, g.padding, g.padding);
  return convolution_forward::primitive_desc(desc, user_scratchpad(), cpu_engine());
}

// A tensor's part in a primitive: `shape` is how oneDNN sees it (a contiguous tensor's grouped
// weights; otherwise the tensor's own sizes, with its strides), `chosen` the layout the primitive
// picked for it.
struct Operand {
  int arg;
  Tensor tensor;
  Shape shape;
  dnnl::memory::desc chosen;
};

dnnl::memory user_memory(const Operand& o) {
  Shape strides = o.tensor.sizes() == o.shape ? o.tensor.strides() : contiguous_strides(o.shape);
  dnnl::memory::desc desc(dims_of(o.shape), dnnl::memory::data_type::f32, dims_of(strides));
  return dnnl::memory(desc, cpu_engine(), o.tensor.data());
}

// Runs `primitive` as ideep does: inputs reordered into the layouts it chose (exact copies),
// outputs computed in theirs and reordered into the plain tensors.
void run_primitive(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
                   const std::vector<Operand>& inputs, const std::vector<Operand>& outputs) {
  // oneDNN parallelises its primitives and reorders with OpenMP, on torch.get_num_threads()
  // threads as upstream's (a DataLoader worker sets one before any convolution, so a forked
  // process does not start a team its parent's threads would have to serve).
  omp_set_num_threads(intra_op_threads());
  dnnl::stream stream(cpu_engine());
  Tensor scratch = Tensor::empty({int64_t(scratchpad.get_size())}, ScalarType::Byte);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad, cpu_engine(), scratch.data())}};
  std::vector<std::pair<dnnl::memory, dnnl::memory>> results;  // (in the chosen layout, plain)
  for (const Operand& o : inputs) {
    dnnl::memory plain = user_memory(o);
    args[o.arg] = o.chosen == plain.get_desc() ? plain : dnnl::memory(o.chosen, cpu_engine());
    if (args[o.arg] != plain) dnnl::reorder(plain, args[o.arg]).execute(stream, plain, args[o.arg]);
  }
  for (const Operand& o : outputs) {
    dnnl::memory plain = user_memory(o);
    args[o.arg] = o.chosen == plain.get_desc() ? plain : dnnl::memory(o.chosen, cpu_engine());
    results.emplace_back(args[o.arg], plain);
  }
  primitive.execute(stream, args);
  for (auto& [chosen, plain] : results)
    if (chosen != plain) dnnl::reorder(chosen, plain).execute(stream, chosen, plain);
  stream.wait();
}

// 2-D convolution of a batched input through oneDNN, as upstream's mkldnn_convolution.
Tensor onednn_conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                     const Geometry& g) {
  auto pd = forward_primitive(g, bias.has_value());
  // Channels-last: NHWC memory seen as NCHW, which upstream's output is too.
  auto nhwc = [](const Tensor& t) {
    return ops::permute(ops::permute(t, {0, 2, 3, 1}).contiguous(), {0, 3, 1, 2});
  };
  Tensor x = g.nhwc ? nhwc(input) : input.contiguous();
  Tensor out = g.nhwc
                   ? ops::permute(Tensor::empty({g.dst[0], g.dst[2], g.dst[3], g.dst[1]}, ScalarType::Float),
                                  {0, 3, 1, 2})
                   : Tensor::empty(g.dst, ScalarType::Float);
  std::vector<Operand> inputs{{DNNL_ARG_SRC, x, g.src, pd.src_desc()},
                              {DNNL_ARG_WEIGHTS, weight.contiguous(), g.weights, pd.weights_desc()}};
  if (bias) inputs.push_back({DNNL_ARG_BIAS, bias->contiguous(), g.bias(), pd.bias_desc()});
  run_primitive(dnnl::convolution_forward(pd), pd.scratchpad_desc(), inputs,
                {{DNNL_ARG_DST, out, g.dst, pd.dst_desc()}});
  return out;
}

// The input's gradient as upstream's mkldnn_convolution_backward_input: the backward-data
// primitive, formats `any`, with the forward one (without bias) as its hint.
Tensor onednn_grad_input(const Tensor& grad, const Tensor& weight, const Geometry& g) {
  using dnnl::convolution_backward_data;
  convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, any_desc(g.src),
                                       any_desc(g.weights), any_desc(g.dst), g.stride, g.dilates, g.padding,
                                       g.padding);
  convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), cpu_engine(),
                                               forward_primitive(g, false));
  Tensor grad_input = Tensor::empty(g.src, ScalarType::Float);
  run_primitive(convolution_backward_data(pd), pd.scratchpad_desc(),
                {{DNNL_ARG_DIFF_DST, grad, g.dst, pd.diff_dst_desc()},
                 {DNNL_ARG_WEIGHTS, weight, g.weights, pd.weights_desc()}},
                {{DNNL_ARG_DIFF_SRC, grad_input, g.src, pd.diff_src_desc()}});
  return grad_input;
}

// The weight's gradient, and the bias's when `bias`, as upstream's
// mkldnn_convolution_backward_weights: one backward-weights primitive, the forward one its hint.
std::pair<Tensor, Tensor> onednn_grad_weight(const Tensor& grad, const Tensor& input,
                                             const Shape& weight_sizes, const Geometry& g, bool bias) {
  using dnnl::algorithm, dnnl::convolution_backward_weights;
  auto desc = bias ? convolution_backward_weights::desc(
                         algorithm::convolution_direct, any_desc(g.src), any_desc(g.weights),
                         any_desc(g.bias()), any_desc(g.dst), g.stride, g.dilates, g.padding, g.padding)
                   : convolution_backward_weights::desc(algorithm::convolution_direct, any_desc(g.src),
                                                        any_desc(g.weights), any_desc(g.dst), g.stride,
                                                        g.dilates, g.padding, g.padding);
  convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), cpu_engine(),
                                                  forward_primitive(g, bias));
  Tensor grad_weight = Tensor::empty(weight_sizes, ScalarType::Float);
  Tensor grad_bias = bias ? Tensor::empty(g.bias(), ScalarType::Float) : Tensor();
  std::vector<Operand> outputs{{DNNL_ARG_DIFF_WEIGHTS, grad_weight, g.weights, pd.diff_weights_desc()}};
  if (bias) outputs.push_back({DNNL_ARG_DIFF_BIAS, grad_bias, g.bias(), pd.diff_bias_desc()});
  run_primitive(
      convolution_backward_weights(pd), pd.scratchpad_desc(),
      {{DNNL_ARG_SRC, input, g.src, pd.src_desc()}, {DNNL_ARG_DIFF_DST, grad, g.dst, pd.diff_dst_desc()}},
      outputs);
  return {grad_weight, grad_bias};
}

// 2-D convolution as im2col + GEMM per group, one GEMM per sample as upstream's slow_conv2d:
// a batched matmul would go through bmm, whose small-matrix kernel rounds differently from the
// BLAS GEMM upstream calls.
Tensor gemm_conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups,
                   const Shape& out_sizes) {
  int64_t n = input.size(0), c = input.size(1), oc = weight.size(0), cg = c / groups, og = oc / groups;
  Shape kernel{weight.size(2), weight.size(3)};
  // Upstream's slow_conv2d multiplies a 1x1, unstrided, unpadded convolution's input itself:
  // the same matrix im2col would copy out, without the copy.
  bool columns_are_input = kernel == Shape{1, 1} && !any_not_one(stride) && padding == Shape{0, 0} &&
                           out_sizes[2] > 0 && out_sizes[3] > 0;
  std::vector<Tensor> outputs;
  for (int64_t g = 0; g < groups; ++g) {
    Tensor xg = ops::narrow(input, int64_t{1}, g * cg, cg);
    Tensor cols = columns_are_input ? ops::reshape(xg.contiguous(), Shape{n, cg, out_sizes[2] * out_sizes[3]})
                                    : im2col(xg, kernel, dilation, padding, stride);
    Tensor wg =
        ops::reshape(ops::narrow(weight, int64_t{0}, g * og, og), Shape{og, cg * kernel[0] * kernel[1]});
    std::vector<Tensor> per_sample;
    for (int64_t i = 0; i < n; ++i) per_sample.push_back(ops::mm(wg, ops::select(cols, int64_t{0}, i)));
    outputs.push_back(ops::stack(per_sample, int64_t{0}));  // (N, og, L)
  }
  Tensor out = ops::reshape(ops::cat(outputs, int64_t{1}), out_sizes);
  return bias ? ops::add(out, per_channel(*bias, 4)) : out;
}

// The output's sizes of a batched 2-D convolution (stride and dilation positive).
Shape conv2d_output_sizes(const Tensor& input, const Tensor& weight, const Shape& stride,
                          const Shape& padding, const Shape& dilation) {
  Shape sizes{input.size(0), weight.size(0)};
  for (size_t i = 0; i < 2; ++i)
    sizes.push_back(
        window_positions(input.size(2 + i), weight.size(2 + i), padding[i], dilation[i], stride[i]));
  return sizes;
}

// 2-D convolution: through oneDNN where upstream's is, else im2col + GEMM.
Tensor conv2d(const Tensor& input_in, const Tensor& weight, const std::optional<Tensor>& bias, Shape stride,
              Shape padding, Shape dilation, int64_t groups) {
  bool batched = input_in.dim() == 4;
  if (input_in.dim() != 3 && input_in.dim() != 4)
    throw Error("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: " +
                shape_str(input_in.sizes()));
  Tensor input = batched ? input_in : ops::unsqueeze(input_in, int64_t{0});
  if (weight.dim() != 4) throw Error("conv2d: weight should be 4-D");
  int64_t c = input.size(1);
  if (c != weight.size(1) * groups)
    throw Error("Given groups=" + std::to_string(groups) + ", weight of size " + shape_str(weight.sizes()) +
                ", expected input" + shape_str(input.sizes()) + " to have " +
                std::to_string(weight.size(1) * groups) + " channels, but got " + std::to_string(c) +
                " channels instead");
  if (input.dtype() != weight.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(input.dtype()) + " but found " +
                upstream_type_name(weight.dtype()));
  if (input.dtype() == ScalarType::Half) dtype_not_implemented("slow_conv2d_cpu", input.dtype());
  if (groups <= 0) throw Error("non-positive groups is not supported");
  require_positive(stride, "non-positive stride is not supported");
  require_positive(dilation, "dilation should be greater than zero");
  Shape out_sizes = conv2d_output_sizes(input, weight, stride, padding, dilation);
  Tensor out = upstream_uses_onednn(input, weight, bias, stride, padding, dilation, groups, out_sizes)
                   ? onednn_conv2d(input, weight, bias,
                                   geometry(input.sizes(), weight.sizes(), out_sizes, stride, padding,
                                            dilation, groups, channels_last(input) || channels_last(weight)))
                   : gemm_conv2d(input, weight, bias, stride, padding, dilation, groups, out_sizes);
  return batched ? out : ops::squeeze(out, int64_t{0});
}

// Transposed 2-D convolution: per group, W^T @ X gives columns that col2im scatters
// (sums) into the output.
Tensor conv_transpose2d(const Tensor& input_in, const Tensor& weight, const std::optional<Tensor>& bias,
                        Shape stride, Shape padding, Shape output_padding, int64_t groups, Shape dilation) {
  if (groups <= 0) throw Error("non-positive groups is not supported");
  require_positive(stride, "non-positive stride is not supported");
  bool batched = input_in.dim() == 4;
  Tensor input = (batched ? input_in : ops::unsqueeze(input_in, int64_t{0})).contiguous();
  if (weight.dim() != 4) throw Error("conv_transpose2d: weight should be 4-D");
  if (input.dtype() == ScalarType::Half) dtype_not_implemented("slow_conv_transpose2d_cpu", input.dtype());
  int64_t n = input.size(0), cin = input.size(1), h = input.size(2), w = input.size(3);
  if (cin != weight.size(0))
    throw Error("Given transposed=1, weight of size " + shape_str(weight.sizes()) + ", expected input" +
                shape_str(input.sizes()) + " to have " + std::to_string(weight.size(0)) +
                " channels, but got " + std::to_string(cin) + " channels instead");
  int64_t kh = weight.size(2), kw = weight.size(3), cog = weight.size(1), cig = cin / groups;
  int64_t oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1;
  int64_t ow = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1;
  // Each group's columns summed into its output channels in double, rounded once.
  std::vector<Tensor> outputs;
  for (int64_t g = 0; g < groups; ++g) {
    Tensor wg = ops::reshape(ops::narrow(weight, int64_t{0}, g * cig, cig), Shape{cig, cog * kh * kw});
    Tensor xg = ops::reshape(ops::narrow(input, int64_t{1}, g * cig, cig), Shape{n, cig, h * w});
    Tensor cols = ops::matmul(ops::t(wg), xg);  // (n, cog*kh*kw, h*w)
    outputs.push_back(col2im(cols, {oh, ow}, {kh, kw}, dilation, padding, stride, ScalarType::Double));
  }
  Tensor out = ops::cat(outputs, int64_t{1});
  Tensor result = out.to(input.dtype());
  if (bias) result = ops::add(result, per_channel(*bias, 4));
  return batched ? result : ops::squeeze(result, int64_t{0});
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

// Whether upstream's convolution_backward takes the oneDNN path for these (2-D) arguments,
// the shapes consistent with a forward call.
bool onednn_backward_applies(const Tensor& grad, const Tensor& input, const Tensor& weight, bool transposed,
                             const Shape& stride, const Shape& padding, const Shape& dilation,
                             int64_t groups) {
  auto positive = [](const Shape& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  };
  if (transposed || input.dim() != 4 || weight.dim() != 4 || grad.dtype() != ScalarType::Float ||
      weight.dtype() != ScalarType::Float || groups <= 0 || input.size(1) != weight.size(1) * groups ||
      weight.size(0) % groups != 0 || !positive(stride) || !positive(dilation))
    return false;
  Shape out_sizes = conv2d_output_sizes(input, weight, stride, padding, dilation);
  return grad.sizes() == out_sizes &&
         upstream_uses_onednn(input, weight, std::nullopt, stride, padding, dilation, groups, out_sizes);
}

}  // namespace

bool onednn_convolution_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                 const Shape& stride, const Shape& padding, const Shape& dilation,
                                 int64_t groups) {
  return onednn_backward_applies(grad, input, weight, false, stride, padding, dilation, groups) &&
         !channels_last(input) && !channels_last(weight);
}

TN_KERNEL("aten::im2col",
          { return im2col(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.int_list(4)); });
TN_KERNEL("aten::col2im", {
  const Tensor& input = a.tensor(0);
  Shape size = a.int_list(1), kernel = a.int_list(2), dilation = a.int_list(3), padding = a.int_list(4),
        stride = a.int_list(5);
  check_col2im(input, size, kernel, dilation, padding, stride);
  if (!is_floating(input.dtype())) dtype_not_implemented("col2im_out_cpu", input.dtype());
  if (input.dim() == 2)
    return ops::squeeze(
        col2im(ops::unsqueeze(input, 0), size, kernel, dilation, padding, stride, input.dtype()), 0);
  return col2im(input, size, kernel, dilation, padding, stride, input.dtype());
});
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
  // A 1-D convolution is a 2-D one over height 1, of a contiguous input as upstream's (so never
  // channels-last).
  Tensor x2 = ops::unsqueeze(a.tensor(0).contiguous(), int64_t{-2});
  Tensor w2 = ops::unsqueeze(a.tensor(1), int64_t{-2});
  Tensor out = conv2d(x2, w2, a.optional_tensor(2), {1, a.int_list(3)[0]}, {0, a.int_list(4)[0]},
                      {1, a.int_list(5)[0]}, a.integer(6));
  return ops::squeeze(out, int64_t{-2});
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
    Tensor x2 = ops::unsqueeze(x.contiguous(), int64_t{-2}), w2 = ops::unsqueeze(weight, int64_t{-2});
    Shape s2{1, stride[0]}, p2{0, padding[0]}, d2{1, dilation[0]},
        o2{0, output_padding.empty() ? 0 : output_padding[0]};
    Tensor out = transposed ? conv_transpose2d(x2, w2, bias, s2, p2, o2, groups, d2)
                            : conv2d(x2, w2, bias, s2, p2, d2, groups);
    return ops::squeeze(out, int64_t{-2});
  }
  if (spatial != 2)
    throw NotImplemented("torchnative implements aten::convolution for 1-D and 2-D only (got " +
                         std::to_string(spatial) + "-D)");
  if (transposed) return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
});
// convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
// transposed, output_padding, groups, output_mask) where upstream's backend is oneDNN: its
// mkldnn_convolution_backward, 1-D as 2-D over height 1 as upstream views it.
TN_KERNEL("aten::convolution_backward", {
  bool one_dimensional = a.tensor(2).dim() == 3;
  auto is_4d_channels_last = [](const Tensor& t) { return t.dim() == 4 && channels_last(t); };
  if (is_4d_channels_last(a.tensor(1)) || is_4d_channels_last(a.tensor(2)))
    throw NotImplemented(
        "torchnative does not implement aten::convolution_backward for channels-last tensors yet (upstream's "
        "oneDNN nhwc path)");
  auto as_2d = [&](const Tensor& t) { return one_dimensional ? ops::unsqueeze(t, int64_t{-2}) : t; };
  Tensor grad = as_2d(a.tensor(0)).contiguous(), input = as_2d(a.tensor(1)).contiguous(),
         weight = as_2d(a.tensor(2)).contiguous();
  Shape stride = a.int_list(4), padding = a.int_list(5), dilation = a.int_list(6);
  if (one_dimensional) stride = {1, stride[0]}, padding = {0, padding[0]}, dilation = {1, dilation[0]};
  int64_t groups = a.integer(9);
  if (!onednn_backward_applies(grad, input, weight, a.boolean(7), stride, padding, dilation, groups))
    throw NotImplemented(
        "torchnative implements aten::convolution_backward only where upstream's backend is oneDNN (float32, "
        "not transposed, upstream's use_mkldnn); the other convolutions' gradients come from their "
        "derivatives");
  Geometry g = geometry(input.sizes(), weight.sizes(), grad.sizes(), stride, padding, dilation, groups);
  auto as_given = [&](const Tensor& t) { return one_dimensional ? ops::squeeze(t, int64_t{-2}) : t; };
  const auto& mask = a[10].get<std::vector<bool>>();
  Stack out{IValue(), IValue(), IValue()};
  if (mask[0]) out[0] = as_given(onednn_grad_input(grad, weight, g));
  if (mask[1] || mask[2]) {
    auto [grad_weight, grad_bias] = onednn_grad_weight(grad, input, weight.sizes(), g, mask[2]);
    // Upstream returns it also when only the bias's was asked for, then as oneDNN's 2-D one.
    out[1] = mask[1] ? as_given(grad_weight) : grad_weight;
    if (mask[2]) out[2] = grad_bias;
  }
  return IValue::tuple(out);
});
TN_KERNEL("aten::conv_transpose2d.input", {
  return conv_transpose2d(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4),
                          a.int_list(5), a.integer(6), a.int_list(7));
});

}  // namespace tn
