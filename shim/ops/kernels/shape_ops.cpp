// Joining, splitting and rearranging tensors: cat/stack and their variants, split,
// chunk, unbind, flip, roll, repeat, tile, repeat_interleave, tril/triu, diag,
// diagonal, movedim, broadcast_tensors, rot90, meshgrid; dtype queries; equality.
#include <numeric>

#include "common.h"

namespace tn {

namespace {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("torch.cat(): expected a non-empty list of Tensors");
  ResultType r;
  const Tensor* reference = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    r.add(t);
    if (t.dim() == 0)
      throw Error("zero-dimensional tensor (at position " + std::to_string(i) + ") cannot be concatenated");
    // Upstream still skips legacy empty 1-D tensors of any other rank.
    if (!(t.dim() == 1 && t.size(0) == 0) && !reference) reference = &t;
  }
  ScalarType type = r.get();
  if (!reference) return Tensor::empty({0}, type);
  dim = wrap_dim(dim, reference->dim());
  Shape shape = reference->sizes();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.size(0) == 0) continue;
    if (t.dim() != reference->dim())
      throw Error("Tensors must have same number of dimensions: got " + std::to_string(reference->dim()) +
                  " and " + std::to_string(t.dim()));
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim && t.sizes()[size_t(d)] != shape[size_t(d)])
        throw Error("Sizes of tensors must match except in dimension " + std::to_string(dim) +
                    ". Expected size " + std::to_string(shape[size_t(d)]) + " but got size " +
                    std::to_string(t.sizes()[size_t(d)]) + " for tensor number " + std::to_string(i) +
                    " in the list.");
    total += t.sizes()[size_t(dim)];
  }
  shape[size_t(dim)] = total;
  Tensor out = Tensor::empty(shape, type);
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    int64_t n = t.sizes()[size_t(dim)];
    op("aten::slice", "Tensor", {out, dim, offset, offset + n, int64_t{1}}).copy_from(t);
    offset += n;
  }
  return out;
}

Tensor stack_tensors(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].sizes() != tensors[0].sizes())
      throw Error("stack expects each tensor to be equal size, but got " + shape_str(tensors[0].sizes()) +
                  " at entry 0 and " + shape_str(tensors[i].sizes()) + " at entry " + std::to_string(i));
  dim = wrap_dim(dim, tensors[0].dim() + 1);
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) expanded.push_back(op("aten::unsqueeze", "", {t, dim}));
  return cat(expanded, dim);
}

std::vector<Tensor> split_sizes(const Tensor& self, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = wrap_dim(dim, self.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      throw Error(
          "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=" +
          shape_str(sizes));
    total += s;
  }
  if (total != self.size(dim))
    throw Error("split_with_sizes expects split_sizes to sum exactly to " + std::to_string(self.size(dim)) +
                " (input tensor's size at dimension " + std::to_string(dim) +
                "), but got split_sizes=" + shape_str(sizes));
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(op("aten::narrow", "", {self, dim, start, s}));
    start += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& self, int64_t size, int64_t dim) {
  if (self.dim() == 0) throw Error("split expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, self.dim());
  int64_t length = self.size(dim);
  if (size < 0)
    throw Error("split expects split_size be non-negative, but got split_size=" + std::to_string(size));
  if (size == 0 && length != 0)
    throw Error("split_size can only be 0 if dimension size is 0, but got dimension size of " +
                std::to_string(length));
  int64_t count = size == 0 ? 1 : std::max<int64_t>((length + size - 1) / size, 1);
  std::vector<int64_t> sizes(size_t(count), size);
  sizes.back() = size == 0 ? 0 : length - size * (count - 1);
  return split_sizes(self, sizes, dim);
}

std::vector<Tensor> tensor_split(const Tensor& self, const std::vector<int64_t>& indices, int64_t dim) {
  dim = wrap_dim(dim, self.dim());
  int64_t length = self.size(dim), start = 0;
  std::vector<Tensor> parts;
  for (int64_t index : indices) {
    int64_t stop = std::clamp<int64_t>(index < 0 ? index + length : index, 0, length);
    start = std::clamp<int64_t>(start, 0, length);
    parts.push_back(op("aten::slice", "Tensor", {self, dim, start, std::max(start, stop), int64_t{1}}));
    start = std::max(start, stop);
  }
  parts.push_back(op("aten::slice", "Tensor", {self, dim, start, length, int64_t{1}}));
  return parts;
}

Tensor flip(const Tensor& self, const std::vector<int64_t>& dims) {
  if (self.dim() == 0) {  // nothing to reverse; the dims must still be valid for a scalar
    for (int64_t d : dims) wrap_dim(d, 0);
    return self.clone();
  }
  std::vector<bool> flipped(size_t(self.dim()), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, self.dim());
    if (flipped[size_t(w)])
      throw Error("dim " + std::to_string(w) + " appears multiple times in the list of dims");
    flipped[size_t(w)] = true;
  }
  // A negatively strided view has no representation here, so copy through one.
  Shape strides = self.strides();
  int64_t offset = self.offset();
  for (int64_t d = 0; d < self.dim(); ++d)
    if (flipped[size_t(d)] && self.sizes()[size_t(d)] > 0) {
      offset += (self.sizes()[size_t(d)] - 1) * strides[size_t(d)];
      strides[size_t(d)] = -strides[size_t(d)];
    }
  Tensor out = Tensor::empty(self.sizes(), self.dtype());
  out.copy_from(self.view_as_strided(self.sizes(), strides, offset));
  return out;
}

