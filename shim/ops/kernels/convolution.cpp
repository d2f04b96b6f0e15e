// Convolution: convolution, conv1d, conv2d, conv3d (padding='same' included), conv_transpose1d,
// conv_transpose2d, convolution_backward, im2col, col2im.
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
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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
// of a 4-D (1-D viewed as 2-D) or 5-D input, torch.backends.mkldnn.enabled and
// torch.get_num_threads() included: a small 1x1 convolution takes oneDNN only on more than one
// thread. Its sizes are the last two of the kernel and the first four of the input, whatever
// the rank.
bool upstream_uses_onednn(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                          const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups,
                          const Shape& out_sizes) {
  if (!onednn_usable() || input.dtype() != ScalarType::Float || (bias && bias->dtype() != ScalarType::Float))
    return false;
  if (input.numel() == 0 || weight.numel() == 0) return false;
  // What upstream refuses (negative padding, no output) is refused by the other path's checks.
  if (std::any_of(padding.begin(), padding.end(), [](int64_t p) { return p < 0; }) ||
      std::any_of(out_sizes.begin() + 2, out_sizes.end(), [](int64_t s) { return s <= 0; }))
    return false;
  int64_t n = input.size(0), kh = weight.size(-2), kw = weight.size(-1);
  bool not_a_small_1x1 =
      any_not_one(stride) || any_not_one(dilation) || n >= 16 || kh != 1 || kw != 1 || intra_op_threads() > 1;
  bool native_not_faster = groups > 1 || (kh > 3 && kw > 3) || n > 1 ||
                           input.size(0) * input.size(1) * input.size(2) * input.size(3) > 20480;
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

// A batched 2-D or 3-D convolution as oneDNN takes it: the weights grouped (g, oc/g, ic/g,
// [kd,] kh, kw) when groups > 1, the dilation oneDNN's (ours minus one), the padding symmetric;
// source and destination nhwc when upstream's are channels-last (mkldnn_conv_use_channels_last,
// 2-D only: upstream keeps a 3-D convolution's memory contiguous).
struct Geometry {
  Shape src, weights, dst;
  dnnl::memory::dims stride, dilates, padding;
  bool nhwc;
  Shape bias() const { return {dst[1]}; }
};

Geometry geometry(const Shape& input, const Shape& weight, const Shape& out, const Shape& stride,
                  const Shape& padding, const Shape& dilation, int64_t groups, bool nhwc = false) {
  Shape weights = weight;
  if (groups > 1) {
    weights = {groups, weight[0] / groups};
    weights.insert(weights.end(), weight.begin() + 1, weight.end());
  }
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
  // The chosen layouts' copies in tensors' memory, not oneDNN's own (malloc'd, they were up to
  // 200 MiB of a resnet18 step's heap, left resident between steps), held until the end.
  std::vector<Tensor> copies;
  auto in_chosen_layout = [&](const Operand& o, const dnnl::memory& plain) {
    if (o.chosen == plain.get_desc()) return plain;
    copies.push_back(Tensor::empty({int64_t(o.chosen.get_size())}, ScalarType::Byte));
    return dnnl::memory(o.chosen, cpu_engine(), copies.back().data());
  };
  for (const Operand& o : inputs) {
    dnnl::memory plain = user_memory(o);
    args[o.arg] = in_chosen_layout(o, plain);
    if (args[o.arg] != plain) dnnl::reorder(plain, args[o.arg]).execute(stream, plain, args[o.arg]);
  }
  for (const Operand& o : outputs) {
    dnnl::memory plain = user_memory(o);
    args[o.arg] = in_chosen_layout(o, plain);
    results.emplace_back(args[o.arg], plain);
  }
  primitive.execute(stream, args);
  for (auto& [chosen, plain] : results)
    if (chosen != plain) dnnl::reorder(chosen, plain).execute(stream, chosen, plain);
  stream.wait();
}

// 2-D or 3-D convolution of a batched input through oneDNN, as upstream's mkldnn_convolution.
Tensor onednn_convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
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
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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

// 2-D convolution as im2col + GEMM per group, one GEMM per sample into the bias as upstream's slow_conv2d:
// a batched matmul would go through bmm, whose small-matrix kernel rounds differently from the
// BLAS GEMM upstream calls. Each GEMM writes its block of the output in place (a group's
// channels of one sample are og contiguous rows), with no per-sample temporaries.
Tensor gemm_conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups,
                   const Shape& out_sizes) {
  int64_t n = input.size(0), c = input.size(1), oc = weight.size(0), cg = c / groups, og = oc / groups;
  Shape kernel{weight.size(2), weight.size(3)};
  // On meta, the contiguous result of the per-sample GEMMs below, in the input's dtype.
  if (input.is_meta()) return Tensor::empty(out_sizes, input.dtype());
  // Upstream's slow_conv2d multiplies a 1x1, unstrided, unpadded convolution's input itself:
  // the same matrix im2col would copy out, without the copy.
  bool columns_are_input = kernel == Shape{1, 1} && !any_not_one(stride) && padding == Shape{0, 0} &&
                           out_sizes[2] > 0 && out_sizes[3] > 0;
  int64_t positions = out_sizes[2] * out_sizes[3];
  Tensor out = Tensor::empty({n, oc, positions}, input.dtype());
  for (int64_t g = 0; g < groups; ++g) {
    Tensor xg = ops::narrow(input, int64_t{1}, g * cg, cg);
    Tensor cols = columns_are_input ? ops::reshape(xg.contiguous(), Shape{n, cg, positions})
                                    : im2col(xg, kernel, dilation, padding, stride);
    Tensor wg =
        ops::reshape(ops::narrow(weight, int64_t{0}, g * og, og), Shape{og, cg * kernel[0] * kernel[1]});
    // The output holds the bias first, and the GEMM adds to it (beta 1), as upstream's.
    std::optional<Tensor> bg;
    if (bias) bg = ops::unsqueeze(ops::narrow(bias->to(input.dtype()), int64_t{0}, g * og, og), int64_t{1});
    for (int64_t i = 0; i < n; ++i) {
      Tensor block = ops::narrow(ops::select(out, int64_t{0}, i), int64_t{0}, g * og, og);
      if (bg)
        block.copy_from(*bg);
      else if (cg * kernel[0] * kernel[1] == 0)
        block.copy_from(scalar_tensor(Scalar(int64_t{0})));
      gemm(block, wg, ops::select(cols, int64_t{0}, i), Scalar(int64_t{bg ? 1 : 0}), Scalar(int64_t{1}));
    }
  }
  return ops::reshape(out, out_sizes);
}

