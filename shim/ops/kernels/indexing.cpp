// Indexing: index, index_put, index_select/add/copy/fill, gather, scatter/scatter_add,
// masked_fill/select/scatter, take, take_along_dim, nonzero, argwhere, where(condition).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// The index dtypes an operator takes, and upstream's refusal of the others (some name the dtype
// given; index_fill's is an IndexError). Every operator takes int64; index_add takes int32 too.
struct IndexDtypes {
  std::string refusal;
  bool names_dtype = false;
  bool int32 = false;
  bool index_error = false;
};
IndexDtypes int64_only(const std::string& op) { return {op + "(): Expected dtype int64 for index"}; }
IndexDtypes long_tensor(const std::string& op) {
  return {op + "(): Expected a long tensor for index, but got ", true};
}

// Index tensors as contiguous int64 values.
Tensor long_index(const Tensor& index, const IndexDtypes& rule) {
  if (index.dtype() != ScalarType::Long && !(rule.int32 && index.dtype() == ScalarType::Int)) {
    std::string message = rule.refusal + (rule.names_dtype ? upstream_type_name(index.dtype()) : "");
    if (rule.index_error) throw IndexError(message);
    throw Error(message);
  }
  return index.to(ScalarType::Long).contiguous();
}

int64_t checked_position(int64_t i, int64_t size, int64_t dim, bool index_error = false) {
  if (i < -size || i >= size) {
    std::string message = "index " + std::to_string(i) + " is out of bounds for dimension " +
                          std::to_string(dim) + " with size " + std::to_string(size);
    if (index_error) throw IndexError(message);
    throw Error(message);
  }
  return i < 0 ? i + size : i;
}

// Calls f(position in index, source offset along every dim but `dim`, index value).
// The walk shared by gather and scatter: positions of `index`, mapped into `target`
// whose `dim` coordinate is replaced by the index value.
// Its checks of the shapes and the index's dtype alone: all a meta call makes.
void check_along_index(const Tensor& target, int64_t dim, const Tensor& index, const char* name) {
  if (index.dim() != target.dim() && !(index.dim() <= 1 && target.dim() <= 1))
    throw Error(std::string("Index tensor must have the same number of dimensions as ") +
                (std::string(name) == "gather" ? "input" : "self") + " tensor");
  if (index.numel() == 0) return;  // upstream checks the dtype of a non-empty index only
  long_index(index, int64_only(name));
  int64_t nd = std::max<int64_t>(target.dim(), 1);
  Shape tsizes = target.dim() ? target.sizes() : Shape{1};
  Shape isizes = index.dim() ? index.sizes() : Shape{1};
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim && isizes[size_t(d)] > tsizes[size_t(d)])
      throw Error("Size does not match at dimension " + std::to_string(d) + " expected index " +
                  shape_str(isizes) + " to be smaller than self " + shape_str(tsizes) +
                  " apart from dimension " + std::to_string(dim));
}

template <typename F>
void along_index(const Tensor& target, int64_t dim, const Tensor& index, const char* name, F f) {
  check_along_index(target, dim, index, name);
  if (index.numel() == 0) return;
  Tensor idx = long_index(index, int64_only(name));
  const int64_t* pi = idx.data_as<int64_t>();
  int64_t n = idx.numel();
  int64_t nd = std::max<int64_t>(target.dim(), 1);
  Shape tsizes = target.dim() ? target.sizes() : Shape{1};
  Shape tstrides = target.dim() ? target.strides() : Shape{1};
  IndexCounter counter(idx.dim() ? idx.sizes() : Shape{1});
  for (int64_t p = 0; p < n; ++p, counter.next()) {
    int64_t value = checked_position(pi[p], tsizes[size_t(dim)], dim);
    int64_t offset = 0;
    for (int64_t d = 0; d < nd; ++d)
      offset += (d == dim ? value : counter.index()[size_t(d)]) * tstrides[size_t(d)];
    f(p, counter.index(), offset);
  }
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, self.dim());
  Tensor out = Tensor::empty(index.sizes(), self.dtype());
  if (out.is_meta()) {  // the meta device: the shape and dtype are the result
    check_along_index(self, dim, index, "gather");
    return out;
  }
  TN_DISPATCH_ALL_TYPES(self.dtype(), "gather", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* src = self.template data_as<scalar_t>();
    scalar_t* o = out.template data_as<scalar_t>();
    along_index(self, dim, index, "gather",
                [&](int64_t p, const Shape&, int64_t offset) { o[p] = src[offset]; });
  });
  return out;
}

