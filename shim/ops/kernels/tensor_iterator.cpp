// Where upstream's results depend on how TensorIterator lays out a loop: which elements
// of an elementwise kernel take the vectorized lambda, and the order in which the
// cascade sum and the float32 2-norm add. All follow TensorIterator's layout steps
// (operand strides, dims reordered fastest-moving first with reduced dims first, adjacent
// dims coalesced) and its serial loop; tensors of 32768 elements and more, which upstream
// splits between threads at thread-count-dependent points, are treated as one range.
#include <algorithm>
#include <cstring>
#include <optional>

#include "common.h"
#include "core/overlap.h"

namespace tn {

namespace {

// An input's strides once upstream has converted it to the common dtype: .to keeps the
// strides of a dense tensor and lays anything else out densely in its stride order.
Shape converted_strides(const Tensor& t, ScalarType common) {
  if (t.dtype() == common || is_non_overlapping_and_dense(t)) return t.strides();
  return dense_strides_like(t.sizes(), t.strides());
}

// An input's strides in the iterator's shape (elements): 0 where it is broadcast, its own
// (after conversion) elsewhere.
Shape input_strides(const Tensor& t, const Shape& shape, ScalarType common) {
  int64_t nd = int64_t(shape.size());
  Shape own = converted_strides(t, common);
  Shape s(size_t(nd), 0);
  int64_t offset = nd - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[size_t(d)] != 1 || shape[size_t(d + offset)] == 1) s[size_t(d + offset)] = own[size_t(d)];
  return s;
}

struct Layout {
  Shape perm;                  // source dims, fastest-moving first
  Shape sizes;                 // after coalescing
  Shape merged;                // how many dims of perm each coalesced dim holds
  std::vector<Shape> strides;  // per operand, after coalescing
};

// reorder_dimensions then coalesce_dimensions. `operands` are the strides that take part
// (outputs first; an output allocated by the iterator takes none), the first
// `reduction_outputs` of them a reduction's outputs (stride 0 on reduced dims, which go
// first).
Layout iterator_layout(const Shape& shape, const std::vector<Shape>& operands, size_t reduction_outputs) {
  int64_t nd = int64_t(shape.size());
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (size_t k = 0; k < operands.size(); ++k) {
      int64_t s0 = operands[k][size_t(d0)], s1 = operands[k][size_t(d1)];
      if (k < reduction_outputs && (s0 == 0) != (s1 == 0)) return s1 == 0 ? 1 : -1;
      if (s0 == 0 || s1 == 0) continue;
      if (s0 != s1) return s0 < s1 ? -1 : 1;
      if (shape[size_t(d0)] > shape[size_t(d1)]) return 1;
    }
    return 0;
  };
  Layout layout;
  layout.perm.resize(size_t(nd));
  for (int64_t i = 0; i < nd; ++i) layout.perm[size_t(i)] = nd - 1 - i;
  Shape& perm = layout.perm;
  for (int64_t i = 1; i < nd; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      int comparison = should_swap(perm[size_t(d0)], perm[size_t(d1)]);
      if (comparison > 0) {
        std::swap(perm[size_t(d0)], perm[size_t(d1)]);
        d1 = d0;
      } else if (comparison < 0) {
        break;
      }
    }
  }
  for (int64_t d : perm) layout.sizes.push_back(shape[size_t(d)]);
  for (const Shape& s : operands) {
    Shape permuted;
    for (int64_t d : perm) permuted.push_back(s[size_t(d)]);
    layout.strides.push_back(std::move(permuted));
  }
  layout.merged.assign(size_t(nd), 1);
  if (nd <= 1) return layout;
  Shape& sizes = layout.sizes;
  size_t prev = 0;
  for (size_t d = 1; d < size_t(nd); ++d) {
    bool merge = sizes[prev] == 1 || sizes[d] == 1;
    if (!merge) {
      merge = true;
      for (const Shape& s : layout.strides) merge = merge && sizes[prev] * s[prev] == s[d];
    }
    if (merge) {
      if (sizes[prev] == 1)
        for (Shape& s : layout.strides) s[prev] = s[d];
      sizes[prev] *= sizes[d];
      ++layout.merged[prev];
    } else {
      ++prev;
      for (Shape& s : layout.strides) s[prev] = s[d];
      sizes[prev] = sizes[d];
    }
  }
  sizes.resize(prev + 1);
  layout.merged.resize(prev + 1);
  for (Shape& s : layout.strides) s.resize(prev + 1);
  return layout;
}