// The output's sizes of a batched convolution (stride and dilation positive).
Shape conv_output_sizes(const Tensor& input, const Tensor& weight, const Shape& stride, const Shape& padding,
                        const Shape& dilation) {
  Shape sizes{input.size(0), weight.size(0)};
  for (size_t i = 0; i + 2 < size_t(weight.dim()); ++i)
    sizes.push_back(window_positions(input.size(int64_t(2 + i)), weight.size(int64_t(2 + i)), padding[i],
                                     dilation[i], stride[i]));
  return sizes;
}

std::string joined(const Shape& values, const char* separator) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? separator : "") + std::to_string(values[i]);
  return out;
}

// Upstream's check_shape_forward's last check: the dilated kernel fits the padded input.
void check_kernel_fits(const Tensor& input, const Tensor& weight, const Shape& padding,
                       const Shape& dilation) {
  Shape padded, kernel;
  bool fits = true;
  for (size_t i = 0; i + 2 < size_t(weight.dim()); ++i) {
    padded.push_back(input.size(int64_t(2 + i)) + 2 * padding[i]);
    kernel.push_back(dilation[i] * (weight.size(int64_t(2 + i)) - 1) + 1);
    fits = fits && padded.back() >= kernel.back();
  }
  if (!fits)
    throw Error("Calculated padded input size per channel: (" + joined(padded, " x ") + "). Kernel size: (" +
                joined(kernel, " x ") + "). Kernel size can't be greater than actual input size");
}

// Upstream's Empty backend: a batch of no samples, or an input of no channels, reaches no
// kernel; the output has the convolution's sizes (no channels for an input of none).
Tensor empty_convolution(const Tensor& input, const Tensor& weight, const Shape& stride, const Shape& padding,
                         const Shape& dilation) {
  check_kernel_fits(input, weight, padding, dilation);
  Shape sizes = conv_output_sizes(input, weight, stride, padding, dilation);
  if (input.size(1) == 0) sizes[1] = 0;
  return Tensor::empty(sizes, input.dtype());
}

// Upstream's expand_param_if_needed: one value for every spatial dim, or one per dim.
Shape expand_param(const Shape& values, const char* name, int64_t dims) {
  if (values.size() == 1) return Shape(size_t(dims), values[0]);
  if (int64_t(values.size()) != dims)
    throw Error(std::string("expected ") + name + " to be a single integer value or a list of " +
                std::to_string(dims) + " values to match the convolution dimensions, but got " + name + "=" +
                shape_str(values));
  return values;
}

// Upstream's _convolution checks of a batched, not transposed convolution, in its order and
// words (groups, then check_shape_forward).
void check_convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  auto any = [](const Shape& v, auto predicate) { return std::any_of(v.begin(), v.end(), predicate); };
  if (any(padding, [](int64_t p) { return p < 0; })) throw Error("negative padding is not supported");
  if (any(stride, [](int64_t s) { return s <= 0; })) throw Error("non-positive stride is not supported");
  if (any(dilation, [](int64_t d) { return d <= 0; })) throw Error("non-positive dilation is not supported");
  std::string w = shape_str(weight.sizes()), g = std::to_string(groups);
  if (weight.dim() != input.dim())
    throw Error("Expected " + std::to_string(weight.dim()) + "-dimensional input for " +
                std::to_string(weight.dim()) + "-dimensional weight " + w + ", but got " +
                std::to_string(input.dim()) + "-dimensional input of size " + shape_str(input.sizes()) +
                " instead");
  if (weight.size(0) < groups)
    throw Error("Given groups=" + g + ", expected weight to be at least " + g +
                " at dimension 0, but got weight of size " + w + " instead");
  if (weight.size(0) % groups != 0)
    throw Error("Given groups=" + g + ", expected weight to be divisible by " + g +
                " at dimension 0, but got weight of size " + w + " instead");
  if (input.size(1) != weight.size(1) * groups)
    throw Error("Given groups=" + g + ", weight of size " + w + ", expected input" +
                shape_str(input.sizes()) + " to have " + std::to_string(weight.size(1) * groups) +
                " channels, but got " + std::to_string(input.size(1)) + " channels instead");
  if (bias && !(bias->dim() == 1 && bias->size(0) == weight.size(0)))
    throw Error("Given weight of size " + w + ", expected bias to be 1-dimensional with " +
                std::to_string(weight.size(0)) + " elements, but got bias of size " +
                shape_str(bias->sizes()) + " instead");
  check_kernel_fits(input, weight, padding, dilation);
}