Tensor roll(const Tensor& self, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw Error("shifts and dimensions must align. shifts: " + std::to_string(shifts.size()) + ", dims:0");
    Tensor rolled = roll(op("aten::reshape", "", {self, Shape{self.numel()}}), shifts, {0});
    return op("aten::reshape", "", {rolled, self.sizes()});
  }
  if (shifts.size() != dims.size())
    throw Error("shifts and dimensions must align. shifts: " + std::to_string(shifts.size()) +
                ", dims:" + std::to_string(dims.size()));
  Tensor out = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], self.dim());
    int64_t n = out.size(d);
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    Tensor tail = op("aten::narrow", "", {out, d, n - s, s});
    Tensor head = op("aten::narrow", "", {out, d, int64_t{0}, n - s});
    out = cat({tail, head}, d);
  }
  return out.same(self) ? self.clone() : out;
}

Tensor repeat(const Tensor& self, const std::vector<int64_t>& repeats) {
  if (int64_t(repeats.size()) < self.dim())
    throw Error("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  size_t n = repeats.size();
  Shape padded(n - size_t(self.dim()), 1);
  padded.insert(padded.end(), self.sizes().begin(), self.sizes().end());
  Tensor source = op("aten::reshape", "", {self, padded});
  // View the output as (r0, s0, r1, s1, ...) and broadcast the source over the r's.
  Shape out_shape(n), split_shape, expanded_shape;
  for (size_t i = 0; i < n; ++i) {
    if (repeats[i] < 0)
      throw Error("Trying to create tensor with negative dimension " + std::to_string(repeats[i]));
    out_shape[i] = padded[i] * repeats[i];
    split_shape.push_back(repeats[i]);
    split_shape.push_back(padded[i]);
  }
  Tensor out = Tensor::empty(out_shape, self.dtype());
  Shape source_split;
  for (size_t i = 0; i < n; ++i) {
    source_split.push_back(1);
    source_split.push_back(padded[i]);
  }
  Tensor target = out.view_as_strided(split_shape, contiguous_strides(split_shape), 0);
  target.copy_from(op("aten::reshape", "", {source, source_split}));
  return out;
}

Tensor repeat_interleave_counts(const Tensor& counts) {
  if (counts.dim() > 1) throw Error("repeat_interleave only accept 1D vector as repeat");
  Tensor c = counts.to(ScalarType::Long).contiguous();
  int64_t total = 0;
  for (int64_t i = 0; i < c.numel(); ++i) {
    int64_t k = c.data_as<int64_t>()[i];
    if (k < 0) throw Error("repeats can not be negative");
    total += k;
  }
  Tensor out = Tensor::empty({total}, ScalarType::Long);
  int64_t* o = out.data_as<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    for (int64_t k = 0; k < c.data_as<int64_t>()[i]; ++k) *o++ = i;
  return out;
}

Tensor repeat_interleave(const Tensor& self, const Tensor& repeats, std::optional<int64_t> dim) {
  Tensor input = dim ? self : op("aten::reshape", "", {self, Shape{self.numel()}});
  int64_t d = dim ? wrap_dim(*dim, self.dim()) : 0;
  Tensor counts = repeats;
  if (repeats.dim() == 0 || repeats.numel() == 1)
    counts =
        op("aten::expand", "",
           {op("aten::reshape", "", {repeats, Shape{1}}), Shape{input.dim() ? input.size(d) : 1}, false});
  else if (repeats.numel() != input.size(d))
    throw Error("repeats must have the same size as input along dim");
  Tensor index = repeat_interleave_counts(counts);
  return op("aten::index_select", "",
            {input.dim() ? input : op("aten::reshape", "", {input, Shape{1}}), d, index});
}

Tensor triangle(const Tensor& self, int64_t diagonal, bool lower) {
  if (self.dim() < 2) wrap_dim(-2, self.dim());  // upstream's IndexError for the missing row dim
  Tensor out = self.clone();
  int64_t rows = self.size(-2), cols = self.size(-1);
  int64_t batch = rows * cols != 0 ? out.numel() / (rows * cols) : 0;
  TN_DISPATCH_ALL_TYPES(self.dtype(), lower ? "tril" : "triu", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* p = out.template data_as<scalar_t>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          if (lower ? j - i > diagonal : j - i < diagonal) p[(b * rows + i) * cols + j] = scalar_t(0);
  });
  return out;
}