enum class Reduce { None, Add, Multiply };

Reduce parse_reduce(const std::optional<std::string>& r) {
  if (!r) return Reduce::None;
  if (*r == "add") return Reduce::Add;
  if (*r == "multiply") return Reduce::Multiply;
  throw Error("reduce argument must be either add or multiply.");
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Reduce reduce) {
  dim = wrap_dim(dim, self.dim());
  Tensor out = self.clone();
  bool scalar_src = src.dim() == 0 && src.impl()->wrapped_number;
  Tensor source = src.to(self.dtype());
  if (!scalar_src && src.dtype() != self.dtype())
    throw Error("scatter(): Expected self.dtype to be equal to src.dtype");
  if (out.is_meta()) {  // the meta device: the shape and dtype are the result
    check_along_index(out, dim, index, "scatter");
    return out;
  }
  TN_DISPATCH_ALL_TYPES(self.dtype(), "scatter", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* o = out.template data_as<scalar_t>();
    const scalar_t* s = source.template data_as<scalar_t>();
    along_index(out, dim, index, "scatter", [&](int64_t, const Shape& at, int64_t offset) {
      int64_t so = 0;
      if (!scalar_src)
        for (int64_t d = 0; d < source.dim(); ++d) so += at[size_t(d)] * source.strides()[size_t(d)];
      scalar_t v = s[so];
      if (reduce == Reduce::None)
        o[offset] = v;
      else if constexpr (std::is_same_v<scalar_t, bool>)
        o[offset] = reduce == Reduce::Add ? (o[offset] || v) : (o[offset] && v);
      else if (reduce == Reduce::Add)
        o[offset] = scalar_t(compute_t<scalar_t>(o[offset]) + compute_t<scalar_t>(v));
      else
        o[offset] = scalar_t(compute_t<scalar_t>(o[offset]) * compute_t<scalar_t>(v));
    });
  });
  return out;
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  if (index.dim() > 1) throw IndexError("index_select(): Index is supposed to be a vector");
  if (index.dtype() != ScalarType::Long && index.dtype() != ScalarType::Int)
    throw Error("index_select(): Expected dtype int32 or int64 for index");
  dim = wrap_dim(dim, self.dim());
  Tensor idx = index.to(ScalarType::Long).contiguous();
  Shape shape = self.sizes();
  int64_t n = idx.numel();
  if (self.dim() > 0) shape[size_t(dim)] = n;
  Tensor out = Tensor::empty(self.dim() == 0 ? Shape{} : shape, self.dtype());
  // The meta device: the shape and dtype are the result; the indices' values, and so their
  // range check, are unknown (upstream's meta index_select does not check them either).
  if (out.is_meta()) return out;
  int64_t size = self.dim() ? self.size(dim) : 1;
  const int64_t* positions = idx.data_as<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (positions[i] < -size || positions[i] >= size) throw IndexError("index out of range in self");
  if (self.dim() == 0) {
    if (n > 0) out.copy_from(self);
    return out;
  }
  // Self as [outer, size, inner] in memory (contiguous): each chosen slice is `outer` runs of
  // `inner` elements, copied as bytes (an embedding's rows, one memcpy each).
  Tensor x = self.contiguous();
  AlongDim along(x.sizes(), dim);
  const size_t run = size_t(along.inner) * x.itemsize();
  const char* from = static_cast<const char*>(x.data());
  char* to = static_cast<char*>(out.data());
  for (int64_t o = 0; o < along.outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = positions[i] < 0 ? positions[i] + size : positions[i];
      std::memcpy(to + size_t(o * n + i) * run, from + size_t(o * size + k) * run, run);
    }
  return out;
}