// One sample's sliding blocks of a 3-D convolution, (C, D, H, W) against columns
// (C*kd*kh*kw, od*oh*ow): `visit(column, voxel)` for each column element in upstream's loop
// order (Unfold3dCopy/Unfold3dAcc, vol2col/col2vol: block row, then block position), voxel the
// volume element's offset or -1 in the padding.
struct Volume {
  int64_t c;
  const Shape &size, &out, &kernel, &dilation, &padding, &stride;
  template <typename Visit>
  void for_each(Visit&& visit) const {
    int64_t taps = kernel[0] * kernel[1] * kernel[2], cells = out[0] * out[1] * out[2];
    for (int64_t r = 0; r < c * taps; ++r) {
      int64_t ch = r / taps, kd = (r / (kernel[1] * kernel[2])) % kernel[0], kh = (r / kernel[2]) % kernel[1],
              kw = r % kernel[2];
      for (int64_t z = 0; z < out[0]; ++z) {
        int64_t iz = z * stride[0] - padding[0] + kd * dilation[0];
        for (int64_t y = 0; y < out[1]; ++y) {
          int64_t iy = y * stride[1] - padding[1] + kh * dilation[1];
          for (int64_t x = 0; x < out[2]; ++x) {
            int64_t ix = x * stride[2] - padding[2] + kw * dilation[2];
            bool inside = iz >= 0 && iz < size[0] && iy >= 0 && iy < size[1] && ix >= 0 && ix < size[2];
            visit(r * cells + (z * out[1] + y) * out[2] + x,
                  inside ? ((ch * size[0] + iz) * size[1] + iy) * size[2] + ix : -1);
          }
        }
      }
    }
  }
};

// vol2col of one contiguous sample (C, D, H, W): its columns (C*kd*kh*kw, od*oh*ow), zero in the padding.
Tensor vol2col(const Tensor& sample, const Shape& out, const Shape& kernel, const Shape& dilation,
               const Shape& padding, const Shape& stride) {
  Shape size{sample.size(1), sample.size(2), sample.size(3)};
  Volume volume{sample.size(0), size, out, kernel, dilation, padding, stride};
  Tensor columns = Tensor::empty(
      {sample.size(0) * kernel[0] * kernel[1] * kernel[2], out[0] * out[1] * out[2]}, sample.dtype());
  TN_DISPATCH_ALL_TYPES(sample.dtype(), "vol2col", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = sample.template data_as<scalar_t>();
    scalar_t* o = columns.template data_as<scalar_t>();
    volume.for_each([&](int64_t column, int64_t voxel) { o[column] = voxel >= 0 ? in[voxel] : scalar_t(0); });
  });
  return columns;
}

// col2vol into one contiguous sample `target` (C, D, H, W): zeroed, then every column element
// added at its place in upstream's order, in the dtype.
void col2vol(const Tensor& columns, const Tensor& target, const Shape& kernel, const Shape& dilation,
             const Shape& padding, const Shape& stride, const Shape& out) {
  Shape size{target.size(1), target.size(2), target.size(3)};
  Volume volume{target.size(0), size, out, kernel, dilation, padding, stride};
  TN_DISPATCH_ALL_TYPES(target.dtype(), "col2vol", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* source = columns.template data_as<scalar_t>();
    scalar_t* t = target.template data_as<scalar_t>();
    std::fill(t, t + target.numel(), scalar_t(0));
    volume.for_each([&](int64_t column, int64_t voxel) {
      if (voxel >= 0)
        t[voxel] = scalar_t(compute_t<scalar_t>(t[voxel]) + compute_t<scalar_t>(source[column]));
    });
  });
}

// The spatial part of a 3-D convolution's sizes.
Shape spatial_of(const Shape& sizes) { return Shape(sizes.begin() + 2, sizes.end()); }

int64_t product(const Shape& values) {
  int64_t p = 1;
  for (int64_t v : values) p *= v;
  return p;
}

// 3-D convolution as upstream's slow_conv3d (and slow_conv_dilated3d: the same products):
// per sample its columns (vol2col), and per group one GEMM into the output, which holds the
// bias first when there is one (beta 1), as upstream's.
Tensor gemm_conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups,
                   const Shape& out_sizes) {
  int64_t n = input.size(0), oc = weight.size(0), og = oc / groups;
  Shape kernel = spatial_of(weight.sizes()), out = spatial_of(out_sizes);
  int64_t rows = weight.size(1) * product(kernel), cells = product(out);
  Tensor x = input.contiguous(), w2 = ops::reshape(weight.contiguous(), Shape{oc, rows});
  // Upstream copies the bias into the output: in the input's dtype.
  std::optional<Tensor> b;
  if (bias) b = ops::unsqueeze(bias->to(input.dtype()), int64_t{1});
  Tensor result = Tensor::empty({n, oc, cells}, input.dtype());
  if (result.is_meta()) return ops::reshape(result, out_sizes);
  for (int64_t i = 0; i < n; ++i) {
    Tensor columns = vol2col(ops::select(x, int64_t{0}, i), out, kernel, dilation, padding, stride);
    for (int64_t g = 0; g < groups; ++g) {
      Tensor wg = ops::narrow(w2, int64_t{0}, g * og, og),
             cg = ops::narrow(columns, int64_t{0}, g * rows, rows);
      Tensor block = b ? ops::addmm(ops::narrow(*b, int64_t{0}, g * og, og), wg, cg, Scalar(int64_t{1}),
                                    Scalar(int64_t{1}))
                       : ops::mm(wg, cg);
      ops::narrow(ops::select(result, int64_t{0}, i), int64_t{0}, g * og, og).copy_from(block);
    }
  }
  return ops::reshape(result, out_sizes);
}

// The bias's gradient as upstream's slow backends sum it: over all but the channels, per group
// where the backend takes the groups one by one (each its own call on the group's channels,
// made contiguous), the groups' sums concatenated.
Tensor bias_grad(const Tensor& grad, int64_t groups, bool per_group) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < grad.dim(); ++d) dims.push_back(d);
  if (!per_group || groups == 1) return ops::sum(grad, dims, false, std::nullopt);
  int64_t og = grad.size(1) / groups;
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < groups; ++g)
    parts.push_back(
        ops::sum(ops::narrow(grad, int64_t{1}, g * og, og).contiguous(), dims, false, std::nullopt));
  return ops::cat(parts, int64_t{0});
}

