// Pooling: max_pool1d/2d/3d (with indices), avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d,
// adaptive_max_pool2d/3d, fractional_max_pool2d/3d, the 2-D and 3-D backward operators, and
// max_unpool2d/3d. One implementation over depth, height and width: a 2-D pooling is a 3-D one of
// depth 1, a 1-D one a 2-D one of height 1, as upstream computes them. Each spatial dim's windows
// are computed once per call (they depend on that dim's output index alone; a fractional pooling's
// once per plane, from that plane's samples), then every plane (batch x channel) runs over them.
#include "pooling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// One spatial dim's taps of one output index: begin, begin + step, ... below end, all inside
// the input; `padded` the window's length counting the padding it covers (count_include_pad).
struct Taps {
  int64_t begin, end, step, padded;
  int64_t length() const { return end - begin; }
};
// Per spatial dim (depth, height, width): each output index's taps.
using Windows = std::array<std::vector<Taps>, 3>;

template <typename TapsOf>
Windows windows_for(const Dims3& out, TapsOf&& taps_of) {
  Windows w;
  for (size_t i = 0; i < 3; ++i)
    for (int64_t o = 0; o < out[i]; ++o) w[i].push_back(taps_of(i, o));
  return w;
}

// A pooling operator's tensors have their `spatial` dims at least; the backward operators
// called directly can be given fewer (upstream reads past its buffers there).
void check_has_spatial(const Shape& sizes, int spatial) {
  if (int64_t(sizes.size()) < spatial)
    throw Error("pooling over " + std::to_string(spatial) + " dims: a tensor of sizes " + shape_str(sizes) +
                " has fewer");
}

// The last `spatial` dims of `sizes` as depth, height and width (depth 1 for two).
Dims3 spatial_sizes(const Shape& sizes, int spatial) {
  check_has_spatial(sizes, spatial);
  Dims3 d{1, 1, 1};
  for (int i = 0; i < spatial; ++i) d[3 - spatial + i] = sizes[sizes.size() - spatial + i];
  return d;
}

// `sizes` with its last `spatial` dims replaced by out's.
Shape with_spatial(Shape sizes, const Dims3& out, int spatial) {
  check_has_spatial(sizes, spatial);
  for (int i = 0; i < spatial; ++i) sizes[sizes.size() - spatial + i] = out[3 - spatial + i];
  return sizes;
}

std::string spatial_text(const Dims3& d, int spatial, const char* separator) {
  std::string text;
  for (int i = 3 - spatial; i < 3; ++i) text += (text.empty() ? "" : separator) + std::to_string(d[i]);
  return text;
}

// Calls visit(cell, depth taps, height taps, width taps) for a plane's output cells in order.
template <typename Visit>
void each_cell(const Windows& w, Visit&& visit) {
  int64_t cell = 0;
  for (const Taps& td : w[0])
    for (const Taps& th : w[1])
      for (const Taps& tw : w[2]) visit(cell++, td, th, tw);
}

// Max pooling's rule for one tap, upstream's `val > max || isnan(val)`, without a branch (random
// data mispredicts one about every other tap).
template <typename V>
[[gnu::always_inline]] inline void take_if_greater(V v, int64_t index, V& best, int64_t& best_index) {
  bool take = v > best || std::isnan(v);
  best = take ? v : best;
  best_index = take ? index : best_index;
}

// The output columns whose width windows are whole and evenly spaced, [first, last): each window
// `taps` taps `step` apart, `stride` past the last one's; every column of a max pooling but those
// its padding clips. Empty (first == last) when fewer than two are.
struct ColumnRun {
  int64_t first = 0, last = 0, stride = 0, taps = 0, step = 1;
};

ColumnRun whole_columns(const std::vector<Taps>& tw) {
  auto taps = [](const Taps& t) { return (t.end - t.begin + t.step - 1) / t.step; };
  ColumnRun run;
  for (const Taps& t : tw) run.taps = std::max(run.taps, taps(t));
  size_t first = 0;
  while (first < tw.size() && taps(tw[first]) != run.taps) ++first;
  if (first + 1 >= tw.size()) return run;
  int64_t stride = tw[first + 1].begin - tw[first].begin;
  size_t last = first + 1;
  while (last < tw.size() && taps(tw[last]) == run.taps && tw[last].step == tw[first].step &&
         tw[last].begin - tw[last - 1].begin == stride)
    ++last;
  if (stride <= 0 || last - first < 2) return run;
  return {int64_t(first), int64_t(last), stride, run.taps, tw[first].step};
}

// One input row's taps of the whole columns' windows, tap by tap, each across every column at
// once (the columns are independent, and each still sees its taps in order). Stride is a
// constant where it is 1 or 2, so that the compiler vectorizes the loads.
template <typename T, typename Stride>
TN_CLONES void max_run_row(const T* row, int64_t row_index, const ColumnRun& run, int64_t first_column,
                           Stride stride, T* best, int64_t* best_index) {
  const int64_t columns = run.last - run.first;
  for (int64_t k = 0; k < run.taps; ++k) {
    const int64_t column = first_column + k * run.step;
    const T* p = row + column;
    for (int64_t j = 0; j < columns; ++j)
      take_if_greater(p[j * stride], row_index + column + j * stride, best[j], best_index[j]);
  }
}

// One cell of max pooling over taps td x th x tw: its first maximum, replaced by every NaN after
// it (upstream's rule), compared as value_t; the cell starts at its first tap with -inf.
template <typename value_t, typename scalar_t>
void max_cell(const scalar_t* plane, const Dims3& in, const Taps& td, const Taps& th, const Taps& tw,
              scalar_t& out_value, int64_t& out_index) {
  value_t best = -std::numeric_limits<value_t>::infinity();
  int64_t best_index = (td.begin * in[1] + th.begin) * in[2] + tw.begin;
  for (int64_t z = td.begin; z < td.end; z += td.step)
    for (int64_t y = th.begin; y < th.end; y += th.step) {
      const int64_t row = (z * in[1] + y) * in[2];
      for (int64_t col = tw.begin; col < tw.end; col += tw.step)
        take_if_greater(value_t(compute_t<scalar_t>(plane[row + col])), row + col, best, best_index);
    }
  out_value = scalar_t(compute_t<scalar_t>(best));
  out_index = best_index;
}

// The cells of one output row's whole columns (run) over taps td x th, by input rows across all
// columns (max_run_row): the same taps in the same order per cell as max_cell.
template <typename T>
void max_run(const T* plane, const Dims3& in, const Taps& td, const Taps& th, const std::vector<Taps>& tw,
             const ColumnRun& run, T* best, int64_t* best_index) {
  for (int64_t c = run.first; c < run.last; ++c) {
    best[c - run.first] = -std::numeric_limits<T>::infinity();
    best_index[c - run.first] = (td.begin * in[1] + th.begin) * in[2] + tw[size_t(c)].begin;
  }
  const int64_t first_column = tw[size_t(run.first)].begin;
  for (int64_t z = td.begin; z < td.end; z += td.step)
    for (int64_t y = th.begin; y < th.end; y += th.step) {
      const int64_t row = (z * in[1] + y) * in[2];
      if (run.stride == 1)
        max_run_row(plane + row, row, run, first_column, std::integral_constant<int64_t, 1>{}, best,
                    best_index);
      else if (run.stride == 2)
        max_run_row(plane + row, row, run, first_column, std::integral_constant<int64_t, 2>{}, best,
                    best_index);
      else
        max_run_row(plane + row, row, run, first_column, run.stride, best, best_index);
    }
}