// index_add / index_copy / index_fill share one walk over (index, slice) pairs.
template <typename F>
void for_index_slices(const Tensor& target, int64_t dim, const Tensor& index, const char* name,
                      const IndexDtypes& dtypes, F f) {
  if (index.dim() > 1) throw IndexError(std::string(name) + "(): Index is supposed to be a vector");
  Tensor idx = long_index(index, dtypes);
  if (target.is_meta()) return;  // the meta device: the index's values are not read
  int64_t size = target.dim() ? target.size(dim) : 1;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t k = idx.data_as<int64_t>()[i];
    if (k < -size || k >= size)
      throw IndexError(std::string(name) + "(): index " + std::to_string(k) + " is out of bounds");
    if (k < 0) k += size;
    f(i, target.dim() ? ops::select(target, dim, k) : target);
  }
}

// index_add's common case in one pass over memory: a floating `out` (contiguous) and a source
// of its dtype and sizes but `n` along dim, as an embedding's gradient. Each index's slice is
// added in index order (upstream's slice order, which decides the sums where indices repeat),
// each element rounded as add's kernel rounds out + alpha * source. False, having done nothing,
// for anything else, which the general walk takes.
bool add_rows_in_place(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source,
                       const Scalar& alpha, const IndexDtypes& dtypes) {
  if (out.dim() == 0 || index.dim() > 1 || out.is_meta() || !out.is_contiguous() ||
      !is_floating(out.dtype()) || source.dtype() != out.dtype() || alpha.is_bool())
    return false;
  Shape expected = out.sizes();
  expected[size_t(dim)] = index.numel();
  if (source.sizes() != expected) return false;
  Tensor idx = long_index(index, dtypes), from = source.contiguous();
  AlongDim along(out.sizes(), dim);
  const int64_t n = idx.numel(), *positions = idx.data_as<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (positions[i] < -along.size || positions[i] >= along.size)
      throw IndexError("index_add(): index " + std::to_string(positions[i]) + " is out of bounds");
  TN_DISPATCH_ALL_TYPES(out.dtype(), "index_add", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (is_float_v<compute_t<scalar_t>>) {
      using c = compute_t<scalar_t>;
      const c al = scalar_argument<scalar_t>(alpha);
      const scalar_t* src = from.template data_as<scalar_t>();
      scalar_t* dst = out.template data_as<scalar_t>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = positions[i] < 0 ? positions[i] + along.size : positions[i];
        for (int64_t o = 0; o < along.outer; ++o) {
          scalar_t* row = dst + (o * along.size + k) * along.inner;
          const scalar_t* added = src + (o * n + i) * along.inner;
          for (int64_t j = 0; j < along.inner; ++j)
            row[j] = scalar_t(add_scaled<scalar_t>(c(row[j]), c(added[j]), al));
        }
      }
    }
  });
  return true;
}

// index_fill_: each selected slice of self filled in place, through self's strides.
Tensor index_fill_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  if (value.dim() != 0)
    throw Error("index_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
                std::to_string(value.dim()) + " dimension(s).");
  int64_t d = self.dim() ? wrap_dim(dim, self.dim()) : 0;
  for_index_slices(self, d, index, "index_fill",
                   {"index_fill_(): Expected dtype int64 for index.", false, false, true},
                   [&](int64_t, const Tensor& target) { target.copy_from(value); });
  return self;
}

Tensor slice_of(const Tensor& source, int64_t dim, int64_t i) {
  return source.dim() ? ops::select(source, dim, i) : source;
}