// The gradients of gemm_conv3d as upstream's slow_conv3d_backward (slow_conv_dilated3d's when
// dilated), those `mask` asks for: the input's per sample, W^T g summed back into place
// (col2vol, in the dtype); the weight's g columns^T accumulated sample after sample by GEMMs
// with beta 1; the bias's as bias_grad sums it.
std::array<Tensor, 3> gemm_conv3d_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                           const Shape& stride, const Shape& padding, const Shape& dilation,
                                           int64_t groups, const std::vector<bool>& mask) {
  int64_t n = input.size(0), oc = weight.size(0), og = oc / groups;
  Shape kernel = spatial_of(weight.sizes()), out = spatial_of(grad.sizes());
  int64_t rows = weight.size(1) * product(kernel), cells = product(out);
  ScalarType dtype = input.dtype();
  Tensor x = input.contiguous(), w2 = ops::reshape(weight.contiguous(), Shape{oc, rows}),
         g3 = ops::reshape(grad.contiguous(), Shape{n, oc, cells});
  auto grad_of = [&](int64_t i, int64_t g) {
    return ops::narrow(ops::select(g3, int64_t{0}, i), int64_t{0}, g * og, og);
  };
  std::array<Tensor, 3> result;
  if (mask[0]) {
    result[0] = Tensor::empty(input.sizes(), dtype);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<Tensor> parts;
      for (int64_t g = 0; g < groups; ++g)
        parts.push_back(ops::mm(ops::t(ops::narrow(w2, int64_t{0}, g * og, og)), grad_of(i, g)));
      Tensor columns = groups == 1 ? parts[0] : ops::cat(parts, int64_t{0});
      col2vol(columns, ops::select(result[0], int64_t{0}, i), kernel, dilation, padding, stride, out);
    }
  }
  if (mask[1]) {
    Tensor gw = ops::zeros({oc, rows}, dtype);
    for (int64_t i = 0; i < n; ++i) {
      Tensor columns = vol2col(ops::select(x, int64_t{0}, i), out, kernel, dilation, padding, stride);
      for (int64_t g = 0; g < groups; ++g) {
        Tensor part = ops::narrow(gw, int64_t{0}, g * og, og);
        part.copy_from(ops::addmm(part, grad_of(i, g),
                                  ops::t(ops::narrow(columns, int64_t{0}, g * rows, rows)),
                                  Scalar(int64_t{1}), Scalar(int64_t{1})));
      }
    }
    result[1] = ops::reshape(gw, weight.sizes());
  }
  // slow_conv_dilated3d takes the groups one by one; slow_conv3d all at once.
  if (mask[2]) result[2] = bias_grad(grad, groups, any_not_one(dilation));
  return result;
}

// 3-D convolution of a batched input: through oneDNN where upstream's use_mkldnn sends it, else
// as upstream's slow_conv3d; an empty batch as upstream's Empty backend.
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const Shape& stride_in, const Shape& padding_in, const Shape& dilation_in, int64_t groups) {
  if (groups <= 0) throw Error("non-positive groups is not supported");
  Shape stride = expand_param(stride_in, "stride", 3), padding = expand_param(padding_in, "padding", 3),
        dilation = expand_param(dilation_in, "dilation", 3);
  check_convolution(input, weight, bias, stride, padding, dilation, groups);
  if (input.size(0) == 0 || input.size(1) == 0)
    return empty_convolution(input, weight, stride, padding, dilation);
  if (input.dtype() != weight.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(input.dtype()) + " but found " +
                upstream_type_name(weight.dtype()));
  if (input.dtype() == ScalarType::Half || input.dtype() == ScalarType::Bool)
    dtype_not_implemented("compute_columns3d", input.dtype());
  Shape out_sizes = conv_output_sizes(input, weight, stride, padding, dilation);
  if (upstream_uses_onednn(input, weight, bias, stride, padding, dilation, groups, out_sizes))
    return onednn_convolution(
        input, weight, bias,
        geometry(input.sizes(), weight.sizes(), out_sizes, stride, padding, dilation, groups));
  return gemm_conv3d(input, weight, bias, stride, padding, dilation, groups, out_sizes);
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
  if (input.size(0) == 0 || c == 0) {
    Tensor out = empty_convolution(input, weight, stride, padding, dilation);
    return batched ? out : ops::squeeze(out, int64_t{0});
  }
  Shape out_sizes = conv_output_sizes(input, weight, stride, padding, dilation);
  Tensor out =
      upstream_uses_onednn(input, weight, bias, stride, padding, dilation, groups, out_sizes)
          ? onednn_convolution(input, weight, bias,
                               geometry(input.sizes(), weight.sizes(), out_sizes, stride, padding, dilation,
                                        groups, channels_last(input) || channels_last(weight)))
          : gemm_conv2d(input, weight, bias, stride, padding, dilation, groups, out_sizes);
  return batched ? out : ops::squeeze(out, int64_t{0});
}