// Max pooling of one plane of `in` over windows w: the whole columns of float and double by
// rows (max_run), the rest, and other types, cell by cell (max_cell), compared as float where
// that holds every value exactly (float, half, bfloat16), else as double.
template <typename scalar_t>
void max_plane(const scalar_t* plane, const Dims3& in, const Windows& w, const ColumnRun& run,
               scalar_t* out_values, int64_t* out_indices) {
  using value_t =
      std::conditional_t<std::is_same_v<scalar_t, double> || !is_float_v<compute_t<scalar_t>>, double, float>;
  constexpr bool by_rows = std::is_same_v<scalar_t, value_t>;
  const int64_t columns = int64_t(w[2].size());
  int64_t row_cells = 0;  // the first cell of the output row
  for (const Taps& td : w[0])
    for (const Taps& th : w[1]) {
      for (int64_t c = 0; c < columns; ++c)
        if (!by_rows || c < run.first || c >= run.last)
          max_cell<value_t>(plane, in, td, th, w[2][size_t(c)], out_values[row_cells + c],
                            out_indices[row_cells + c]);
      if constexpr (by_rows)
        if (run.first < run.last)
          max_run(plane, in, td, th, w[2], run, out_values + row_cells + run.first,
                  out_indices + row_cells + run.first);
      row_cells += columns;
    }
}

// The number of planes (batch x channel) of a contiguous tensor whose planes hold `plane` elements.
int64_t planes_of(const Tensor& x, int64_t plane) { return plane > 0 ? x.numel() / plane : 0; }

// Max pooling over a contiguous input, every plane over the same windows, planes split between
// threads (cells are independent: the split changes no result).
std::pair<Tensor, Tensor> max_over(const Tensor& x, const Shape& out_sizes, const Dims3& in,
                                   const Windows& w) {
  Tensor values = Tensor::empty(out_sizes, x.dtype());
  Tensor indices = Tensor::empty(out_sizes, ScalarType::Long);
  if (values.is_meta()) return {values, indices};  // the meta device: shapes and dtypes are the results
  const int64_t plane_in = in[0] * in[1] * in[2], cells = int64_t(w[0].size() * w[1].size() * w[2].size()),
                planes = planes_of(x, plane_in);
  const ColumnRun run = whole_columns(w[2]);
  TN_DISPATCH_ALL_TYPES(x.dtype(), "max_pool", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    parallel_for(planes, 0, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        max_plane(x.template data_as<scalar_t>() + p * plane_in, in, w, run,
                  values.template data_as<scalar_t>() + p * cells,
                  indices.template data_as<int64_t>() + p * cells);
    });
  });
  return {values, indices};
}

// What an average pooling divides a cell's sum by.
int64_t divisor(const Taps& td, const Taps& th, const Taps& tw, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  if (divisor_override) return *divisor_override;
  if (count_include_pad) return td.padded * th.padded * tw.padded;
  return td.length() * th.length() * tw.length();
}

// Average pooling: each cell's window summed in double, divided and rounded once.
Tensor mean_over(const Tensor& x, const Shape& out_sizes, const Dims3& in, const Windows& w,
                 bool count_include_pad, std::optional<int64_t> divisor_override) {
  Tensor out = Tensor::empty(out_sizes, x.dtype());
  if (out.is_meta()) return out;
  const int64_t plane_in = in[0] * in[1] * in[2], cells = int64_t(w[0].size() * w[1].size() * w[2].size()),
                planes = planes_of(x, plane_in);
  TN_DISPATCH_ALL_TYPES(x.dtype(), "avg_pool", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    for (int64_t p = 0; p < planes; ++p) {
      const scalar_t* plane = x.template data_as<scalar_t>() + p * plane_in;
      scalar_t* out_values = out.template data_as<scalar_t>() + p * cells;
      each_cell(w, [&](int64_t cell, const Taps& td, const Taps& th, const Taps& tw) {
        double total = 0;
        for (int64_t z = td.begin; z < td.end; ++z)
          for (int64_t y = th.begin; y < th.end; ++y)
            for (int64_t i = (z * in[1] + y) * in[2] + tw.begin, e = i - tw.begin + tw.end; i < e; ++i)
              total += double(compute_t<scalar_t>(plane[i]));
        int64_t d = divisor(td, th, tw, count_include_pad, divisor_override);
        out_values[cell] = scalar_t(compute_t<scalar_t>(total / double(d)));
      });
    }
  });
  return out;
}

// The gradient of mean_over: output o's gradient reaches each input of its window as g_o / divisor_o.
Tensor spread(const Tensor& grad, const Shape& input_sizes, int spatial, const Windows& w,
              bool count_include_pad, std::optional<int64_t> divisor_override) {
  if (grad.is_meta()) return ops::empty(input_sizes, grad.dtype(), std::nullopt, std::string("meta"));
  Tensor g = ops::_to_copy(grad, ScalarType::Double).contiguous();
  Dims3 in = spatial_sizes(input_sizes, spatial);
  const int64_t plane_in = in[0] * in[1] * in[2], cells = int64_t(w[0].size() * w[1].size() * w[2].size()),
                planes = cells > 0 ? g.numel() / cells : 0;
  Tensor out = ops::zeros(input_sizes, ScalarType::Double);
  // Upstream reads past its buffers when grad_output's planes are not the input's: refused here.
  if (cells > 0 && plane_in > 0 && planes != out.numel() / plane_in)
    throw Error("grad_output of sizes " + shape_str(grad.sizes()) + " does not pool an input of sizes " +
                shape_str(input_sizes));
  const bool integral = !is_floating(grad.dtype());
  for (int64_t p = 0; p < planes; ++p) {
    const double* gv = g.data_as<double>() + p * cells;
    double* ov = out.data_as<double>() + p * plane_in;
    each_cell(w, [&](int64_t cell, const Taps& td, const Taps& th, const Taps& tw) {
      int64_t d = divisor(td, th, tw, count_include_pad, divisor_override);
      // An integer gradient is divided as upstream's kernel divides it: in integers, each share
      // rounded toward zero before the shares are added.
      double share = integral ? double(int64_t(gv[cell]) / d) : gv[cell] / double(d);
      for (int64_t z = td.begin; z < td.end; ++z)
        for (int64_t y = th.begin; y < th.end; ++y)
          for (int64_t i = (z * in[1] + y) * in[2] + tw.begin, e = i - tw.begin + tw.end; i < e; ++i)
            ov[i] += share;
    });
  }
  return ops::_to_copy(out, grad.dtype());
}

// Upstream's pooling_output_shape: one dim's output length (floor division; with ceil_mode
// the last window must start inside the input or its left padding).
int64_t pool_out(int64_t size, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil) {
  if (stride == 0) throw Error("stride should not be zero");
  if (pad < 0) throw Error("pad must be non-negative, but got pad: " + std::to_string(pad));
  if (pad > k / 2)
    throw Error("pad should be at most half of kernel size, but got pad=" + std::to_string(pad) +
                " and kernel_size=" + std::to_string(k));
  int64_t numerator = size + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  // Rounded down, not toward zero: a kernel longer than the input gives no output.
  int64_t quotient = numerator / stride;
  if (numerator % stride != 0 && (numerator < 0) != (stride < 0)) --quotient;
  int64_t out = quotient + 1;
  if (ceil && (out - 1) * stride >= size + pad) --out;
  return out;
}