// Dense strides over `sizes` laying dims out in `perm`'s order (fastest first); a size-0
// dim zeroes the strides after it, as upstream's compatible_stride does.
Shape dense_strides_in_order(const Shape& sizes, const Shape& perm) {
  Shape strides(sizes.size());
  int64_t next = 1;
  for (int64_t d : perm) {
    strides[size_t(d)] = next;
    next *= sizes[size_t(d)];
  }
  return strides;
}

// Memory format checks on strides alone (a tensor's is_contiguous(memory_format)): dims
// of size 1 may have any stride.
bool dense_in_dim_order(const Shape& sizes, const Shape& strides, const Shape& fastest_first) {
  int64_t expected = 1;
  for (int64_t d : fastest_first) {
    if (sizes[size_t(d)] == 1) continue;
    if (strides[size_t(d)] != expected) return false;
    expected *= sizes[size_t(d)];
  }
  return true;
}

Shape row_major_order(int64_t nd) {
  Shape order;
  for (int64_t d = nd - 1; d >= 0; --d) order.push_back(d);
  return order;
}

// NCHW / NCDHW tensors stored channels last: C fastest, then W, H (, D), then N.
std::optional<Shape> channels_last_order(int64_t nd) {
  if (nd != 4 && nd != 5) return std::nullopt;
  Shape order{1};
  for (int64_t d = nd - 1; d >= 2; --d) order.push_back(d);
  order.push_back(0);
  return order;
}

// TensorIterator's fast setup: inputs all of the output's shape and all contiguous, all
// channels last, or all dense with one set of strides give the output that layout.
std::optional<Shape> fast_setup_strides(const Shape& shape, const std::vector<Tensor>& inputs,
                                        const std::vector<Shape>& strides) {
  if (inputs.empty()) return std::nullopt;
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  Shape row_major = row_major_order(int64_t(shape.size()));
  std::optional<Shape> channels_last = channels_last_order(int64_t(shape.size()));
  bool contiguous = true, is_channels_last = channels_last.has_value(), same_dense = true;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].sizes() != shape) return std::nullopt;
    contiguous = contiguous && (numel == 0 || dense_in_dim_order(shape, strides[k], row_major));
    is_channels_last = is_channels_last && dense_in_dim_order(shape, strides[k], *channels_last);
    same_dense = same_dense && strides[k] == strides[0] &&
                 (strides[k] != inputs[k].strides() || is_non_overlapping_and_dense(inputs[k]));
  }
  if (contiguous) return contiguous_strides(shape);
  if (is_channels_last) return dense_strides_in_order(shape, *channels_last);
  if (same_dense) return strides[0];
  return std::nullopt;
}

}  // namespace

Shape dense_strides_like(const Shape& sizes, const Shape& strides) {
  Layout layout = iterator_layout(sizes, {strides}, 0);
  Shape dense(sizes.size());
  int64_t next = 1;
  for (int64_t d : layout.perm) {
    dense[size_t(d)] = next;
    next *= std::max<int64_t>(sizes[size_t(d)], 1);
  }
  return dense;
}

Tensor empty_with_strides(const Shape& sizes, const Shape& strides, ScalarType dtype) {
  if (strides == contiguous_strides(sizes)) return Tensor::empty(sizes, dtype);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  return Tensor::empty({numel}, dtype).view_as_strided(sizes, strides, 0);
}