// Transposed 2-D convolution: per sample and group, W^T @ X gives columns that col2im scatters
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
  // Upstream's slow_conv_transpose2d_shape_check (an empty batch never reaches it).
  if (n > 0 && !((output_padding[1] < stride[1] || output_padding[1] < dilation[1]) &&
                 (output_padding[0] < stride[0] || output_padding[0] < dilation[0])))
    throw Error(
        "output padding must be smaller than either stride or dilation, but got output_padding_height: " +
        std::to_string(output_padding[0]) + " output_padding_width: " + std::to_string(output_padding[1]) +
        " stride_height: " + std::to_string(stride[0]) + " stride_width: " + std::to_string(stride[1]) +
        " dilation_height: " + std::to_string(dilation[0]) +
        " dilation_width: " + std::to_string(dilation[1]));
  int64_t kh = weight.size(2), kw = weight.size(3), cog = weight.size(1), cig = cin / groups;
  int64_t oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1;
  int64_t ow = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1;
  // As upstream's slow_conv_transpose2d: per sample and group, the columns W^T x (one GEMM)
  // summed into place by col2im in the dtype; the bias added after.
  Tensor result = Tensor::empty({n, weight.size(1) * groups, oh, ow}, input.dtype());
  for (int64_t g = 0; g < groups; ++g) {
    Tensor wg = ops::reshape(ops::narrow(weight, int64_t{0}, g * cig, cig), Shape{cig, cog * kh * kw});
    Tensor xg = ops::reshape(ops::narrow(input, int64_t{1}, g * cig, cig), Shape{n, cig, h * w});
    for (int64_t i = 0; i < n; ++i) {
      Tensor cols = ops::unsqueeze(ops::mm(ops::t(wg), ops::select(xg, int64_t{0}, i)), int64_t{0});
      ops::narrow(ops::select(result, int64_t{0}, i), int64_t{0}, g * cog, cog)
          .copy_from(ops::squeeze(col2im(cols, {oh, ow}, {kh, kw}, dilation, padding, stride, input.dtype()),
                                  int64_t{0}));
    }
  }
  if (bias) result = ops::add(result, per_channel(*bias, 4));
  return batched ? result : ops::squeeze(result, int64_t{0});
}

// A 1-D convolution, transposed or not, as a 2-D one over height 1, of a contiguous input as
// upstream's (so never channels-last).
Tensor over_height_one(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups,
                       bool transposed = false, const Shape& output_padding = {0}) {
  Tensor x2 = ops::unsqueeze(input.contiguous(), int64_t{-2}), w2 = ops::unsqueeze(weight, int64_t{-2});
  Shape s2{1, stride[0]}, p2{0, padding[0]}, d2{1, dilation[0]},
      o2{0, output_padding.empty() ? 0 : output_padding[0]};
  Tensor out = transposed ? conv_transpose2d(x2, w2, bias, s2, p2, o2, groups, d2)
                          : conv2d(x2, w2, bias, s2, p2, d2, groups);
  return ops::squeeze(out, int64_t{-2});
}

// A batched convolution of weight.dim() - 2 spatial dims.
Tensor convolution_nd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                      const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  switch (weight.dim()) {
    case 3:
      return over_height_one(input, weight, bias, stride, padding, dilation, groups);
    case 4:
      return conv2d(input, weight, bias, stride, padding, dilation, groups);
    case 5:
      return conv3d(input, weight, bias, stride, padding, dilation, groups);
    default:
      throw NotImplemented("torchnative implements convolutions of 1, 2 and 3 spatial dims only (weight of " +
                           std::to_string(weight.dim()) + " dims)");
  }
}

// Upstream's batchify: an input of one dim fewer than a batch is a batch of one.
std::pair<Tensor, bool> batchify(const Tensor& input, int64_t spatial, const char* name) {
  bool batched = input.dim() == spatial + 2;
  if (!batched && input.dim() != spatial + 1)
    throw Error("Expected " + std::to_string(spatial + 1) + "D (unbatched) or " +
                std::to_string(spatial + 2) + "D (batched) input to " + name +
                ", but got input of size: " + shape_str(input.sizes()));
  return {batched ? input : ops::unsqueeze(input, int64_t{0}), batched};
}

// conv1d/conv2d/conv3d with padding named, as upstream's _convolution_mode: 'valid' is none,
// 'same' (stride 1 only) is convolution_same: dilation * (kernel - 1) in all, and where that
// is odd the input padded at the end by one first, so that the convolution pads symmetrically.
Tensor convolution_mode(const Tensor& input_in, const Tensor& weight, const std::optional<Tensor>& bias,
                        const Shape& stride, const std::string& padding, const Shape& dilation,
                        int64_t groups, int64_t spatial, const char* name) {
  auto [input, batched] = batchify(input_in, spatial, name);
  Tensor out;
  if (padding == "same") {
    if (weight.dim() != input.dim())
      throw Error("Expected " + std::to_string(weight.dim()) + "-dimensional input for " +
                  std::to_string(weight.dim()) + "-dimensional weight" + shape_str(weight.sizes()) +
                  ", but got " + std::to_string(input.dim()) + "-dimensional input of size " +
                  shape_str(input.sizes()) + " instead");
    if (std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; }))
      throw Error("padding='same' is not supported for strided convolutions");
    SamePadding same = same_padding(weight.sizes(), dilation);
    out = convolution_nd(pad_for_same(input, same), weight, bias, stride, same.left, dilation, groups);
  } else if (padding == "valid") {
    out = convolution_nd(input, weight, bias, stride, Shape(size_t(spatial), 0), dilation, groups);
  } else {
    throw Error("Invalid padding string: '" + padding + "'");
  }
  return batched ? out : ops::squeeze(out, int64_t{0});
}