Tensor diagonal(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t n = self.dim();
  dim1 = wrap_dim(dim1, n);
  dim2 = wrap_dim(dim2, n);
  if (dim1 == dim2)
    throw Error("diagonal dimensions cannot be identical " + std::to_string(dim1) + ", " +
                std::to_string(dim2));
  int64_t length, start = self.offset();
  if (offset >= 0) {
    length = std::max<int64_t>(std::min(self.size(dim1), self.size(dim2) - offset), 0);
    if (length > 0) start += offset * self.stride(dim2);
  } else {
    length = std::max<int64_t>(std::min(self.size(dim1) + offset, self.size(dim2)), 0);
    if (length > 0) start -= offset * self.stride(dim1);
  }
  Shape sizes, strides;
  for (int64_t d = 0; d < n; ++d)
    if (d != dim1 && d != dim2) {
      sizes.push_back(self.sizes()[size_t(d)]);
      strides.push_back(self.strides()[size_t(d)]);
    }
  sizes.push_back(length);
  strides.push_back(self.stride(dim1) + self.stride(dim2));
  return self.view_as_strided(sizes, strides, start);
}

Tensor diag(const Tensor& self, int64_t offset) {
  if (self.dtype() == ScalarType::Half) dtype_not_implemented("diag", self.dtype());
  if (self.dim() == 1) {
    int64_t n = self.size(0) + std::abs(offset);
    Tensor out = Tensor::empty({n, n}, self.dtype());
    out.copy_from(scalar_tensor(Scalar(int64_t{0})));
    diagonal(out, offset, 0, 1).copy_from(self);
    return out;
  }
  if (self.dim() == 2) return diagonal(self, offset, 0, 1).clone();
  throw Error("diag(): Supports 1D or 2D tensors. Got " + std::to_string(self.dim()) + "D");
}

Tensor movedim(const Tensor& self, std::vector<int64_t> source, std::vector<int64_t> destination) {
  int64_t n = self.dim();
  if (n == 0) {  // a scalar has no dims to move; validate and return a view
    for (int64_t d : source) wrap_dim(d, 0);
    for (int64_t d : destination) wrap_dim(d, 0);
    return self.view_as_strided({}, {}, self.offset());
  }
  if (source.size() != destination.size())
    throw Error("movedim: Invalid source or destination dims: source (" + shape_str(source) +
                " dims) should contain the same number of dims as destination (" + shape_str(destination) +
                " dims)");
  std::vector<int64_t> order(size_t(n), -1);
  std::vector<bool> used(size_t(n), false);
  for (size_t i = 0; i < source.size(); ++i) {
    int64_t s = wrap_dim(source[i], n), d = wrap_dim(destination[i], n);
    if (order[size_t(d)] != -1)
      throw Error("movedim: repeated dim in `destination` (" + shape_str(destination) + ")");
    if (used[size_t(s)]) throw Error("movedim: repeated dim in `source` (" + shape_str(source) + ")");
    order[size_t(d)] = s;
    used[size_t(s)] = true;
  }
  int64_t next = 0;
  for (auto& o : order) {
    if (o != -1) continue;
    while (used[size_t(next)]) ++next;
    o = next++;
  }
  return op("aten::permute", "", {self, order});
}

Tensor at_least(const Tensor& t, int64_t rank) {
  if (t.dim() >= rank) return t;
  Shape shape = t.sizes();
  if (rank == 3 && t.dim() == 2)
    shape.push_back(1);  // atleast_3d puts a 2-D input in the middle
  else if (rank == 3 && t.dim() == 1)
    shape = {1, t.size(0), 1};
  else
    while (int64_t(shape.size()) < rank) shape.insert(shape.begin(), 1);
  return op("aten::reshape", "", {t, shape});
}