// A max or average pooling's arguments, per spatial dim.
struct PoolArgs {
  Dims3 kernel, stride, padding, dilation;
  bool ceil;
};

// An int-list argument of a `spatial`-d pooling: one int for every dim, or one per dim; a
// 2-D pooling's depth takes `depth`.
Dims3 per_dim(const Shape& list, int spatial, int64_t depth, const std::string& error) {
  if (list.size() != 1 && list.size() != size_t(spatial)) throw Error(error);
  Dims3 d{depth, list[0], list[0]};
  if (spatial == 3) d[0] = list[0];
  for (size_t i = 0; i < list.size(); ++i) d[3 - list.size() + i] = list[i];
  return d;
}

// Upstream's pool2d/pool3d input checks: 3 or 4 (2-D) or 4 or 5 dims (checked first), none
// empty but the batch (checked after the output sizes).
std::string rank_refusal(const Tensor& input, int spatial) {
  return spatial == 3
             ? "non-empty 4D or 5D (batch mode) tensor expected for input"
             : "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:" +
                   shape_str(input.sizes());
}
void check_rank(const Tensor& input, int spatial) {
  if (input.dim() != spatial + 1 && input.dim() != spatial + 2) throw Error(rank_refusal(input, spatial));
}
// (Upstream's 3-D text names dimension 0 whichever is empty.)
void check_not_empty(const Tensor& input, int spatial, const std::string& name) {
  for (int64_t i = input.dim() - spatial - 1; i < input.dim(); ++i)
    if (input.size(i) == 0)
      throw Error(spatial == 2
                      ? rank_refusal(input, spatial)
                      : name +
                            "(): Expected input's non-batch dimensions to have positive length, but "
                            "input has a shape of " +
                            shape_str(input.sizes()) + " and non-batch dimension 0 has length zero!");
}

// Upstream's checks of kernel, stride and dilation, after it has computed the output sizes.
void check_positive(const PoolArgs& a, int spatial) {
  const char* letters = "THW";
  auto listed = [&](const std::string& prefix, const Dims3& v) {
    std::string text;
    for (int i = 3 - spatial; i < 3; ++i) text += " " + prefix + letters[i] + ": " + std::to_string(v[i]);
    return text;
  };
  auto positive = [&](const Dims3& v) { return v[0] > 0 && v[1] > 0 && v[2] > 0; };
  if (!positive(a.kernel))
    throw Error("kernel size should be greater than zero, but got" + listed("k", a.kernel));
  if (!positive(a.stride)) throw Error("stride should be greater than zero, but got" + listed("d", a.stride));
  if (!positive(a.dilation))
    throw Error("dilation should be greater than zero, but got" + listed("dilation", a.dilation));
}

// The output sizes of a max or average pooling, checked in upstream's order; 3-D average
// pooling also wants the kernel inside the input.
Dims3 checked_output(const Tensor& input, const PoolArgs& a, int spatial, const std::string& name,
                     bool kernel_inside_input) {
  check_rank(input, spatial);
  Dims3 in = spatial_sizes(input.sizes(), spatial), out{1, 1, 1};
  for (int i = 3 - spatial; i < 3; ++i)
    out[i] = pool_out(in[i], a.kernel[i], a.padding[i], a.stride[i], a.dilation[i], a.ceil);
  check_positive(a, spatial);
  check_not_empty(input, spatial, name);
  if (kernel_inside_input && (in[0] < a.kernel[0] || in[1] < a.kernel[1] || in[2] < a.kernel[2]))
    throw Error("input image (T: " + std::to_string(in[0]) + " H: " + std::to_string(in[1]) + " W: " +
                std::to_string(in[2]) + ") smaller than kernel size (kT: " + std::to_string(a.kernel[0]) +
                " kH: " + std::to_string(a.kernel[1]) + " kW: " + std::to_string(a.kernel[2]) + ")");
  if (out[0] <= 0 || out[1] <= 0 || out[2] <= 0) {
    std::string planes = std::to_string(input.size(-spatial - 1));
    throw Error("Given input size: (" + planes + "x" + spatial_text(in, spatial, "x") +
                "). Calculated output size: (" + planes + "x" + spatial_text(out, spatial, "x") +
                "). Output size is too small");
  }
  return out;
}

std::pair<Tensor, Tensor> max_pool(const Tensor& input, const PoolArgs& a, int spatial,
                                   const std::string& name) {
  Dims3 out = checked_output(input, a, spatial, name, false), in = spatial_sizes(input.sizes(), spatial);
  Windows w = windows_for(out, [&](size_t i, int64_t o) {
    int64_t begin = o * a.stride[i] - a.padding[i], d = a.dilation[i];
    int64_t end = std::min(begin + (a.kernel[i] - 1) * d + 1, in[i]);
    while (begin < 0) begin += d;
    return Taps{begin, end, d, 0};
  });
  return max_over(input.contiguous(), with_spatial(input.sizes(), out, spatial), in, w);
}

// Average pooling's windows: start o * stride - pad, clipped to the input; `padded` counts the
// padding (the window clipped to input + padding).
Windows avg_windows(const Dims3& in, const Dims3& out, const Dims3& kernel, const Dims3& stride,
                    const Dims3& padding) {
  return windows_for(out, [&](size_t i, int64_t o) {
    int64_t begin = o * stride[i] - padding[i], end = std::min(begin + kernel[i], in[i] + padding[i]);
    return Taps{std::max<int64_t>(begin, 0), std::min(end, in[i]), 1, end - begin};
  });
}

Tensor avg_pool(const Tensor& input, const PoolArgs& a, bool count_include_pad,
                std::optional<int64_t> divisor_override, int spatial) {
  if (divisor_override && *divisor_override == 0) throw Error("divisor must be not zero");
  Dims3 out = checked_output(input, a, spatial, "avg_pool3d", spatial == 3),
        in = spatial_sizes(input.sizes(), spatial);
  return mean_over(input.contiguous(), with_spatial(input.sizes(), out, spatial), in,
                   avg_windows(in, out, a.kernel, a.stride, a.padding), count_include_pad, divisor_override);
}

// Adaptive pooling: output cell i covers [floor(i in / out), ceil((i + 1) in / out)).
Windows adaptive_windows(const Dims3& in, const Dims3& out) {
  return windows_for(out, [&](size_t i, int64_t o) {
    int64_t begin = o * in[i] / out[i], end = ((o + 1) * in[i] + out[i] - 1) / out[i];
    return Taps{begin, end, 1, end - begin};
  });
}

// Upstream's adaptive pooling checks: 3 or 4 (2-D) or 4 or 5 dims, none empty but the batch.
Dims3 adaptive_output(const Tensor& input, const Shape& output_size, int spatial, const std::string& name,
                      bool max) {
  if (output_size.size() != size_t(spatial))
    throw Error(name + ": output_size must be " + std::to_string(spatial));
  if (input.dim() != spatial + 1 && input.dim() != spatial + 2)
    throw Error(name + "(): Expected " + (spatial == 3 ? "4D or 5D" : "3D or 4D") + " tensor, but got" +
                (max ? ": " : " ") + shape_str(input.sizes()));
  for (int64_t i = input.dim() - spatial - 1; i < input.dim(); ++i)
    if (input.size(i) == 0)
      throw Error(name +
                  "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes " +
                  shape_str(input.sizes()) + " with dimension " + std::to_string(i) + " being empty");
  Dims3 out{1, 1, 1};
  for (int i = 0; i < spatial; ++i) {
    if (output_size[i] < 0)
      throw Error("Trying to create tensor with negative dimension " + std::to_string(output_size[i]) + ": " +
                  shape_str(output_size));
    out[3 - spatial + i] = output_size[i];
  }
  return out;
}