// Whether upstream's convolution_backward takes the oneDNN path for these (2-D or 3-D)
// arguments, the shapes consistent with a forward call.
bool onednn_backward_applies(const Tensor& grad, const Tensor& input, const Tensor& weight, bool transposed,
                             const Shape& stride, const Shape& padding, const Shape& dilation,
                             int64_t groups) {
  auto positive = [](const Shape& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  };
  size_t spatial = size_t(weight.dim()) - 2;
  if (transposed || (input.dim() != 4 && input.dim() != 5) || weight.dim() != input.dim() ||
      grad.dtype() != ScalarType::Float || weight.dtype() != ScalarType::Float || groups <= 0 ||
      input.size(1) != weight.size(1) * groups || weight.size(0) % groups != 0 || stride.size() != spatial ||
      padding.size() != spatial || dilation.size() != spatial || !positive(stride) || !positive(dilation))
    return false;
  Shape out_sizes = conv_output_sizes(input, weight, stride, padding, dilation);
  return grad.sizes() == out_sizes &&
         upstream_uses_onednn(input, weight, std::nullopt, stride, padding, dilation, groups, out_sizes);
}

// oneDNN's gradients (upstream's mkldnn_convolution_backward) of a batched 2-D or 3-D
// convolution, contiguous tensors, those `mask` asks for; the weight's also when only the bias's
// is asked for, as upstream's.
Stack onednn_backward(const Tensor& grad, const Tensor& input, const Tensor& weight, const Shape& stride,
                      const Shape& padding, const Shape& dilation, int64_t groups,
                      const std::vector<bool>& mask) {
  Geometry g = geometry(input.sizes(), weight.sizes(), grad.sizes(), stride, padding, dilation, groups);
  Stack out{IValue(), IValue(), IValue()};
  if (mask[0]) out[0] = onednn_grad_input(grad, weight, g);
  if (mask[1] || mask[2]) {
    auto [grad_weight, grad_bias] = onednn_grad_weight(grad, input, weight.sizes(), g, mask[2]);
    out[1] = grad_weight;
    if (mask[2]) out[2] = grad_bias;
  }
  return out;
}

// convolution_backward of a 3-D convolution as upstream's: oneDNN where its use_mkldnn says,
// its Empty backend's zeros for an empty batch, else slow_conv3d's (slow_conv_dilated3d's).
Stack conv3d_backward(const Tensor& grad_in, const Tensor& input_in, const Tensor& weight_in,
                      const std::optional<Shape>& bias_sizes, const Shape& stride_in, const Shape& padding_in,
                      const Shape& dilation_in, bool transposed, int64_t groups,
                      const std::vector<bool>& mask) {
  if (transposed)
    throw NotImplemented(
        "torchnative does not implement aten::convolution_backward for 3-D transposed convolutions "
        "(aten::conv_transpose3d) yet");
  if (groups <= 0) throw Error("non-positive groups is not supported");
  Shape stride = expand_param(stride_in, "stride", 3), padding = expand_param(padding_in, "padding", 3),
        dilation = expand_param(dilation_in, "dilation", 3);
  check_convolution(input_in, weight_in, std::nullopt, stride, padding, dilation, groups);
  Stack out{IValue(), IValue(), IValue()};
  if (input_in.size(0) == 0 || input_in.size(1) == 0) {
    if (mask[0]) out[0] = ops::zeros_like(input_in);
    if (mask[1]) out[1] = ops::zeros_like(weight_in);
    if (mask[2]) out[2] = ops::zeros(bias_sizes ? *bias_sizes : Shape{weight_in.size(0)}, weight_in.dtype());
    return out;
  }
  Shape out_sizes = conv_output_sizes(input_in, weight_in, stride, padding, dilation);
  if (grad_in.sizes() != out_sizes)
    throw Error("Expected grad_output of size " + shape_str(out_sizes) +
                " (the convolution's output), but got " + shape_str(grad_in.sizes()));
  if (grad_in.dtype() != input_in.dtype() || weight_in.dtype() != input_in.dtype())
    throw Error(
        std::string("expected scalar type ") + upstream_type_name(input_in.dtype()) + " but found " +
        upstream_type_name(grad_in.dtype() != input_in.dtype() ? grad_in.dtype() : weight_in.dtype()));
  if (input_in.dtype() == ScalarType::Half || !is_floating(input_in.dtype()))
    dtype_not_implemented("slow_conv3d_cpu_grad_input", input_in.dtype());
  Tensor grad = grad_in.contiguous(), input = input_in.contiguous(), weight = weight_in.contiguous();
  if (upstream_uses_onednn(input, weight, std::nullopt, stride, padding, dilation, groups, out_sizes))
    return onednn_backward(grad, input, weight, stride, padding, dilation, groups, mask);
  auto grads = gemm_conv3d_backward(grad, input, weight, stride, padding, dilation, groups, mask);
  for (size_t i = 0; i < 3; ++i)
    if (mask[i]) out[i] = grads[i];
  return out;
}