Tensor empty_for_operands(const Shape& shape, const std::vector<Tensor>& inputs, ScalarType common,
                          ScalarType dtype) {
  std::vector<Shape> converted;
  for (const Tensor& t : inputs) converted.push_back(converted_strides(t, common));
  if (std::optional<Shape> strides = fast_setup_strides(shape, inputs, converted))
    return empty_with_strides(shape, *strides, dtype);
  std::vector<Shape> broadcast;
  for (const Tensor& t : inputs) broadcast.push_back(input_strides(t, shape, common));
  Shape perm = iterator_layout(shape, broadcast, 0).perm;
  if (perm == row_major_order(int64_t(shape.size()))) return Tensor::empty(shape, dtype);
  return empty_with_strides(shape, dense_strides_in_order(shape, perm), dtype);
}

Tensor to_keeping_layout(const Tensor& t, ScalarType dtype) {
  if (t.dtype() == dtype) return t;
  std::optional<MetaAllocation> meta;
  if (t.is_meta()) meta.emplace();  // a meta tensor converts to a meta tensor
  Tensor out = empty_with_strides(t.sizes(), converted_strides(t, dtype), dtype);
  out.copy_from(t);
  return out;
}

std::vector<Tensor> in_iteration_order(const std::vector<Tensor>& operands) {
  std::vector<Shape> strides;
  for (const Tensor& t : operands) strides.push_back(t.strides());
  Layout layout = iterator_layout(operands.at(0).sizes(), strides, 0);
  std::vector<Tensor> views;
  for (const Tensor& t : operands) {
    Shape sizes, permuted;
    for (auto d = layout.perm.rbegin(); d != layout.perm.rend(); ++d) {
      sizes.push_back(t.sizes()[size_t(*d)]);
      permuted.push_back(t.strides()[size_t(*d)]);
    }
    views.push_back(t.view_as_strided(sizes, permuted, t.offset()));
  }
  return views;
}

Tensor in_iteration_order(const Tensor& t) { return in_iteration_order(std::vector<Tensor>{t})[0]; }

std::vector<bool> vectorized_elements(const Shape& shape, const std::vector<Tensor>& inputs,
                                      ScalarType common, int64_t block) {
  int64_t nd = int64_t(shape.size()), numel = 1;
  for (int64_t s : shape) numel *= s;
  std::vector<bool> vectorized(size_t(numel), false);
  if (numel == 0 || nd == 0 || !vml_available()) return vectorized;
  std::vector<Shape> strides;
  for (const Tensor& t : inputs) strides.push_back(input_strides(t, shape, common));
  // The output is allocated by the iterator, dense in the chosen order, so it neither
  // orders nor blocks coalescing.
  Layout layout = iterator_layout(shape, strides, 0);
  // Vectorized rows: every input contiguous, or all but one that is broadcast (stride 0).
  int64_t other = 0, broadcast = 0;
  for (const Shape& s : layout.strides) {
    other += s[0] != 1;
    broadcast += s[0] == 0;
  }
  bool vector_row = other == 0 || (other == 1 && broadcast == 1);
  int64_t body = vector_row ? layout.sizes[0] / block * block : 0;
  if (body == 0) return vectorized;
  // An element's position in its row: its index over the dims merged into the innermost.
  Shape radix(size_t(nd), 0);
  for (int64_t j = 0, r = 1; j < layout.merged[0]; ++j) {
    int64_t d = layout.perm[size_t(j)];
    radix[size_t(d)] = r;
    r *= shape[size_t(d)];
  }
  IndexCounter counter(shape);
  for (int64_t i = 0; i < numel; ++i, counter.next()) {
    int64_t position = 0;
    for (int64_t d = 0; d < nd; ++d) position += counter.index()[size_t(d)] * radix[size_t(d)];
    vectorized[size_t(i)] = position < body;
  }
  return vectorized;
}