Tensor bool_mask(const Tensor& mask, const char* name) {
  if (mask.dtype() != ScalarType::Bool && mask.dtype() != ScalarType::Byte)
    throw Error(std::string(name) + " only supports boolean masks, but got mask with dtype " +
                scalar_type_name(mask.dtype()));
  return mask.to(ScalarType::Bool);
}

// masked_fill_: `value` written only where the mask (broadcast over self) is set, through
// self's strides, so an expanded self holds what upstream's loop leaves in it.
const Tensor& masked_fill_into(const Tensor& self, const Tensor& mask, const Tensor& value) {
  Tensor m = bool_mask(mask, "masked_fill_");
  if (value.dim() != 0)
    throw Error("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
                std::to_string(value.dim()) + " dimension(s).");
  if (broadcast_shapes(self.sizes(), m.sizes()) != self.sizes())
    throw Error("The size of tensor a must match the size of tensor b");
  Tensor v = value.to(self.dtype());
  Tensor expanded = ops::expand(m, self.sizes(), false);
  if (self.is_meta()) return self;  // the meta device: nothing to write
  TN_DISPATCH_ALL_TYPES(self.dtype(), "masked_fill_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* out = self.template data_as<scalar_t>();
    const bool* pm = expanded.data_as<bool>();
    scalar_t fill = *v.template data_as<scalar_t>();
    strided_loop<2>(self.sizes(), {self.strides(), expanded.strides()}, [&](const std::array<int64_t, 2>& o) {
      if (pm[o[1]]) out[o[0]] = fill;
    });
  });
  return self;
}

// The functional form broadcasts self and mask against each other, as upstream's.
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value) {
  Tensor out = ops::expand(self, broadcast_shapes(self.sizes(), mask.sizes()), false).clone();
  return masked_fill_into(out, mask, value);
}

// masked_scatter_: upstream's serial loop over (self, mask) in TensorIterator's order, taking
// the next element of the contiguous source (the source itself when contiguous: read as the
// loop writes) wherever the mask is set.
const Tensor& masked_scatter_into(const Tensor& self, const Tensor& mask, const Tensor& source) {
  Tensor m = bool_mask(mask, "masked_scatter_");
  if (broadcast_shapes(self.sizes(), m.sizes()) != self.sizes())
    throw Error("The size of tensor a must match the size of tensor b");
  if (source.dtype() != self.dtype())
    throw Error(std::string("masked_scatter: expected self and source to have same dtypes but got") +
                upstream_type_name(self.dtype()) + " and " + upstream_type_name(source.dtype()));
  if (self.is_meta()) return self;  // the meta device: nothing to write, the mask's ones not counted
  Tensor src = source.contiguous();
  std::vector<Tensor> views = in_iteration_order({self, ops::expand(m, self.sizes(), false)});
  int64_t used = 0, available = src.numel();
  TN_DISPATCH_ALL_TYPES(self.dtype(), "masked_scatter_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* out = views[0].template data_as<scalar_t>();
    const bool* pm = views[1].data_as<bool>();
    const scalar_t* in = src.template data_as<scalar_t>();
    strided_loop<2>(views[0].sizes(), {views[0].strides(), views[1].strides()},
                    [&](const std::array<int64_t, 2>& o) {
                      if (!pm[o[1]]) return;
                      if (used >= available)
                        throw Error("Number of elements of source < number of ones in mask");
                      out[o[0]] = in[used++];
                    });
  });
  return self;
}