template <bool Max>
std::pair<Tensor, Tensor> adaptive_pool(const Tensor& input, const Shape& output_size, int spatial,
                                        const std::string& name) {
  Dims3 out = adaptive_output(input, output_size, spatial, name, Max),
        in = spatial_sizes(input.sizes(), spatial);
  Windows w = adaptive_windows(in, out);
  Shape out_sizes = with_spatial(input.sizes(), out, spatial);
  if constexpr (Max) return max_over(input.contiguous(), out_sizes, in, w);
  return {mean_over(input.contiguous(), out_sizes, in, w, false, std::nullopt), Tensor()};
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

// The 2-D operators' int lists (one int or two); a 1-D operator passes them with height 1.
PoolArgs args2d(const std::string& op, const Shape& kernel, const Shape& stride, const Shape& padding,
                const Shape& dilation, bool ceil) {
  PoolArgs a;
  a.kernel = per_dim(kernel, 2, 1, op + ": kernel_size must either be a single int, or a tuple of two ints");
  a.stride = stride.empty()
                 ? a.kernel
                 : per_dim(stride, 2, 1,
                           op + ": stride must either be omitted, a single int, or a tuple of two ints");
  a.padding = per_dim(padding, 2, 0,
                      op + (op == "max_pool2d" ? ": padding must be either be" : ": padding must either be") +
                          " a single int, or a tuple of two ints");
  a.dilation = per_dim(dilation, 2, 1, op + ": dilation must be either a single int, or a tuple of two ints");
  a.ceil = ceil;
  return a;
}

std::pair<Tensor, Tensor> max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride,
                                     const Shape& padding, const Shape& dilation, bool ceil) {
  return max_pool(input, args2d("max_pool2d", kernel, stride, padding, dilation, ceil), 2, "max_pool2d");
}

Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                  bool ceil, bool count_include_pad, std::optional<int64_t> divisor) {
  return avg_pool(input, args2d("avg_pool2d", kernel, stride, padding, {1}, ceil), count_include_pad, divisor,
                  2);
}

// The 3-D operators' int lists from argument `first` on (kernel_size, stride, padding, then
// dilation for max pooling, ceil_mode), with upstream's words for each operator.
PoolArgs args3d(const Args& a, bool max, size_t first) {
  std::string op = max ? "max_pool3d: " : "avg_pool3d: ", either = max ? "either " : "";
  PoolArgs p;
  p.kernel = per_dim(a.int_list(first), 3, 1,
                     op + "kernel_size must " + either + "be a single int, or a tuple of three ints");
  p.stride =
      a.int_list(first + 1).empty()
          ? p.kernel
          : per_dim(a.int_list(first + 1), 3, 1,
                    op + "stride must " + either + "be omitted, a single int, or a tuple of three ints");
  p.padding = per_dim(
      a.int_list(first + 2), 3, 0,
      op + "padding must " + (max ? "be either be" : "be") + " a single int, or a tuple of three ints");
  p.dilation = max ? per_dim(a.int_list(first + 3), 3, 1,
                             "max_pool3d: dilation must be either a single int, or a tuple of three ints")
                   : Dims3{1, 1, 1};
  p.ceil = a.boolean(first + (max ? 4 : 3));
  return p;
}

// A 3-D backward operator's checks: self as its forward's input, grad_output of the sizes
// its forward gave.
void check_grad_output(const Tensor& grad, const Tensor& self, const PoolArgs& p, const std::string& name,
                       bool kernel_inside_input) {
  Shape expected = with_spatial(self.sizes(), checked_output(self, p, 3, name, kernel_inside_input), 3);
  if (grad.sizes() != expected)
    throw Error(name + ": expected grad_output of sizes " + shape_str(expected) + ", but got " +
                shape_str(grad.sizes()));
}

// Upstream's adaptive_avg_pool2d: a (1, 1) output is the mean over the last two dims (its
// cascade sum, so its bits: the global pooling ending every torchvision classifier), any other
// size the windows of the pooling kernel.
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size) {
  if (output_size == Shape{1, 1}) return ops::mean(x, std::vector<int64_t>{-1, -2}, true, std::nullopt);
  return adaptive_pool<false>(x, output_size, 2, "adaptive_avg_pool2d").first;
}

// Upstream's check_dim_size: `t` has `dims` dims and its dim `dim` is `size` (the message
// reads that dim whatever the rank, so a missing one raises IndexError).
void check_dim_size(const Tensor& t, int64_t dims, int64_t dim, int64_t size) {
  int64_t actual = t.size(wrap_dim(dim, t.dim()));
  if (t.dim() != dims || actual != size)
    throw Error("Expected a tensor of dimension " + std::to_string(dims) + " and tensor.size[" +
                std::to_string(dim) + "] == " + std::to_string(size) + " but got: dimension " +
                std::to_string(t.dim()) + " and tensor.size[" + std::to_string(dim) +
                "] = " + std::to_string(actual));
}

// A 2-D backward operator's grad_output (or indices): the input's planes over the pooled
// height and width (the batch is not checked, as upstream's).
void check_pooled_sizes(const Tensor& t, const Tensor& self, const Dims3& out) {
  const int64_t dims = self.dim();
  check_dim_size(t, dims, dims - 3, self.size(-3));
  check_dim_size(t, dims, dims - 2, out[1]);
  check_dim_size(t, dims, dims - 1, out[2]);
}

void check_same_dtype(const Tensor& grad, const Tensor& self, const char* grad_name) {
  if (grad.dtype() != self.dtype())
    throw Error(std::string("expected dtype ") + cpp_type_name(self.dtype()) + " for `" + grad_name +
                "` but got dtype " + cpp_type_name(grad.dtype()));
}

// The 2-D backward operators and max unpooling dispatch on the input's dtype after their
// checks (so not at the door, kernel_dtypes.cpp): float and double, and those `also` lists.
void check_dispatch_dtype(const char* kernel, ScalarType type, std::initializer_list<ScalarType> also) {
  if (type == ScalarType::Float || type == ScalarType::Double) return;
  for (ScalarType allowed : also)
    if (type == allowed) return;
  dtype_not_implemented(kernel, type);
}

// Upstream's data_ptr<T> check of a tensor its kernel reads as `expected`.
void check_scalar_type(const Tensor& t, ScalarType expected) {
  if (t.dtype() != expected)
    throw Error(std::string("expected scalar type ") + upstream_type_name(expected) + " but found " +
                upstream_type_name(t.dtype()));
}

void check_long_indices(const Tensor& indices) { check_scalar_type(indices, ScalarType::Long); }