// convolution_backward of a 1-D or 2-D convolution as upstream's (1-D as 2-D over height 1, as
// upstream views it): oneDNN where its use_mkldnn says, its Empty backend's zeros for an empty
// batch, else its slow kernels' (slow_conv2d, slow_conv_dilated2d, slow_conv_transpose2d), whose
// products are gemm_conv3d's over depth 1. Channels-last memory is refused by name (upstream's
// nhwc kernels are not reproduced): the derivative keeps its own formula there.
Stack conv2d_backward(const Tensor& grad_in, const Tensor& input_in, const Tensor& weight_in,
                      const std::optional<Shape>& bias_sizes, Shape stride, Shape padding, Shape dilation,
                      bool transposed, int64_t groups, const std::vector<bool>& mask) {
  bool one_dimensional = weight_in.dim() == 3;
  auto is_4d_channels_last = [](const Tensor& t) { return t.dim() == 4 && channels_last(t); };
  if (is_4d_channels_last(input_in) || is_4d_channels_last(weight_in))
    throw NotImplemented(
        "torchnative does not implement aten::convolution_backward for channels-last tensors yet (upstream's "
        "nhwc kernels)");
  if (weight_in.dim() != 3 && weight_in.dim() != 4)
    throw NotImplemented(
        "torchnative implements aten::convolution_backward for 1-D, 2-D and 3-D convolutions");
  // A 1-D convolution's tensors contiguous first, as upstream's (no accidental channels-last view).
  auto as_2d = [&](const Tensor& t) {
    return one_dimensional ? ops::unsqueeze(t.contiguous(), int64_t{-2}) : t;
  };
  auto as_given = [&](const Tensor& t) { return one_dimensional ? ops::squeeze(t, int64_t{-2}) : t; };
  Tensor grad = as_2d(grad_in).contiguous(), input = as_2d(input_in).contiguous(),
         weight = as_2d(weight_in).contiguous();
  if (one_dimensional) stride = {1, stride[0]}, padding = {0, padding[0]}, dilation = {1, dilation[0]};
  Stack out{IValue(), IValue(), IValue()};
  if (!transposed && onednn_backward_applies(grad, input, weight, false, stride, padding, dilation, groups)) {
    out = onednn_backward(grad, input, weight, stride, padding, dilation, groups, mask);
    if (mask[0]) out[0] = as_given(out[0].get<Tensor>());
    // Upstream returns the weight's also when only the bias's was asked for, then as oneDNN's 2-D one.
    if (mask[1]) out[1] = as_given(out[1].get<Tensor>());
    return out;
  }
  if (groups <= 0) throw Error("non-positive groups is not supported");
  if (input.size(0) == 0 || input.size(1) == 0) {
    if (mask[0]) out[0] = ops::zeros_like(input_in);
    if (mask[1]) out[1] = ops::zeros_like(weight_in);
    if (mask[2])
      out[2] =
          ops::zeros(bias_sizes ? *bias_sizes : Shape{transposed ? weight.size(1) * groups : weight.size(0)},
                     weight.dtype());
    return out;
  }
  if (!is_floating(input.dtype()) || input.dtype() == ScalarType::Half)
    dtype_not_implemented(
        transposed ? "slow_conv_transpose2d_backward_out_cpu" : "slow_conv2d_cpu_grad_input", input.dtype());
  if (grad.dtype() != input.dtype() || weight.dtype() != input.dtype())
    throw Error(std::string("expected scalar type ") + upstream_type_name(input.dtype()) + " but found " +
                upstream_type_name(grad.dtype() != input.dtype() ? grad.dtype() : weight.dtype()));
  auto as_3d = [](const Tensor& t) { return ops::unsqueeze(t, int64_t{2}); };
  auto as_4d = [](const Tensor& t) { return ops::squeeze(t, int64_t{2}); };
  Shape s3{1, stride[0], stride[1]}, p3{0, padding[0], padding[1]}, d3{1, dilation[0], dilation[1]};
  if (!transposed) {
    Shape out_sizes = conv_output_sizes(input, weight, stride, padding, dilation);
    if (input.size(1) != weight.size(1) * groups || weight.size(0) % groups != 0 || grad.sizes() != out_sizes)
      throw Error("convolution_backward: grad_output of size " + shape_str(grad.sizes()) + ", input " +
                  shape_str(input.sizes()) + " and weight " + shape_str(weight.sizes()) +
                  " are not those of a convolution with groups=" + std::to_string(groups));
    auto grads = gemm_conv3d_backward(as_3d(grad), as_3d(input), as_3d(weight), s3, p3, d3, groups,
                                      {mask[0], mask[1], false});
    if (mask[0]) out[0] = as_given(as_4d(grads[0]));
    if (mask[1]) out[1] = as_given(as_4d(grads[1]));
  } else {
    // A transposed convolution's input gradient is the convolution of grad_output by its weight
    // (slow_conv_transpose2d: im2col of grad_output, one GEMM per sample and group); its weight's,
    // the products input columns(grad_output)^T accumulated sample after sample.
    if (weight.size(0) != input.size(1) || input.size(1) % groups != 0 ||
        grad.size(1) != weight.size(1) * groups ||
        conv_output_sizes(grad, weight, stride, padding, dilation) !=
            Shape{grad.size(0), weight.size(0), input.size(2), input.size(3)})
      throw Error("convolution_backward: grad_output of size " + shape_str(grad.sizes()) + ", input " +
                  shape_str(input.sizes()) + " and weight " + shape_str(weight.sizes()) +
                  " are not those of a transposed convolution with groups=" + std::to_string(groups));
    if (mask[0])
      out[0] = as_given(as_4d(
          gemm_conv3d(as_3d(grad), as_3d(weight), std::nullopt, s3, p3, d3, groups, as_3d(input).sizes())));
    if (mask[1]) {
      auto grads = gemm_conv3d_backward(as_3d(input), as_3d(grad), as_3d(weight), s3, p3, d3, groups,
                                        {false, true, false});
      out[1] = as_given(as_4d(grads[1]));
    }
  }
  if (mask[2]) out[2] = bias_grad(grad, groups, true);  // the 2-D slow kernels take groups one by one
  return out;
}

// A kernel's result as a tensor of its own: what the kernel built through a view operator
// (reshape, squeeze of an internal tensor) the dispatcher marked a view of that internal tensor,
// and an in-place write into the result would then go through a base without history,
// dropping the gradient (upstream's non-view operators never return views).
Tensor unaliased(const Tensor& t) {
  return t.impl()->view_base ? t.view_as_strided(t.sizes(), t.strides(), t.offset()) : t;
}

Stack unaliased(Stack results) {
  for (IValue& r : results)
    if (r.is<Tensor>() && r.get<Tensor>().defined()) r = unaliased(r.get<Tensor>());
  return results;
}

}  // namespace

bool convolution_backward_implemented(const Tensor& input, const Tensor& weight) {
  return !(input.dim() == 4 && channels_last(input)) && !(weight.dim() == 4 && channels_last(weight));
}