Tensor nonzero(const Tensor& self) {
  int64_t nd = self.dim();
  std::vector<int64_t> coords;
  TN_DISPATCH_ALL_TYPES(self.dtype(), "nonzero", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if (self.numel() == 0) return;
    Shape sizes = nd ? self.sizes() : Shape{1};
    IndexCounter counter(sizes);
    const scalar_t* p = self.template data_as<scalar_t>();
    for (int64_t i = 0; i < self.numel(); ++i, counter.next()) {
      int64_t o = 0;
      for (int64_t d = 0; d < nd; ++d) o += counter.index()[size_t(d)] * self.strides()[size_t(d)];
      if (compute_t<scalar_t>(p[o]) != compute_t<scalar_t>(0))
        for (int64_t d = 0; d < nd; ++d) coords.push_back(counter.index()[size_t(d)]);
      if (nd == 0 && compute_t<scalar_t>(p[o]) != compute_t<scalar_t>(0)) coords.push_back(0);
    }
  });
  int64_t rows = nd ? int64_t(coords.size()) / nd : int64_t(coords.size());
  Tensor out = Tensor::empty({rows, nd}, ScalarType::Long);
  if (nd) std::copy(coords.begin(), coords.end(), out.data_as<int64_t>());
  return out;
}

// Advanced indexing: masks become their nonzero coordinates, index tensors broadcast
// together, and the result dims go where the first indexed dim was when the indexed
// dims are adjacent, else to the front (numpy's rule, as upstream's).
struct AdvancedIndex {
  Tensor source;                 // self permuted so indexed dims come first when not adjacent
  std::vector<Tensor> indices;   // one broadcast int64 tensor per indexed dim (undefined for None)
  Shape index_shape;             // broadcast shape of the index tensors
  Shape before, after;           // sizes of the non-indexed dims before/after the indexed block
  int64_t first = 0, count = 0;  // position and number of indexed dims in `source`
  Shape result_shape;
};

AdvancedIndex prepare_index(const Tensor& self, const std::vector<std::optional<Tensor>>& raw) {
  std::vector<std::optional<Tensor>> expanded;
  for (const auto& index : raw) {
    if (index && (index->dtype() == ScalarType::Bool || index->dtype() == ScalarType::Byte)) {
      Tensor coords = nonzero(*index);
      int64_t mask_dim = index->dim();
      size_t base = expanded.size();
      for (int64_t d = 0; d < mask_dim; ++d) {
        int64_t self_dim = int64_t(base) + d;
        if (self_dim >= self.dim() || index->size(d) != self.size(self_dim))
          throw IndexError("The shape of the mask " + shape_str(index->sizes()) + " at index " +
                           std::to_string(d) + " does not match the shape of the indexed tensor " +
                           shape_str(self.sizes()) + " at index " + std::to_string(self_dim));
        expanded.emplace_back(ops::select(coords, int64_t{1}, d));
      }
    } else if (index && !is_integral(index->dtype(), false)) {
      throw IndexError("tensors used as indices must be long, byte or bool tensors");
    } else {
      expanded.push_back(index);
    }
  }
  if (int64_t(expanded.size()) > self.dim())
    throw IndexError("too many indices for tensor of dimension " + std::to_string(self.dim()) + " (got " +
                     std::to_string(expanded.size()) + ")");
  while (int64_t(expanded.size()) < self.dim()) expanded.emplace_back();
  AdvancedIndex ai;
  std::vector<int64_t> indexed;
  for (size_t d = 0; d < expanded.size(); ++d)
    if (expanded[d]) indexed.push_back(int64_t(d));
  bool adjacent = !indexed.empty() && indexed.back() - indexed.front() + 1 == int64_t(indexed.size());
  Shape perm;
  if (adjacent) {
    for (int64_t d = 0; d < self.dim(); ++d) perm.push_back(d);
  } else {
    perm = indexed;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (!expanded[size_t(d)]) perm.push_back(d);
  }
  ai.source = ops::permute(self, perm);
  ai.first = adjacent ? indexed.front() : 0;
  ai.count = int64_t(indexed.size());
  for (int64_t d : indexed) ai.index_shape = broadcast_shapes(ai.index_shape, expanded[size_t(d)]->sizes());
  for (int64_t k = 0; k < ai.count; ++k) {
    int64_t src_dim = ai.first + k;
    Tensor idx =
        ops::expand(expanded[size_t(indexed[size_t(k)])]->to(ScalarType::Long), ai.index_shape, false)
            .contiguous();
    int64_t size = ai.source.size(src_dim);
    int64_t* positions = idx.data_as<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i)
      positions[i] = checked_position(positions[i], size, indexed[size_t(k)], /*index_error=*/true);
    ai.indices.push_back(idx);
  }
  ai.before.assign(ai.source.sizes().begin(), ai.source.sizes().begin() + ai.first);
  ai.after.assign(ai.source.sizes().begin() + ai.first + ai.count, ai.source.sizes().end());
  ai.result_shape = ai.before;
  ai.result_shape.insert(ai.result_shape.end(), ai.index_shape.begin(), ai.index_shape.end());
  ai.result_shape.insert(ai.result_shape.end(), ai.after.begin(), ai.after.end());
  return ai;
}