// The 2-D adaptive backward operators' checks of grad_output: its rank (3 or 4), no empty
// dim after the first, the input's dtype.
void check_adaptive_grad(const Tensor& grad, const Tensor& self, const std::string& name, bool max) {
  if (grad.dim() != 3 && grad.dim() != 4)
    throw Error(name + "(): Expected 3D or 4D " +
                (max ? "grad_output, but got: " + shape_str(grad.sizes())
                     : "tensor, but got " + shape_str(self.sizes())));  // (upstream prints the input's)
  for (int64_t i = 1; i < grad.dim(); ++i)
    if (grad.size(i) == 0)
      throw Error(
          name +
          "(): Expected grad_output to have non-zero size for non-batch dimensions, but grad_output has "
          "sizes " +
          shape_str(grad.sizes()) + " with dimension " + std::to_string(i) + " being empty");
  check_same_dtype(grad, self, "grad_output");
}

// Max unpooling's input and indices: equal sizes, the indices int64, no empty dim after the
// first (upstream's words name its kernel).
void check_unpool_input(const Tensor& input, const Tensor& indices, const std::string& kernel) {
  if (input.sizes() != indices.sizes())
    throw Error("Expected shape of indices to be same as that of the input tensor (" +
                shape_str(input.sizes()) +
                ") but got indices tensor with shape: " + shape_str(indices.sizes()));
  for (int64_t i = 1; i < input.dim(); ++i)
    if (input.size(i) == 0)
      throw Error(kernel + "(): Expected input to have non-zero size for non-batch dimensions, but got " +
                  shape_str(input.sizes()) + " with dimension " + std::to_string(i) + " being empty.");
}

// Max unpooling: a zero output of `out` over the last `spatial` dims, each input element
// written at its index in its plane (a later element over an earlier one at the same index).
// An index outside the plane is refused after the loop, naming the last one met, as
// upstream's kernel does.
Tensor unpool(const Tensor& input, const Tensor& indices, const Dims3& out, int spatial) {
  Shape out_sizes = with_spatial(input.sizes(), out, spatial);
  // Upstream resizes its output to these sizes, counting their elements as unsigned: a negative
  // size overflows the count, unless another size is zero, where it makes a tensor of negative
  // size (which the shim has not).
  if (std::any_of(out.begin(), out.end(), [](int64_t size) { return size < 0; })) {
    if (std::find(out_sizes.begin(), out_sizes.end(), 0) == out_sizes.end())
      throw Error("numel: integer multiplication overflow");
    throw NotImplemented("torchnative has no tensors of negative sizes: max unpooling's output of sizes " +
                         shape_str(out_sizes));
  }
  if (input.is_meta()) return ops::empty(out_sizes, input.dtype(), std::nullopt, std::string("meta"));
  Tensor result = ops::zeros(out_sizes, input.dtype());
  if (result.numel() == 0) return result;
  check_dispatch_dtype(spatial == 2 ? "max_unpool2d" : "max_unpool3d", input.dtype(), {});
  Tensor x = input.contiguous(), at = indices.contiguous();
  Dims3 in = spatial_sizes(input.sizes(), spatial);
  const int64_t plane_in = in[0] * in[1] * in[2], cells = out[0] * out[1] * out[2],
                planes = x.numel() / plane_in;
  std::optional<int64_t> invalid;
  TN_DISPATCH_ALL_TYPES(x.dtype(), "max_unpool", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    for (int64_t p = 0; p < planes; ++p) {
      const scalar_t* source = x.template data_as<scalar_t>() + p * plane_in;
      const int64_t* index = at.template data_as<int64_t>() + p * plane_in;
      scalar_t* target = result.template data_as<scalar_t>() + p * cells;
      for (int64_t k = 0; k < plane_in; ++k) {
        if (index[k] < 0 || index[k] >= cells)
          invalid = index[k];
        else
          target[index[k]] = source[k];
      }
    }
  });
  if (invalid)
    throw Error("Found an invalid max index: " + std::to_string(*invalid) + " (output volumes are of size " +
                spatial_text(out, spatial, "x"));
  return result;
}

// Fractional max pooling (Graham, "Fractional Max-Pooling", 2014): windows of the kernel's size
// whose starts, per plane and spatial dim, come from one uniform sample u of that plane: output
// o < out - 1 starts at int((o + u) alpha) - int(u alpha), alpha = (in - pool) / (out - 1), the
// last at in - pool. Computed in the input's type, as upstream, since the truncation shows its
// rounding.
template <typename scalar_t>
int64_t fractional_start(scalar_t u, int64_t o, int64_t in, int64_t out, int64_t pool) {
  if (o == out - 1) return in - pool;
  scalar_t alpha = scalar_t(in - pool) / scalar_t(out - 1);
  return int64_t(int((scalar_t(o) + u) * alpha)) - int(u * alpha);
}

// A plane's windows from its samples: a 2-D pooling's first is its width's, a 3-D one's are
// depth, height, width. Upstream asserts each window it reads lies inside the input (samples
// outside [0, 1) can move them); a window of no taps reads nothing.
template <typename scalar_t>
Windows fractional_windows(const scalar_t* samples, const Dims3& in, const Dims3& out, const Dims3& pool,
                           int spatial) {
  return windows_for(out, [&](size_t i, int64_t o) {
    if (int(i) < 3 - spatial) return Taps{0, 1, 1, 1};  // a 2-D pooling's depth
    scalar_t u = samples[spatial == 3 ? i : 2 - i];
    int64_t begin = fractional_start(u, o, in[i], out[i], pool[i]);
    if (pool[i] > 0 && (begin < 0 || begin + pool[i] > in[i]))
      throw Error("fractional max pooling: the random sample " + std::to_string(double(u)) +
                  " starts window " + std::to_string(o) + " at " + std::to_string(begin) +
                  ", outside an input of length " + std::to_string(in[i]));
    return Taps{begin, begin + pool[i], 1, pool[i]};
  });
}

// Upstream reads random_samples and the backward's indices through their data pointers alone:
// the `count` elements of memory from each one's first, whatever its sizes and strides. Refused
// where those pass the end of its storage (upstream reads past it).
Tensor leading_memory(const Tensor& t, int64_t count, const std::string& what) {
  int64_t available = int64_t(t.storage()->nbytes() / t.itemsize()) - t.offset();
  if (count > available)
    throw Error(what + " of sizes " + shape_str(t.sizes()) + " has " + std::to_string(available) +
                " elements in memory from its first, and " + std::to_string(count) + " are read");
  return Tensor::from_storage(t.storage(), {count}, {1}, t.offset(), t.dtype());
}

// fractional_max_pool2d/3d's checks of its lists and input, in upstream's order (its 3-D words
// name its out= kernel, and its 3-D size check is strict): the pool's and output's sizes.
std::pair<Dims3, Dims3> fractional_sizes(const Args& a, int spatial) {
  const Tensor& input = a.tensor(0);
  const bool two = spatial == 2;
  const std::string op = two ? "fractional_max_pool2d" : "fractional_max_pool3d",
                    name = two ? op : op + "_out";
  for (auto [list, what] : {std::pair{a.int_list(1), "kernel_size"}, std::pair{a.int_list(2), "output_size"}})
    if (list.size() != size_t(spatial))
      throw Error(op + ": " + what + " must either be a single Int or tuple of " +
                  (two ? "Ints" : "three Ints"));
  if (input.dim() != spatial + 1 && input.dim() != spatial + 2)
    throw Error(name + "(): Expected " + (two ? "3D or 4D" : "4D or 5D") +
                " tensor, but got: " + shape_str(input.sizes()));
  for (int64_t i = 1; i < input.dim(); ++i)
    if (input.size(i) == 0)
      throw Error(name + "(): Expected input to have non-zero size for non-batch dimensions, but got" +
                  shape_str(input.sizes()) + " with dimension " + std::to_string(i) + " being empty.");
  Dims3 in = spatial_sizes(input.sizes(), spatial), pool = per_dim(a.int_list(1), spatial, 1, ""),
        out = per_dim(a.int_list(2), spatial, 1, "");
  const char* words[] = {"time", "height", "width"};
  for (int i : two ? std::vector<int>{1, 2} : std::vector<int>{0, 2, 1})
    if (out[i] + pool[i] - 1 > in[i] - (two ? 0 : 1))
      throw Error(name + "(): pool " + words[i] + " " + std::to_string(pool[i]) +
                  " too large relative to input " + words[i] + " " + std::to_string(in[i]));
  return {pool, out};
}