namespace {

// One Vectorized<T> accumulator of the cascade sum, lane by lane (IEEE addition per lane
// is what the vector instruction does).
// A GCC vector, so that the accumulators stay in registers (an array was kept on the stack,
// each load stored there in halves and read back whole: a store-forwarding stall per vector).
template <typename T>
struct Lanes {
  static constexpr int64_t size = 32 / int64_t(sizeof(T));
  using Vector [[gnu::vector_size(32)]] = T;
  Vector v = {};
  Lanes& operator+=(const Lanes& other) {
    v += other.v;
    return *this;
  }
};

int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  int64_t bits = 0;
  for (uint64_t y = uint64_t(x) - 1; y; y >>= 1) ++bits;
  return bits;
}

// Upstream's multi_row_sum: `rows` sums at once over `size` steps, each step's values
// first added into level 0; every 2^p steps (p grows with size) a level is folded into
// the next, so only sums of similar magnitude meet.
template <typename Acc, int64_t Rows, typename Load>
[[gnu::always_inline]] inline std::array<Acc, Rows> multi_row_sum(int64_t size, Load load) {
  constexpr int64_t levels = 4;
  int64_t power = std::max<int64_t>(4, ceil_log2(size) / levels);
  int64_t step = int64_t(1) << power, mask = step - 1;
  if (size < step) {
    // No level is ever folded: level 0 alone, then the upper levels' zeros added as below. Most
    // of a short row's time went into zeroing the levels.
    std::array<Acc, Rows> sums{};
    for (int64_t i = 0; i < size; ++i)
      for (int64_t k = 0; k < Rows; ++k) sums[size_t(k)] += load(i, k);
    for (int64_t j = 1; j < levels; ++j)
      for (int64_t k = 0; k < Rows; ++k) sums[size_t(k)] += Acc{};
    return sums;
  }
  Acc acc[levels][Rows] = {};
  int64_t i = 0;
  while (i + step <= size) {
    for (int64_t j = 0; j < step; ++j, ++i)
      for (int64_t k = 0; k < Rows; ++k) acc[0][k] += load(i, k);
    for (int64_t j = 1; j < levels; ++j) {
      for (int64_t k = 0; k < Rows; ++k) {
        acc[j][k] += acc[j - 1][k];
        acc[j - 1][k] = Acc{};
      }
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  for (; i < size; ++i)
    for (int64_t k = 0; k < Rows; ++k) acc[0][k] += load(i, k);
  for (int64_t j = 1; j < levels; ++j)
    for (int64_t k = 0; k < Rows; ++k) acc[0][k] += acc[j][k];
  std::array<Acc, Rows> sums;
  for (int64_t k = 0; k < Rows; ++k) sums[size_t(k)] = acc[0][k];
  return sums;
}

// Upstream's row_sum: the row seen as rows of 4 (four interleaved partial sums), the
// leftover elements added to the first, then the four folded in order.
template <typename Acc, typename Load>
[[gnu::always_inline]] inline Acc row_sum(int64_t size, Load load) {
  int64_t quads = size / 4;
  auto partial = multi_row_sum<Acc, 4>(quads, [&](int64_t i, int64_t k) { return load(i * 4 + k); });
  for (int64_t i = quads * 4; i < size; ++i) partial[0] += load(i);
  for (size_t k = 1; k < 4; ++k) partial[0] += partial[k];
  return partial[0];
}

// cascade_sum's loop over one 2-D block: size0 x size1 elements, strides in elements. Cloned
// for x86-64-v3, row_sum and multi_row_sum inlined into each clone: a Lanes accumulator is one
// AVX register there (on the baseline, two SSE halves kept on the stack: 2-4x upstream's time;
// only additions, so the same bits). Not in the sanitizer build, where the clone read the
// captures of its lambdas as null (UBSan, 2026-12-07): there it is compiled once, for the
// baseline.
#ifdef __SANITIZE_ADDRESS__
#define TN_CLONES_UNSANITIZED
#else
#define TN_CLONES_UNSANITIZED TN_CLONES
#endif
template <typename T, bool IgnoreNan>
TN_CLONES_UNSANITIZED void sum_block(T* out, const T* in, int64_t size0, int64_t size1,
                                     std::array<int64_t, 2> in_strides, std::array<int64_t, 2> out_strides) {
  using V = Lanes<T>;
  auto value = [](T x) { return IgnoreNan && std::isnan(x) ? T(0) : x; };
  auto vector_at = [&](const T* p) {
    V v;
    if constexpr (IgnoreNan) {
      for (int64_t l = 0; l < V::size; ++l) v.v[l] = value(p[l]);
    } else {
      std::memcpy(&v.v, p, sizeof v.v);
    }
    return v;
  };
  auto store = [&](int64_t j, T sum) { out[j * out_strides[1]] += sum; };
  if (out_strides[0] != 0 && out_strides[1] == 0) {  // the reduced dim first
    std::swap(in_strides[0], in_strides[1]);
    std::swap(out_strides[0], out_strides[1]);
    std::swap(size0, size1);
  }
  if (out_strides[0] != 0 && out_strides[1] != 0) {  // nothing reduced here: accumulate
    for (int64_t j = 0; j < size1; ++j)
      for (int64_t i = 0; i < size0; ++i) {
        T& o = out[i * out_strides[0] + j * out_strides[1]];
        o = value(o) + value(in[i * in_strides[0] + j * in_strides[1]]);
      }
    return;
  }
  if (in_strides[0] == 1 && size0 >= V::size) {  // contiguous inner reduction
    int64_t vectors = size0 / V::size;
    for (int64_t j = 0; j < size1; ++j) {
      const T* row = in + j * in_strides[1];
      V acc = row_sum<V>(vectors, [&](int64_t i) { return vector_at(row + i * V::size); });
      T total = 0;
      for (int64_t k = vectors * V::size; k < size0; ++k) total += value(row[k]);
      for (int64_t l = 0; l < V::size; ++l) total += acc.v[l];
      store(j, total);
    }
  } else if (in_strides[1] == 1 && size1 >= V::size) {  // contiguous outer reduction
    int64_t j = 0;
    for (; j + 4 * V::size <= size1; j += 4 * V::size) {
      auto sums = multi_row_sum<V, 4>(
          size0, [&](int64_t i, int64_t k) { return vector_at(in + i * in_strides[0] + j + k * V::size); });
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t l = 0; l < V::size; ++l) store(j + k * V::size + l, sums[size_t(k)].v[l]);
    }
    for (; j + V::size <= size1; j += V::size) {
      V sums = row_sum<V>(size0, [&](int64_t i) { return vector_at(in + i * in_strides[0] + j); });
      for (int64_t l = 0; l < V::size; ++l) store(j + l, sums.v[l]);
    }
    for (; j < size1; ++j)
      store(j, row_sum<T>(size0, [&](int64_t i) { return value(in[i * in_strides[0] + j]); }));
  } else if (in_strides[0] < in_strides[1]) {
    for (int64_t j = 0; j < size1; ++j)
      store(j,
            row_sum<T>(size0, [&](int64_t i) { return value(in[i * in_strides[0] + j * in_strides[1]]); }));
  } else {
    int64_t j = 0;
    for (; j + 3 < size1; j += 4) {
      auto sums = multi_row_sum<T, 4>(size0, [&](int64_t i, int64_t k) {
        return value(in[i * in_strides[0] + (j + k) * in_strides[1]]);
      });
      for (int64_t k = 0; k < 4; ++k) store(j + k, sums[size_t(k)]);
    }
    for (; j < size1; ++j)
      store(j,
            row_sum<T>(size0, [&](int64_t i) { return value(in[i * in_strides[0] + j * in_strides[1]]); }));
  }
}

// A reduction's TensorIterator: the result (contiguous, keepdim applied), the input as
// upstream's converted copy is laid out (a dense one keeps its strides), and the layout
// of both (reduced dims first).
struct Reduction {
  Tensor out;
  Tensor in;
  Layout layout;  // operand 0 the result, 1 the input
};

Reduction make_reduction(const Tensor& self, ScalarType t, const std::optional<std::vector<int64_t>>& dims,
                         bool keepdim) {
  int64_t nd = self.dim();
  std::vector<bool> reduced(size_t(nd), !dims || dims->empty());
  if (dims)
    for (int64_t d : *dims) {
      int64_t w = wrap_dim(d, nd);
      if (nd == 0) continue;
      if (reduced[size_t(w)])
        throw Error("dim " + std::to_string(w) + " appears multiple times in the list of dims");
      reduced[size_t(w)] = true;
    }
  Shape out_shape;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[size_t(d)])
      out_shape.push_back(self.sizes()[size_t(d)]);
    else if (keepdim)
      out_shape.push_back(1);
  Reduction r;
  r.out = Tensor::empty(out_shape, t);
  r.in = self;
  if (self.dtype() != t) {
    r.in = is_non_overlapping_and_dense(self)
               ? Tensor::empty({self.numel()}, t).view_as_strided(self.sizes(), self.strides(), 0)
               : Tensor::empty(self.sizes(), t);
    r.in.copy_from(self);
  }
  // The result seen in the input's shape: stride 0 on reduced dims (a kept size-1 dim of
  // a keepdim result keeps its stride).
  Shape out_strides(size_t(nd), 0);
  const Shape& own = r.out.strides();
  for (int64_t d = 0, o = 0; d < nd; ++d) {
    bool listed = keepdim || !reduced[size_t(d)];
    if (listed && !(reduced[size_t(d)] && self.sizes()[size_t(d)] != 1))
      out_strides[size_t(d)] = own[size_t(o)];
    o += listed;
  }
  r.layout = iterator_layout(self.sizes(), {out_strides, r.in.strides()}, 1);
  return r;
}