// Calls f(result position, source offset) for every element of the indexing result.
template <typename F>
void for_each_indexed(const AdvancedIndex& ai, F f) {
  int64_t total = 1;
  for (int64_t s : ai.result_shape) total *= s;
  if (total == 0) return;
  IndexCounter counter(ai.result_shape);
  int64_t nb = int64_t(ai.before.size()), ni = int64_t(ai.index_shape.size());
  Shape index_strides = contiguous_strides(ai.index_shape);
  const Shape& st = ai.source.strides();
  std::vector<const int64_t*> positions;
  for (const Tensor& idx : ai.indices) positions.push_back(idx.data_as<int64_t>());
  for (int64_t p = 0; p < total; ++p, counter.next()) {
    const Shape& at = counter.index();
    int64_t offset = 0;
    for (int64_t d = 0; d < nb; ++d) offset += at[size_t(d)] * st[size_t(d)];
    int64_t flat_index = 0;
    for (int64_t d = 0; d < ni; ++d) flat_index += at[size_t(nb + d)] * index_strides[size_t(d)];
    for (int64_t k = 0; k < ai.count; ++k)
      offset += positions[size_t(k)][flat_index] * st[size_t(ai.first + k)];
    for (size_t d = 0; d < ai.after.size(); ++d)
      offset += at[size_t(nb + ni) + d] * st[size_t(ai.first + ai.count) + d];
    f(p, offset);
  }
}

Tensor index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices) {
  AdvancedIndex ai = prepare_index(self, indices);
  Tensor out = Tensor::empty(ai.result_shape, self.dtype());
  if (out.is_meta()) return out;  // the meta device: the indices' values are not read
  TN_DISPATCH_ALL_TYPES(self.dtype(), "index", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* src = ai.source.template data_as<scalar_t>();
    scalar_t* o = out.template data_as<scalar_t>();
    for_each_indexed(ai, [&](int64_t p, int64_t offset) { o[p] = src[offset]; });
  });
  return out;
}

const Tensor& index_put_(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                         const Tensor& values, bool accumulate) {
  AdvancedIndex ai = prepare_index(self, indices);
  if (values.dtype() != self.dtype())
    throw Error("Index put requires the source and destination dtypes match, got " +
                std::string(upstream_type_name(self.dtype())) + " for the destination and " +
                upstream_type_name(values.dtype()) + " for the source.");
  Tensor v = ops::expand(values, ai.result_shape, false).contiguous();
  if (self.is_meta()) return self;  // the meta device: nothing to write, the indices' values not read
  TN_DISPATCH_ALL_TYPES(self.dtype(), "index_put_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* dst = ai.source.template data_as<scalar_t>();
    const scalar_t* pv = v.template data_as<scalar_t>();
    for_each_indexed(ai, [&](int64_t p, int64_t offset) {
      if (!accumulate)
        dst[offset] = pv[p];
      else if constexpr (std::is_same_v<scalar_t, bool>)
        dst[offset] = dst[offset] || pv[p];
      else
        dst[offset] = scalar_t(compute_t<scalar_t>(dst[offset]) + compute_t<scalar_t>(pv[p]));
    });
  });
  return self;
}

}  // namespace