// Fractional max pooling of `input` into `values` and `indices` (allocated, of its planes over
// `out`): the dtypes upstream's kernel takes (float, double; the samples the input's), then each
// plane's windows and maxima. Upstream's loop checks no sizes (its out= form runs it on an input
// resized since its checks).
void fractional_pool_into(const Tensor& input, const Tensor& samples, const Dims3& pool, const Dims3& out,
                          int spatial, const Tensor& values, const Tensor& indices) {
  if (input.dtype() != ScalarType::Float && input.dtype() != ScalarType::Double)
    dtype_not_implemented(
        spatial == 2 ? "fractional_max_pool2d_out_frame" : "fractional_max_pool3d_out_frame", input.dtype());
  check_scalar_type(samples, input.dtype());
  if (values.is_meta()) return;
  Tensor x = input.contiguous();
  Dims3 in = spatial_sizes(input.sizes(), spatial);
  const int64_t plane_in = in[0] * in[1] * in[2], cells = out[0] * out[1] * out[2],
                planes = input.dim() == spatial + 2 ? input.size(0) * input.size(1) : input.size(0);
  // Every plane draws its windows, also when they are empty.
  Tensor drawn = leading_memory(samples, planes * spatial, "random_samples");
  auto pool_planes = [&](auto zero) {
    using scalar_t = decltype(zero);
    // Cell by cell (no ColumnRun): `values` may be an out= tensor over the input, and upstream's
    // results there are those of its order, each cell written as it is done.
    for (int64_t p = 0; p < planes; ++p)
      max_plane(x.data_as<scalar_t>() + p * plane_in, in,
                fractional_windows(drawn.data_as<scalar_t>() + p * spatial, in, out, pool, spatial),
                ColumnRun{}, values.data_as<scalar_t>() + p * cells, indices.data_as<int64_t>() + p * cells);
  };
  input.dtype() == ScalarType::Float ? pool_planes(float{}) : pool_planes(double{});
}

// fractional_max_pool2d/3d(self, kernel_size, output_size, random_samples).
std::pair<Tensor, Tensor> fractional_max_pool(const Args& a, int spatial) {
  const Tensor& input = a.tensor(0);
  auto [pool, out] = fractional_sizes(a, spatial);
  Shape out_sizes = with_spatial(input.sizes(), out, spatial);
  Tensor values = Tensor::empty(out_sizes, input.dtype()),
         indices = Tensor::empty(out_sizes, ScalarType::Long);
  fractional_pool_into(input, a.tensor(3), pool, out, spatial, values, indices);
  return {values, indices};
}

// Whether t's elements fill the memory from its first one densely (its strides a permutation of
// contiguous ones), so writing that memory in contiguous order stays inside t.
bool fills_its_memory(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims of more than one element
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (auto [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// An out= tensor of fractional pooling resized to `sizes` where its sizes differ, as the memory
// upstream's kernels write: from its first element in contiguous order, whatever its strides (a
// result of other strides holds the values in that order). Refused where that memory is not the
// tensor's (upstream writes past its elements).
Tensor written_memory(const Tensor& t, const Shape& sizes) {
  if (t.sizes() != sizes) t.resize(sizes);
  if (!fills_its_memory(t))
    throw Error(
        "fractional max pooling writes its out= tensors in contiguous order from their first "
        "element: an output of sizes " +
        shape_str(t.sizes()) + " and strides " + shape_str(t.strides()) + " does not hold that memory");
  return leading_memory(t, t.numel(), "output");
}

// The out= forms, upstream's structured kernels: the checks on self as called, then the outputs
// resized where their sizes differ (self too, when it is one), then the loop over self as it is
// then, writing the outputs' memory cell by cell, so that a self written to is read as the loop
// has left it.
IValue fractional_max_pool_out(const Args& a, int spatial) {
  const Tensor &input = a.tensor(0), &output = a.tensor(4), &indices = a.tensor(5);
  auto [pool, out] = fractional_sizes(a, spatial);
  Shape out_sizes = with_spatial(input.sizes(), out, spatial);
  fractional_pool_into(input, a.tensor(3), pool, out, spatial, written_memory(output, out_sizes),
                       written_memory(indices, out_sizes));
  return IValue::tuple({output, indices});
}

// fractional_max_pool2d/3d_backward(grad_output, self, kernel_size (unused, as upstream's),
// output_size, indices): upstream reads self's planes and spatial sizes, checks grad_output's
// spatial sizes (2-D: width first), then the dtypes. It then reads grad_output (contiguous) and
// the indices' memory as the pooled planes of self: the first elements of each, refused where
// there are fewer (upstream reads past them).
Tensor fractional_max_pool_backward(const Args& a, int spatial) {
  const Tensor &grad = a.tensor(0), &self = a.tensor(1), &indices = a.tensor(4);
  const bool two = spatial == 2;
  const std::string op = two ? "fractional_max_pool2d" : "fractional_max_pool3d",
                    name = op + (two ? "_backward" : "_backward_out");
  Shape output_size = a.int_list(3);
  if (output_size.size() < size_t(spatial))
    throw Error(name + "(): output_size " + shape_str(output_size) + " has fewer than " +
                std::to_string(spatial) + " elements");
  output_size.resize(spatial);                              // upstream reads the first ones
  const int64_t first = self.dim() == spatial + 2 ? 2 : 1;  // the first spatial dim, as upstream's
  for (int64_t d = first - 1; d < first + spatial; ++d) wrap_dim(d, self.dim());
  const char* words[] = {"time", "height", "width"};
  for (int i : two ? std::vector<int>{1, 0} : std::vector<int>{0, 1, 2})
    if (output_size[i] != grad.size(wrap_dim(first + i, grad.dim())))
      throw Error(name + "(): gradOutput " + words[3 - spatial + i] + " unexpected");
  if (self.dtype() != ScalarType::Float && self.dtype() != ScalarType::Double)
    dtype_not_implemented((op + "_backward_out_frame").c_str(), self.dtype());
  check_scalar_type(grad, self.dtype());
  check_long_indices(indices);
  if (self.dim() != spatial + 1 && self.dim() != spatial + 2)
    throw Error(name + "(): an input of " + std::to_string(self.dim()) + " dims is not pooled over " +
                std::to_string(spatial) + " (upstream reads it as " + std::to_string(spatial + 1) + "-D)");
  Shape pooled = with_spatial(self.sizes(), per_dim(output_size, spatial, 1, ""), spatial);
  int64_t count = 1;
  for (int64_t size : pooled) count *= size;
  Tensor g = ops::reshape(leading_memory(grad.contiguous(), count, "grad_output"), pooled);
  return max_pool_backward(g, ops::reshape(leading_memory(indices, count, "indices"), pooled), self.sizes(),
                           spatial);
}

// The backward's out= forms: grad_input computed from the operands as called, then written as
// upstream writes it, in memory order.
Tensor fractional_max_pool_backward_out(const Args& a, int spatial) {
  Tensor result = fractional_max_pool_backward(a, spatial);
  const Tensor& grad_input = a.tensor(5);
  Tensor memory = written_memory(grad_input, result.sizes());
  if (!memory.is_meta()) memory.copy_from(ops::reshape(result, {-1}));
  return grad_input;
}

}  // namespace

Tensor avg_pool_backward(const Tensor& grad, const Shape& input_sizes, int spatial, const AvgPoolWindows& w) {
  Dims3 in = spatial_sizes(input_sizes, spatial), out = spatial_sizes(grad.sizes(), spatial);
  return spread(grad, input_sizes, spatial, avg_windows(in, out, w.kernel, w.stride, w.padding),
                w.count_include_pad, w.divisor_override);
}

Tensor adaptive_avg_pool_backward(const Tensor& grad, const Shape& input_sizes, int spatial) {
  Dims3 in = spatial_sizes(input_sizes, spatial), out = spatial_sizes(grad.sizes(), spatial);
  return spread(grad, input_sizes, spatial, adaptive_windows(in, out), false, std::nullopt);
}

// Each output cell's gradient added at the input position its index names, per plane, cells in
// order (upstream's order, which decides the sums where windows overlap), planes split between
// threads as upstream's. An index outside its plane is refused: upstream's kernel would write
// outside the gradient.
Tensor max_pool_backward(const Tensor& grad, const Tensor& indices, const Shape& input_sizes, int spatial) {
  if (grad.is_meta()) return ops::empty(input_sizes, grad.dtype(), std::nullopt, std::string("meta"));
  Dims3 in = spatial_sizes(input_sizes, spatial);
  Dims3 pooled = spatial_sizes(indices.sizes(), spatial);
  const int64_t plane_in = in[0] * in[1] * in[2], cells = pooled[0] * pooled[1] * pooled[2];
  Tensor out = ops::zeros(input_sizes, grad.dtype());
  if (grad.sizes() != indices.sizes())
    throw Error("grad_output of sizes " + shape_str(grad.sizes()) + " does not match the indices' sizes " +
                shape_str(indices.sizes()));
  Tensor g = grad.contiguous(), chosen = indices.to(ScalarType::Long).contiguous();
  const int64_t planes = planes_of(chosen, cells);
  if (cells > 0 && planes * plane_in != out.numel())
    throw Error("indices of sizes " + shape_str(indices.sizes()) + " do not pool an input of sizes " +
                shape_str(input_sizes));
  TN_DISPATCH_ALL_TYPES(grad.dtype(), "max_pool_backward", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    const scalar_t* gv = g.template data_as<scalar_t>();
    const int64_t* iv = chosen.template data_as<int64_t>();
    scalar_t* ov = out.template data_as<scalar_t>();
    parallel_for(planes, 0, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        for (int64_t cell = p * cells; cell < (p + 1) * cells; ++cell) {
          int64_t i = iv[cell];
          if (i < 0 || i >= plane_in)
            throw Error("max pooling's index " + std::to_string(i) + " is outside its plane of " +
                        std::to_string(plane_in) + " elements");
          scalar_t& target = ov[p * plane_in + i];
          target = scalar_t(c(target) + c(gv[cell]));
        }
    });
  });
  return out;
}

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
// Upstream's max_pool2d is its max_pool2d_with_indices' values (record.cpp's kDecomposed): the
// backward pass reads the indices the forward found.
TN_KERNEL("aten::max_pool2d", {
  return std::get<0>(ops::max_pool2d_with_indices(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3),
                                                  a.int_list(4), a.boolean(5)));
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
  auto [v, i] = adaptive_pool<true>(a.tensor(0), a.int_list(1), 2, "adaptive_max_pool2d");
  return IValue::tuple({v, i});
});