std::vector<Tensor> at_least_all(const std::vector<Tensor>& ts, int64_t rank) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(at_least(t, rank));
  return out;
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& ts) {
  Shape shape;
  for (const Tensor& t : ts) shape = broadcast_shapes(shape, t.sizes());
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(op("aten::expand", "", {t, shape, false}));
  return out;
}

Tensor rot90(const Tensor& self, int64_t k, const std::vector<int64_t>& dims) {
  if (dims.size() != 2)
    throw Error("expected total rotation dims == 2, but got dims = " + std::to_string(dims.size()));
  if (self.dim() < 2)
    throw Error("expected total dims >= 2, but got total dims = " + std::to_string(self.dim()));
  int64_t d0 = wrap_dim(dims[0], self.dim()), d1 = wrap_dim(dims[1], self.dim());
  if (d0 == d1)
    throw Error("expected rotation dims to be different, but got dim0 = " + std::to_string(d0) +
                " and dim1 = " + std::to_string(d1));
  k = ((k % 4) + 4) % 4;
  if (k == 1) return op("aten::transpose", "int", {flip(self, {d1}), d0, d1}).clone();
  if (k == 2) return flip(self, {d0, d1});
  if (k == 3) return op("aten::transpose", "int", {flip(self, {d0}), d0, d1}).clone();
  return self.clone();
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& ts, const std::string& indexing) {
  if (ts.empty()) throw Error("meshgrid expects a non-empty TensorList");
  if (indexing != "ij" && indexing != "xy")
    throw Error("torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: " + indexing);
  std::vector<Tensor> inputs = ts;
  bool swap = indexing == "xy" && inputs.size() >= 2;
  if (swap) std::swap(inputs[0], inputs[1]);
  Shape shape;
  for (const Tensor& t : inputs) {
    if (t.dim() > 1)
      throw Error("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: " +
                  shape_str(t.sizes()));
    shape.push_back(t.numel());
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape view(inputs.size(), 1);
    view[i] = -1;
    out.push_back(op("aten::expand", "", {op("aten::view", "", {inputs[i], view}), shape, false}));
  }
  if (swap) std::swap(out[0], out[1]);
  return out;
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  if (a.dtype() != b.dtype())
    throw Error(std::string(upstream_type_name(a.dtype())) + " did not match " +
                upstream_type_name(b.dtype()));
  if (rtol < 0) throw Error("rtol must be greater than or equal to zero, but got " + std::to_string(rtol));
  if (atol < 0) throw Error("atol must be greater than or equal to zero, but got " + std::to_string(atol));
  ScalarType t = a.dtype();
  return TN_DISPATCH_ALL_TYPES(t, "isclose", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, ScalarType::Bool, [=](c x, c y) -> bool {
      if (x == y) return true;
      if constexpr (std::is_floating_point_v<c>) {
        if (std::isnan(x) || std::isnan(y)) return equal_nan && std::isnan(x) && std::isnan(y);
        if (std::isinf(x) || std::isinf(y)) return false;
      }
      double dx = double(x), dy = double(y);
      if constexpr (std::is_same_v<c, bool>)
        return false;
      else
        return std::abs(dx - dy) <= atol + rtol * std::abs(dy);
    });
  });
}

}  // namespace