// Calls f(offsets) for every index of `sizes` (offsets per operand over `strides`), the
// first dim fastest, as TensorIterator walks.
template <typename F>
void walk(const Shape& sizes, const std::vector<Shape>& strides, F f) {
  Shape reversed(sizes.rbegin(), sizes.rend());
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  IndexCounter counter(reversed);
  size_t nd = sizes.size();
  for (int64_t i = 0; i < total; ++i, counter.next()) {
    std::array<int64_t, 2> offsets{0, 0};
    for (size_t d = 0; d < nd; ++d)
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] += counter.index()[nd - 1 - d] * strides[k][d];
    f(offsets);
  }
}

}  // namespace

Tensor cascade_sum(const Tensor& self, ScalarType t, const std::optional<std::vector<int64_t>>& dims,
                   bool keepdim, bool ignore_nan) {
  Reduction r = make_reduction(self, t, dims, keepdim);
  if (r.out.is_meta()) return r.out;
  TN_DISPATCH_ALL_TYPES(t, "sum", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      std::fill_n(r.out.data_as<scalar_t>(), r.out.numel(), scalar_t(0));
      if (self.numel() == 0) return;
      // The 2-D blocks of the first two dims, for every index of the others.
      const Shape& sizes = r.layout.sizes;
      const Shape &os = r.layout.strides[0], &is = r.layout.strides[1];
      auto at = [](const Shape& v, size_t d, int64_t absent) { return d < v.size() ? v[d] : absent; };
      size_t split = std::min<size_t>(2, sizes.size());
      Shape outer(sizes.begin() + split, sizes.end());
      std::vector<Shape> outer_strides{Shape(os.begin() + split, os.end()),
                                       Shape(is.begin() + split, is.end())};
      scalar_t* po = r.out.data_as<scalar_t>();
      const scalar_t* pi = r.in.data_as<scalar_t>();
      const int64_t size0 = at(sizes, 0, 1), size1 = at(sizes, 1, 1);
      const std::array<int64_t, 2> in_steps{at(is, 0, 0), at(is, 1, 0)},
          out_steps{at(os, 0, 0), at(os, 1, 0)};
      // Contiguous rows, each summed into a result of its own, split between threads as
      // upstream's reduction splits its results: each row's sum whole in one thread, so the
      // bits do not move.
      bool split_rows =
          out_steps[0] == 0 && out_steps[1] != 0 && in_steps[0] == 1 && size0 >= Lanes<scalar_t>::size;
      auto block = ignore_nan ? sum_block<scalar_t, true> : sum_block<scalar_t, false>;
      walk(outer, outer_strides, [&](const std::array<int64_t, 2>& o) {
        if (!split_rows) return block(po + o[0], pi + o[1], size0, size1, in_steps, out_steps);
        parallel_for(size1, units_per_grain(size0), [&](int64_t begin, int64_t end) {
          block(po + o[0] + begin * out_steps[1], pi + o[1] + begin * in_steps[1], size0, end - begin,
                in_steps, out_steps);
        });
      });
    } else {
      throw Error("cascade_sum: float32 and float64 only");
    }
  });
  return r.out;
}