// max_pool3d and adaptive_avg_pool3d are upstream's composites: their parts record the graph
// (autograd/record.cpp's kDecomposed).
TN_KERNEL("aten::max_pool3d", {
  return std::get<0>(ops::max_pool3d_with_indices(a.tensor(0), a.int_list(1), a.int_list(2), a.int_list(3),
                                                  a.int_list(4), a.boolean(5)));
});
TN_KERNEL("aten::max_pool3d_with_indices", {
  auto [v, i] = max_pool(a.tensor(0), args3d(a, true, 1), 3, "max_pool3d_with_indices_out_cpu_template");
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::avg_pool3d",
          { return avg_pool(a.tensor(0), args3d(a, false, 1), a.boolean(5), a.optional_integer(6), 3); });
TN_KERNEL("aten::adaptive_avg_pool3d", {
  Shape output_size = a.int_list(1);
  if (output_size.size() != 3) throw Error("adaptive_avg_pool3d: output_size must be 3");
  if (output_size[0] < 0 || output_size[1] < 0 || output_size[2] < 0)
    throw Error(
        "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {" +
        std::to_string(output_size[0]) + ", " + std::to_string(output_size[1]) + "," +
        std::to_string(output_size[2]) + "}");
  // As upstream: a (1, 1, 1) output is the mean over the last three dims, whatever the input's rank.
  if (output_size == Shape{1, 1, 1})
    return ops::mean(a.tensor(0), std::vector<int64_t>{-1, -2, -3}, true, std::nullopt);
  return ops::_adaptive_avg_pool3d(a.tensor(0), output_size);
});
TN_KERNEL("aten::_adaptive_avg_pool3d",
          { return adaptive_pool<false>(a.tensor(0), a.int_list(1), 3, "adaptive_avg_pool3d").first; });
TN_KERNEL("aten::adaptive_max_pool3d", {
  if (a.int_list(1).size() != 3)
    throw Error("adaptive_max_pool3d(): internal error: output_size.size() must be 3");
  auto [v, i] = adaptive_pool<true>(a.tensor(0), a.int_list(1), 3, "adaptive_max_pool3d");
  return IValue::tuple({v, i});
});

// The backward operators: grad_output, self (whose sizes the gradient takes), the forward's
// arguments, and for max pooling the forward's indices; refused as upstream's refuse them.
TN_KERNEL("aten::max_pool3d_with_indices_backward", {
  check_grad_output(a.tensor(0), a.tensor(1), args3d(a, true, 2), "max_pool3d_with_indices_backward", false);
  return max_pool_backward(a.tensor(0), a.tensor(7), a.tensor(1).sizes(), 3);
});
TN_KERNEL("aten::adaptive_max_pool3d_backward", {
  // Upstream reads the input's four (unbatched) dims without checking its rank, then dispatches
  // on its dtype (so no rule at the door: kernel_dtypes.cpp).
  for (int64_t d = 0; d < 4; ++d) wrap_dim(d, a.tensor(1).dim());
  ScalarType type = a.tensor(1).dtype();
  if (type != ScalarType::Float && type != ScalarType::Double)
    dtype_not_implemented("adaptive_max_pool3d_backward", type);
  return max_pool_backward(a.tensor(0), a.tensor(2), a.tensor(1).sizes(), 3);
});
TN_KERNEL("aten::avg_pool3d_backward", {
  PoolArgs p = args3d(a, false, 2);
  check_grad_output(a.tensor(0), a.tensor(1), p, "avg_pool3d_backward", true);
  return avg_pool_backward(a.tensor(0), a.tensor(1).sizes(), 3,
                           {p.kernel, p.stride, p.padding, a.boolean(6), a.optional_integer(7)});
});
TN_KERNEL("aten::_adaptive_avg_pool3d_backward", {
  // Upstream reads the input's planes (dim -4), then grad_output's last three dims: fewer
  // raise its IndexError.
  wrap_dim(-4, a.tensor(1).dim());
  wrap_dim(-3, a.tensor(0).dim());
  return adaptive_avg_pool_backward(a.tensor(0), a.tensor(1).sizes(), 3);
});

// The 2-D backward operators, with upstream's checks in its order: the int lists, the
// input's rank, grad_output's dtype, the pooled sizes, then grad_output's (and the indices')
// sizes against them.
TN_KERNEL("aten::max_pool2d_with_indices_backward", {
  const Tensor &grad = a.tensor(0), &self = a.tensor(1), &indices = a.tensor(7);
  PoolArgs p = args2d("max_pool2d", a.int_list(2), a.int_list(3), a.int_list(4), a.int_list(5), a.boolean(6));
  if (self.dim() != 3 && self.dim() != 4)
    throw Error("non-empty 3D or 4D (batch mode) tensor expected for input");
  check_same_dtype(grad, self, "gradOutput");
  Dims3 out = checked_output(self, p, 2, "max_pool2d", false);
  check_pooled_sizes(grad, self, out);
  check_pooled_sizes(indices, self, out);
  check_dispatch_dtype("max_pool2d_backward", self.dtype(), {ScalarType::BFloat16});
  check_long_indices(indices);
  return max_pool_backward(grad, indices, self.sizes(), 2);
});
TN_KERNEL("aten::avg_pool2d_backward", {
  const Tensor &grad = a.tensor(0), &self = a.tensor(1);
  PoolArgs p = args2d("avg_pool2d", a.int_list(2), a.int_list(3), a.int_list(4), {1}, a.boolean(5));
  std::optional<int64_t> divisor_override = a.optional_integer(7);
  if (divisor_override && *divisor_override == 0) throw Error("divisor must be not zero");
  wrap_dim(-3, self.dim());  // upstream reads the input's planes before it checks its rank
  check_same_dtype(grad, self, "gradOutput");
  check_pooled_sizes(grad, self, checked_output(self, p, 2, "avg_pool2d", false));
  check_dispatch_dtype("avg_pool2d_backward", self.dtype(), {ScalarType::BFloat16, ScalarType::Long});
  return avg_pool_backward(grad, self.sizes(), 2,
                           {p.kernel, p.stride, p.padding, a.boolean(6), divisor_override});
});
TN_KERNEL("aten::adaptive_max_pool2d_backward", {
  const Tensor &grad = a.tensor(0), &self = a.tensor(1), &indices = a.tensor(2);
  check_adaptive_grad(grad, self, "adaptive_max_pooling2d_backward", true);
  check_dispatch_dtype("adaptive_max_pool2d_backward", self.dtype(), {ScalarType::BFloat16});
  check_long_indices(indices);
  // Upstream reads past its buffers when they differ: refused here.
  if (grad.sizes() != indices.sizes())
    throw Error("adaptive_max_pool2d_backward: grad_output of sizes " + shape_str(grad.sizes()) +
                " and indices of sizes " + shape_str(indices.sizes()) + " differ");
  return max_pool_backward(grad, indices, self.sizes(), 2);
});
TN_KERNEL("aten::_adaptive_avg_pool2d_backward", {
  check_adaptive_grad(a.tensor(0), a.tensor(1), "adaptive_avg_pool2d_backward", false);
  check_dispatch_dtype("adaptive_avg_pool2d_backward", a.tensor(1).dtype(), {ScalarType::BFloat16});
  return adaptive_avg_pool_backward(a.tensor(0), a.tensor(1).sizes(), 2);
});
// The windowed adaptive average pooling alone (adaptive_avg_pool2d's other sizes and the
// double backward of _adaptive_avg_pool2d_backward).
TN_KERNEL("aten::_adaptive_avg_pool2d",
          { return adaptive_pool<false>(a.tensor(0), a.int_list(1), 2, "adaptive_avg_pool2d").first; });

// max_unpool2d(self, indices, output_size) and max_unpool3d(..., stride, padding): upstream
// checks stride and padding but does not use them.
TN_KERNEL("aten::max_unpool2d", {
  const Tensor &self = a.tensor(0), &indices = a.tensor(1);
  Shape size = a.int_list(2);
  if (indices.dtype() != ScalarType::Long)
    throw Error(std::string("elements in indices should be type int64 but got: ") +
                upstream_type_name(indices.dtype()));
  if (size.size() != 2)
    throw Error("There should be exactly two elements (height, width) in output_size, but got " +
                std::to_string(size.size()) + " elements.");
  if (self.dim() != 3 && self.dim() != 4)
    throw Error("Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with " +
                std::to_string(self.dim()) + " dimensions.");
  check_unpool_input(self, indices, "max_unpooling2d_forward_out_cpu");
  return unpool(self, indices, {1, size[0], size[1]}, 2);
});
TN_KERNEL("aten::max_unpool3d", {
  const Tensor &self = a.tensor(0), &indices = a.tensor(1);
  Shape size = a.int_list(2), stride = a.int_list(3), padding = a.int_list(4);
  if (indices.dtype() != ScalarType::Long) throw Error("elements in indices should be type int64");
  if (self.dim() != 4 && self.dim() != 5)
    throw Error("Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with " +
                std::to_string(self.dim()) + " dimensions.");
  auto three = [](const Shape& list, const std::string& what, const char* but_got) {
    if (list.size() != 3)
      throw Error("There should be exactly three elements (depth, height, width) in " + what + but_got +
                  std::to_string(list.size()) + " elements.");
  };
  three(size, "output_size", ", but got ");
  three(stride, "stride", ", but got: ");
  three(padding, "padding", ", but got: ");
  check_unpool_input(self, indices, "max_unpooling3d_forward_out_cpu");
  if (stride[0] <= 0 || stride[1] <= 0 || stride[2] <= 0)
    throw Error("strides should be greater than zero, but got stride: " + shape_str(stride));
  return unpool(self, indices, {size[0], size[1], size[2]}, 3);
});

// Fractional max pooling, forward and backward (2-D and 3-D).
TN_KERNEL("aten::fractional_max_pool2d", {
  auto [v, i] = fractional_max_pool(a, 2);
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::fractional_max_pool3d", {
  auto [v, i] = fractional_max_pool(a, 3);
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::fractional_max_pool2d.output", { return fractional_max_pool_out(a, 2); });
TN_KERNEL("aten::fractional_max_pool3d.output", { return fractional_max_pool_out(a, 3); });
TN_KERNEL("aten::fractional_max_pool2d_backward", { return fractional_max_pool_backward(a, 2); });
TN_KERNEL("aten::fractional_max_pool3d_backward", { return fractional_max_pool_backward(a, 3); });
TN_KERNEL("aten::fractional_max_pool2d_backward.grad_input",
          { return fractional_max_pool_backward_out(a, 2); });
TN_KERNEL("aten::fractional_max_pool3d_backward.grad_input",
          { return fractional_max_pool_backward_out(a, 3); });

}  // namespace tn