TN_KERNEL("aten::gather", { return gather(a.tensor(0), a.integer(1), a.tensor(2)); });
TN_KERNEL("aten::scatter.src",
          { return scatter(a.tensor(0), a.integer(1), a.tensor(2), a.tensor(3), Reduce::None); });
TN_KERNEL("aten::scatter.value", {
  return scatter(a.tensor(0), a.integer(1), a.tensor(2), scalar_tensor(a.scalar(3)), Reduce::None);
});
TN_KERNEL("aten::scatter.reduce", {
  return scatter(a.tensor(0), a.integer(1), a.tensor(2), a.tensor(3), parse_reduce(a.optional_string(4)));
});
TN_KERNEL("aten::scatter.value_reduce", {
  return scatter(a.tensor(0), a.integer(1), a.tensor(2), scalar_tensor(a.scalar(3)),
                 parse_reduce(a.optional_string(4)));
});
TN_KERNEL("aten::scatter_add",
          { return scatter(a.tensor(0), a.integer(1), a.tensor(2), a.tensor(3), Reduce::Add); });
TN_KERNEL("aten::index_select", { return index_select(a.tensor(0), a.integer(1), a.tensor(2)); });
TN_KERNEL("aten::index_add", {
  const Tensor& self = a.tensor(0);
  int64_t dim = self.dim() ? wrap_dim(a.integer(1), self.dim()) : 0;
  Tensor out = self.clone();
  const Tensor& source = a.tensor(3);
  Scalar alpha = a.scalar(4);
  IndexDtypes dtypes{"index_add_(): Expected dtype int32/int64 for index but got: ", true, true};
  if (add_rows_in_place(out, dim, a.tensor(2), source, alpha, dtypes)) return out;
  for_index_slices(out, dim, a.tensor(2), "index_add", dtypes, [&](int64_t i, const Tensor& target) {
    target.copy_from(ops::add(target, slice_of(source, dim, i), alpha));
  });
  return out;
});
TN_KERNEL("aten::index_copy", {
  const Tensor& self = a.tensor(0);
  int64_t dim = self.dim() ? wrap_dim(a.integer(1), self.dim()) : 0;
  Tensor out = self.clone();
  for_index_slices(out, dim, a.tensor(2), "index_copy", long_tensor("index_copy_"),
                   [&](int64_t i, const Tensor& target) { target.copy_from(slice_of(a.tensor(3), dim, i)); });
  return out;
});
TN_KERNEL("aten::index_fill_.int_Scalar",
          { return index_fill_into(a.tensor(0), a.integer(1), a.tensor(2), scalar_tensor(a.scalar(3))); });
TN_KERNEL("aten::index_fill_.int_Tensor",
          { return index_fill_into(a.tensor(0), a.integer(1), a.tensor(2), a.tensor(3)); });
TN_KERNEL("aten::index_fill.int_Scalar", {
  return index_fill_into(a.tensor(0).clone(), a.integer(1), a.tensor(2), scalar_tensor(a.scalar(3)));
});
TN_KERNEL("aten::index_fill.int_Tensor",
          { return index_fill_into(a.tensor(0).clone(), a.integer(1), a.tensor(2), a.tensor(3)); });
TN_KERNEL("aten::masked_fill.Scalar",
          { return masked_fill(a.tensor(0), a.tensor(1), scalar_tensor(a.scalar(2))); });
TN_KERNEL("aten::masked_fill.Tensor", { return masked_fill(a.tensor(0), a.tensor(1), a.tensor(2)); });
TN_KERNEL("aten::masked_fill_.Scalar",
          { return masked_fill_into(a.tensor(0), a.tensor(1), scalar_tensor(a.scalar(2))); });