bool SamePadding::symmetric() const {
  return std::all_of(extra.begin(), extra.end(), [](int64_t e) { return e == 0; });
}

SamePadding same_padding(const Shape& weight_sizes, const Shape& dilation) {
  SamePadding p;
  for (size_t i = 0; i + 2 < weight_sizes.size(); ++i) {
    int64_t d = dilation.size() == 1 ? dilation[0] : dilation.at(i);
    int64_t total = d * (weight_sizes[2 + i] - 1);  // upstream's pooling_same_mode_padding_lr at stride 1
    p.left.push_back(total / 2);
    p.extra.push_back(total - 2 * (total / 2));
  }
  return p;
}

Tensor pad_for_same(const Tensor& input, const SamePadding& padding) {
  if (padding.symmetric()) return input;
  size_t spatial = padding.extra.size();
  std::vector<int64_t> pad(2 * spatial, 0);  // as F.pad's: the last dim first, (before, after)
  for (size_t i = 0; i < spatial; ++i) pad[2 * (spatial - 1 - i) + 1] = padding.extra[i];
  return ops::pad(input, pad, "constant", 0.0);
}

TN_KERNEL("aten::im2col", {
  return unaliased(im2col(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3), a.int_list(4)));
});
TN_KERNEL("aten::col2im", {
  const Tensor& input = a.tensor(0);
  Shape size = a.int_list(1), kernel = a.int_list(2), dilation = a.int_list(3), padding = a.int_list(4),
        stride = a.int_list(5);
  check_col2im(input, size, kernel, dilation, padding, stride);
  if (!is_floating(input.dtype())) dtype_not_implemented("col2im_out_cpu", input.dtype());
  if (input.dim() == 2)
    return unaliased(ops::squeeze(
        col2im(ops::unsqueeze(input, 0), size, kernel, dilation, padding, stride, input.dtype()), 0));
  return col2im(input, size, kernel, dilation, padding, stride, input.dtype());
});
TN_KERNEL("aten::conv1d", {
  auto [input, batched] = batchify(a.tensor(0), 1, "conv1d");
  Tensor out = over_height_one(input, a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4),
                               a.int_list(5), a.integer(6));
  return unaliased(batched ? out : ops::squeeze(out, int64_t{0}));
});
TN_KERNEL("aten::conv2d", {
  return unaliased(conv2d(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4),
                          a.int_list(5), a.integer(6)));
});
TN_KERNEL("aten::conv3d", {
  auto [input, batched] = batchify(a.tensor(0), 3, "conv3d");
  Tensor out = conv3d(input, a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4), a.int_list(5),
                      a.integer(6));
  return unaliased(batched ? out : ops::squeeze(out, int64_t{0}));
});
// conv{1,2,3}d.padding(input, weight, bias, stride, str padding, dilation, groups)
TN_KERNEL("aten::conv1d.padding", {
  return unaliased(convolution_mode(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3),
                                    *a.optional_string(4), a.int_list(5), a.integer(6), 1, "conv1d"));
});
TN_KERNEL("aten::conv2d.padding", {
  return unaliased(convolution_mode(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3),
                                    *a.optional_string(4), a.int_list(5), a.integer(6), 2, "conv2d"));
});
TN_KERNEL("aten::conv3d.padding", {
  return unaliased(convolution_mode(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3),
                                    *a.optional_string(4), a.int_list(5), a.integer(6), 3, "conv3d"));
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
  if (spatial == 1)
    return unaliased(
        over_height_one(x, weight, bias, stride, padding, dilation, groups, transposed, output_padding));
  if (spatial == 3 && transposed)
    throw NotImplemented(
        "torchnative does not implement 3-D transposed convolutions (aten::conv_transpose3d) yet");
  if (spatial == 3) return unaliased(conv3d(x, weight, bias, stride, padding, dilation, groups));
  if (spatial != 2)
    throw NotImplemented("torchnative implements aten::convolution for 1-D, 2-D and 3-D only (got " +
                         std::to_string(spatial) + "-D)");
  if (transposed)
    return unaliased(conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation));
  return unaliased(conv2d(x, weight, bias, stride, padding, dilation, groups));
});
// convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
// transposed, output_padding, groups, output_mask), as upstream's backends compute it.
TN_KERNEL("aten::convolution_backward", {
  const auto& mask = a[10].get<std::vector<bool>>();
  const Tensor &grad = a.tensor(0), &input = a.tensor(1), &weight = a.tensor(2);
  auto bias_sizes = a.optional_int_list(3);
  Stack grads = weight.dim() == 5
                    ? conv3d_backward(grad, input, weight, bias_sizes, a.int_list(4), a.int_list(5),
                                      a.int_list(6), a.boolean(7), a.integer(9), mask)
                    : conv2d_backward(grad, input, weight, bias_sizes, a.int_list(4), a.int_list(5),
                                      a.int_list(6), a.boolean(7), a.integer(9), mask);
  return IValue::tuple(unaliased(grads));
});
TN_KERNEL("aten::conv_transpose1d", {
  auto [input, batched] = batchify(a.tensor(0), 1, "conv_transpose1d");
  Tensor out = over_height_one(input, a.tensor(1), a.optional_tensor(2), a.int_list(3), a.int_list(4),
                               a.int_list(7), a.integer(6), true, a.int_list(5));
  return unaliased(batched ? out : ops::squeeze(out, int64_t{0}));
});
TN_KERNEL("aten::conv_transpose2d.input", {
  return unaliased(conv_transpose2d(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.int_list(3),
                                    a.int_list(4), a.int_list(5), a.integer(6), a.int_list(7)));
});

}  // namespace tn