TN_KERNEL("aten::cat", { return cat(a.tensor_list(0), a.integer(1)); });
TN_KERNEL("aten::concat", { return cat(a.tensor_list(0), a.integer(1)); });
TN_KERNEL("aten::stack", { return stack_tensors(a.tensor_list(0), a.integer(1)); });
TN_KERNEL("aten::atleast_1d", { return at_least(a.tensor(0), 1); });
TN_KERNEL("aten::atleast_2d", { return at_least(a.tensor(0), 2); });
TN_KERNEL("aten::atleast_3d", { return at_least(a.tensor(0), 3); });
TN_KERNEL("aten::atleast_1d.Sequence", { return at_least_all(a.tensor_list(0), 1); });
TN_KERNEL("aten::atleast_2d.Sequence", { return at_least_all(a.tensor_list(0), 2); });
TN_KERNEL("aten::atleast_3d.Sequence", { return at_least_all(a.tensor_list(0), 3); });
TN_KERNEL("aten::hstack", {
  auto ts = at_least_all(a.tensor_list(0), 1);
  return cat(ts, !ts.empty() && ts[0].dim() == 1 ? 0 : 1);
});
TN_KERNEL("aten::vstack", { return cat(at_least_all(a.tensor_list(0), 2), 0); });
TN_KERNEL("aten::dstack", { return cat(at_least_all(a.tensor_list(0), 3), 2); });
TN_KERNEL("aten::column_stack", {
  std::vector<Tensor> ts;
  for (const Tensor& t : a.tensor_list(0))
    ts.push_back(t.dim() <= 1 ? op("aten::reshape", "", {t, Shape{t.numel(), 1}}) : t);
  return cat(ts, 1);
});
TN_KERNEL("aten::split.Tensor", { return split(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::split.sizes", { return split_sizes(a.tensor(0), a.int_list(1), a.integer(2)); });
TN_KERNEL("aten::split_with_sizes", { return split_sizes(a.tensor(0), a.int_list(1), a.integer(2)); });
TN_KERNEL("aten::chunk", {
  const Tensor& self = a.tensor(0);
  int64_t chunks = a.integer(1);
  if (self.dim() == 0) throw Error("chunk expects at least a 1-dimensional tensor");
  if (chunks <= 0) throw Error("chunk expects `chunks` to be greater than 0, got: " + std::to_string(chunks));
  int64_t length = self.size(a.integer(2));
  int64_t size = (length + chunks - 1) / chunks;
  if (size == 0 && length == 0) {
    std::vector<int64_t> sizes(size_t(chunks), 0);
    return split_sizes(self, sizes, a.integer(2));
  }
  return split(self, std::max<int64_t>(size, 1), a.integer(2));
});
TN_KERNEL("aten::tensor_split.sections", {
  const Tensor& self = a.tensor(0);
  int64_t sections = a.integer(1);
  if (self.dim() == 0)
    throw Error("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
  if (sections <= 0) throw Error("number of sections must be larger than 0, got " + std::to_string(sections));
  int64_t length = self.size(a.integer(2));
  std::vector<int64_t> indices;
  int64_t base = length / sections, extra = length % sections, at = 0;
  for (int64_t i = 0; i + 1 < sections; ++i) indices.push_back(at += base + (i < extra));
  return tensor_split(self, indices, a.integer(2));
});
TN_KERNEL("aten::tensor_split.indices", {
  if (a.tensor(0).dim() == 0)
    throw Error("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
  return tensor_split(a.tensor(0), a.int_list(1), a.integer(2));
});
TN_KERNEL("aten::unbind.int", {
  const Tensor& self = a.tensor(0);
  if (self.dim() == 0) throw IndexError("Dimension specified as 0 but tensor has no dimensions");
  int64_t d = wrap_dim(a.integer(1), self.dim());
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < self.size(d); ++i) parts.push_back(op("aten::select", "int", {self, d, i}));
  return parts;
});
TN_KERNEL("aten::flip", { return flip(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::fliplr", {
  if (a.tensor(0).dim() < 2) throw Error("Input must be >= 2-d.");
  return flip(a.tensor(0), {1});
});
TN_KERNEL("aten::flipud", {
  if (a.tensor(0).dim() < 1) throw Error("Input must be >= 1-d.");
  return flip(a.tensor(0), {0});
});
TN_KERNEL("aten::roll", { return roll(a.tensor(0), a.int_list(1), a.int_list(2)); });
TN_KERNEL("aten::repeat", { return repeat(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::tile", {
  std::vector<int64_t> dims = a.int_list(1);
  while (int64_t(dims.size()) < a.tensor(0).dim()) dims.insert(dims.begin(), 1);
  return repeat(a.tensor(0), dims);
});
TN_KERNEL("aten::repeat_interleave.Tensor", { return repeat_interleave_counts(a.tensor(0)); });
TN_KERNEL("aten::repeat_interleave.self_Tensor",
          { return repeat_interleave(a.tensor(0), a.tensor(1), a.optional_integer(2)); });
TN_KERNEL("aten::repeat_interleave.self_int", {
  return repeat_interleave(a.tensor(0), scalar_tensor(Scalar(a.integer(1))), a.optional_integer(2));
});
TN_KERNEL("aten::tril", { return triangle(a.tensor(0), a.integer(1), true); });
TN_KERNEL("aten::triu", { return triangle(a.tensor(0), a.integer(1), false); });
TN_KERNEL("aten::diag", { return diag(a.tensor(0), a.integer(1)); });
TN_KERNEL("aten::diagonal", { return diagonal(a.tensor(0), a.integer(1), a.integer(2), a.integer(3)); });
TN_KERNEL("aten::diagflat", {
  const Tensor& self = a.tensor(0);
  return diag(op("aten::reshape", "", {self, Shape{self.numel()}}), a.integer(1));
});
TN_KERNEL("aten::diag_embed", {
  const Tensor& self = a.tensor(0);
  int64_t offset = a.integer(1);
  int64_t n = self.size(-1) + std::abs(offset);
  Shape shape(self.sizes().begin(), self.sizes().end() - 1);
  int64_t out_dim = self.dim() + 1;
  int64_t d1 = wrap_dim(a.integer(2), out_dim), d2 = wrap_dim(a.integer(3), out_dim);
  Shape out_shape = shape;
  for (int64_t d : std::vector<int64_t>{std::min(d1, d2), std::max(d1, d2)})
    out_shape.insert(out_shape.begin() + d, n);
  Tensor out = Tensor::empty(out_shape, self.dtype());
  out.copy_from(scalar_tensor(Scalar(int64_t{0})));
  diagonal(out, offset, d1, d2).copy_from(self);
  return out;
});
TN_KERNEL("aten::movedim.int", { return movedim(a.tensor(0), {a.integer(1)}, {a.integer(2)}); });
TN_KERNEL("aten::movedim.intlist", { return movedim(a.tensor(0), a.int_list(1), a.int_list(2)); });
TN_KERNEL("aten::moveaxis.int", { return movedim(a.tensor(0), {a.integer(1)}, {a.integer(2)}); });
TN_KERNEL("aten::moveaxis.intlist", { return movedim(a.tensor(0), a.int_list(1), a.int_list(2)); });
TN_KERNEL("aten::broadcast_tensors", { return broadcast_tensors(a.tensor_list(0)); });
TN_KERNEL("aten::rot90", { return rot90(a.tensor(0), a.integer(1), a.int_list(2)); });
TN_KERNEL("aten::meshgrid", { return meshgrid(a.tensor_list(0), "ij"); });
TN_KERNEL("aten::meshgrid.indexing", { return meshgrid(a.tensor_list(0), *a.optional_string(1)); });
TN_KERNEL("aten::unflatten.int", {
  const Tensor& self = a.tensor(0);
  int64_t d = wrap_dim(a.integer(1), self.dim());
  Shape sizes = a.int_list(2), shape = self.sizes();
  if (sizes.empty()) throw Error("unflatten: sizes must be non-empty");
  shape.erase(shape.begin() + d);
  shape.insert(shape.begin() + d, sizes.begin(), sizes.end());
  return op("aten::view", "", {self, shape});
});

TN_KERNEL("aten::result_type.Tensor", { return int64_t(result_type(a.tensor(0), a.tensor(1))); });
TN_KERNEL("aten::result_type.Scalar",
          { return int64_t(result_type(a.tensor(0), scalar_tensor(a.scalar(1)))); });
TN_KERNEL("aten::result_type.Scalar_Tensor",
          { return int64_t(result_type(scalar_tensor(a.scalar(0)), a.tensor(1))); });
TN_KERNEL("aten::result_type.Scalar_Scalar",
          { return int64_t(result_type(scalar_tensor(a.scalar(0)), scalar_tensor(a.scalar(1)))); });
TN_KERNEL("aten::promote_types",
          { return int64_t(promote_types(ScalarType(a.integer(0)), ScalarType(a.integer(1)))); });
TN_KERNEL("aten::can_cast", { return can_cast(ScalarType(a.integer(0)), ScalarType(a.integer(1))); });
TN_KERNEL("aten::equal", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  if (x.sizes() != y.sizes()) return false;
  Tensor same = op("aten::eq", "Tensor", {x, y});
  return op("aten::all", "", {same}).item().to<bool>();
});
TN_KERNEL("aten::isclose", { return isclose(a.tensor(0), a.tensor(1), a.real(2), a.real(3), a.boolean(4)); });
TN_KERNEL("aten::allclose", {
  return op("aten::all", "", {isclose(a.tensor(0), a.tensor(1), a.real(2), a.real(3), a.boolean(4))})
      .item()
      .to<bool>();
});
TN_KERNEL("aten::clip", { return op("aten::clamp", "", {a.tensor(0), a[1], a[2]}); });
TN_KERNEL("aten::clip.Tensor", { return op("aten::clamp", "Tensor", {a.tensor(0), a[1], a[2]}); });

}  // namespace tn