TN_KERNEL("aten::masked_fill_.Tensor", { return masked_fill_into(a.tensor(0), a.tensor(1), a.tensor(2)); });
TN_KERNEL("aten::masked_select", {
  Tensor mask = bool_mask(a.tensor(1), "masked_select");
  Shape shape = broadcast_shapes(a.tensor(0).sizes(), mask.sizes());
  if (shape.empty()) shape = {1};  // the result is 1-D even for 0-d operands
  Tensor self = ops::expand(a.tensor(0), shape, false);
  return index(self, {ops::expand(mask, shape, false)});
});
TN_KERNEL("aten::masked_scatter_", { return masked_scatter_into(a.tensor(0), a.tensor(1), a.tensor(2)); });
TN_KERNEL("aten::masked_scatter", {
  const Tensor& self = a.tensor(0);
  Tensor out = ops::expand(self, broadcast_shapes(self.sizes(), a.tensor(1).sizes()), false).clone();
  return masked_scatter_into(out, a.tensor(1), a.tensor(2));
});
TN_KERNEL("aten::take", {
  Tensor source = flat(a.tensor(0));
  Tensor idx = long_index(a.tensor(1), long_tensor("take"));
  int64_t n = source.numel();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t k = idx.data_as<int64_t>()[i];
    if (k < -n || k >= n)
      throw IndexError("out of range: tried to access index " + std::to_string(k) + " on a tensor of " +
                       std::to_string(n) + " elements.");
  }
  return index(source, {idx});
});
TN_KERNEL("aten::take_along_dim", {
  const Tensor& self = a.tensor(0);
  const Tensor& indices = a.tensor(1);
  auto dim = a.optional_integer(2);
  if (!dim) return ops::gather(flat(self), 0, flat(indices));
  if (self.dim() != indices.dim())
    throw Error(
        "torch.take_along_dim(): input and indices should have the same number of dimensions, but got " +
        std::to_string(self.dim()) + " dimensions for input, and " + std::to_string(indices.dim()) +
        " dimensions for indices");
  int64_t d = wrap_dim(*dim, self.dim());
  self.size(d);  // a 0-dim input has no dim to take along: upstream's IndexError
  Shape self_shape = self.sizes(), index_shape = indices.sizes();
  self_shape[size_t(d)] = 1;
  index_shape[size_t(d)] = 1;
  Shape common = broadcast_shapes(self_shape, index_shape);
  Shape s = common, i = common;
  s[size_t(d)] = self.size(d);
  i[size_t(d)] = indices.size(d);
  return ops::gather(ops::expand(self, s, false), d, ops::expand(indices, i, false));
});
TN_KERNEL("aten::nonzero", { return nonzero(a.tensor(0)); });
TN_KERNEL("aten::argwhere", { return nonzero(a.tensor(0)); });
TN_KERNEL("aten::nonzero_numpy", {
  const Tensor& self = a.tensor(0);
  Tensor coords = nonzero(self.dim() == 0 ? ops::unsqueeze(self, int64_t{0}) : self);
  std::vector<Tensor> columns;
  for (int64_t d = 0; d < coords.size(1); ++d)
    columns.push_back(ops::select(coords, int64_t{1}, d).contiguous());
  return columns;
});
TN_KERNEL("aten::index.Tensor", { return index(a.tensor(0), a.optional_tensor_list(1)); });
TN_KERNEL("aten::index_put_",
          { return index_put_(a.tensor(0), a.optional_tensor_list(1), a.tensor(2), a.boolean(3)); });
TN_KERNEL("aten::_index_put_impl_",
          { return index_put_(a.tensor(0), a.optional_tensor_list(1), a.tensor(2), a.boolean(3)); });
TN_KERNEL("aten::index_put", {
  Tensor out = a.tensor(0).clone();
  return index_put_(out, a.optional_tensor_list(1), a.tensor(2), a.boolean(3));
});
TN_KERNEL("aten::where", { return ops::nonzero_numpy(a.tensor(0)); });

}  // namespace tn