Tensor norm2_float(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  Reduction r = make_reduction(self, ScalarType::Float, dims, keepdim);
  if (r.out.is_meta()) return r.out;
  float* po = r.out.data_as<float>();
  const float* pi = r.in.data_as<float>();
  if (self.numel() == 0) {
    std::fill_n(po, r.out.numel(), 0.0f);
    return r.out;
  }
  // Reducing only size-1 dims is |x| (upstream's linalg_vector_norm shortcut), not
  // sqrt(x * x) rounded.
  bool only_ones = true;
  for (int64_t d = 0; d < self.dim(); ++d)
    if ((!dims || dims->empty() || std::count(dims->begin(), dims->end(), d) ||
         std::count(dims->begin(), dims->end(), d - self.dim())) &&
        self.sizes()[size_t(d)] != 1)
      only_ones = false;
  if (only_ones) {
    Tensor dense = r.in.contiguous();
    for (int64_t i = 0; i < r.out.numel(); ++i) po[i] = std::abs(dense.data_as<float>()[i]);
    return r.out;
  }
  const Shape& sizes = r.layout.sizes;
  const Shape &os = r.layout.strides[0], &is = r.layout.strides[1];
  size_t reduced = 0;
  while (reduced < sizes.size() && os[reduced] == 0) ++reduced;
  Shape kept(sizes.begin() + reduced, sizes.end()), inner(sizes.begin(), sizes.begin() + reduced);
  std::vector<Shape> kept_strides{Shape(os.begin() + reduced, os.end()),
                                  Shape(is.begin() + reduced, is.end())};
  std::vector<Shape> inner_strides{Shape(reduced, 0), Shape(is.begin(), is.begin() + reduced)};
  if (reduced == 1 && is[0] == 1) {
    // The vectorized last-dim kernel: eight lanes accumulate with FMA, are folded in
    // order, then the remainder is added as the compiled loop does (groups of four
    // squares rounded, then added; the last few FMA-contracted).
    int64_t n = sizes[0];
    walk(kept, kept_strides, [&](const std::array<int64_t, 2>& o) {
      const float* x = pi + o[1];
      float lanes[8] = {};
      int64_t d = 0;
      for (; d < n - n % 8; d += 8)
        for (int64_t l = 0; l < 8; ++l) lanes[l] = std::fma(x[d + l], x[d + l], lanes[l]);
      float acc = lanes[0];
      for (int64_t l = 1; l < 8; ++l) acc = acc + lanes[l];
      int64_t grouped = d + (n - d) / 4 * 4;
      for (; d < grouped; ++d) acc = acc + x[d] * x[d];
      for (; d < n; ++d) acc = std::fma(x[d], x[d], acc);
      po[o[0]] = std::sqrt(acc);
    });
    return r.out;
  }
  // The generic reduction: one FMA-contracted running sum per result, in iterator order.
  walk(kept, kept_strides, [&](const std::array<int64_t, 2>& o) {
    float acc = 0;
    walk(inner, inner_strides, [&](const std::array<int64_t, 2>& e) {
      float x = pi[o[1] + e[1]];
      acc = std::fma(x, x, acc);
    });
    po[o[0]] = std::sqrt(acc);
  });
  return r.out;
}

}  // namespace tn
