// Operators that return views of their input: view, reshape, permute, transpose, t, expand, narrow, select,
// slice, as_strided, (un)squeeze, unfold, flatten, unflatten, alias, detach, movedim, diagonal,
// split/chunk/unbind, broadcast_to, atleast_*d, and their in-place restriding forms (t_, transpose_, ...).
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Tensor view(const Tensor& self, Shape shape) {
  int64_t numel = self.numel(), known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error("only one dimension can be inferred");
      infer = int64_t(i);
    } else if (shape[i] < 0) {
      throw Error("invalid shape dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw Error("shape '" + shape_str(shape) + "' is invalid for input of size " + std::to_string(numel));
    shape[size_t(infer)] = numel / known;
  } else if (known != numel) {
    throw Error("shape '" + shape_str(shape) + "' is invalid for input of size " + std::to_string(numel));
  }
  // Compute strides for the new shape when the old layout allows it (upstream's computeStride).
  const Shape& old_sizes = self.sizes();
  const Shape& old_strides = self.strides();
  Shape new_strides(shape.size());
  // Empty and 0-dim tensors (one element, no strides to follow) take any valid shape.
  if (numel == 0 || self.dim() == 0)
    return self.view_as_strided(shape, contiguous_strides(shape), self.offset());
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_sizes.size()) - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel)
        throw Error(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead.");
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1)
    throw Error(
        "view size is not compatible with input tensor's size and stride (at least one dimension spans "
        "across two contiguous subspaces). Use .reshape(...) instead.");
  return self.view_as_strided(shape, new_strides, self.offset());
}

Tensor reshape(const Tensor& self, const Shape& shape) {
  try {
    return view(self, shape);
  } catch (const Error& e) {
    if (std::string(e.what()).find("view size is not compatible") == std::string::npos) throw;
    return view(self.clone(), shape);
  }
}

Tensor permute(const Tensor& self, const Shape& dims) {
  int64_t n = self.dim();
  if (int64_t(dims.size()) != n)
    throw Error(
        "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
        "desired ordering of dimensions i.e. input.dim() = " +
        std::to_string(n) + " is not equal to len(dims) = " + std::to_string(dims.size()));
  Shape sizes(static_cast<size_t>(n)), strides(static_cast<size_t>(n));
  std::vector<bool> seen(size_t(n), false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[size_t(i)], n);
    if (seen[size_t(d)]) throw Error("permute(): duplicate dims are not allowed.");
    seen[size_t(d)] = true;
    sizes[size_t(i)] = self.sizes()[size_t(d)];
    strides[size_t(i)] = self.strides()[size_t(d)];
  }
  return self.view_as_strided(sizes, strides, self.offset());
}

Tensor transpose(const Tensor& self, int64_t d0, int64_t d1) {
  int64_t n = self.dim();
  if (n == 0) {
    wrap_dim(d0, n);
    wrap_dim(d1, n);
    return self.view_as_strided({}, {}, self.offset());
  }
  d0 = wrap_dim(d0, n);
  d1 = wrap_dim(d1, n);
  Shape sizes = self.sizes(), strides = self.strides();
  std::swap(sizes[size_t(d0)], sizes[size_t(d1)]);
  std::swap(strides[size_t(d0)], strides[size_t(d1)]);
  return self.view_as_strided(sizes, strides, self.offset());
}

Tensor expand(const Tensor& self, const Shape& size) {
  if (int64_t(size.size()) < self.dim())
    throw Error("expand(torch.FloatTensor{" + shape_str(self.sizes()) + "}, size=" + shape_str(size) +
                "): the number of sizes provided (" + std::to_string(size.size()) +
                ") must be greater or equal to the number of dimensions in the tensor (" +
                std::to_string(self.dim()) + ")");
  size_t n = size.size();
  Shape sizes(n), strides(n);
  int64_t offset = int64_t(n) - self.dim();
  for (int64_t i = int64_t(n) - 1; i >= 0; --i) {
    int64_t target = size[size_t(i)];
    if (i >= offset) {
      int64_t own = self.sizes()[size_t(i - offset)];
      int64_t stride = self.strides()[size_t(i - offset)];
      if (target == -1) target = own;
      if (own != target) {
        if (own != 1)
          throw Error("The expanded size of the tensor (" + std::to_string(target) +
                      ") must match the existing size (" + std::to_string(own) +
                      ") at non-singleton dimension " + std::to_string(i) +
                      ".  Target sizes: " + shape_str(size) + ".  Tensor sizes: " + shape_str(self.sizes()));
        stride = 0;
      }
      sizes[size_t(i)] = target;
      strides[size_t(i)] = stride;
    } else {
      if (target < 0)
        throw Error("The expanded size of the tensor (" + std::to_string(target) +
                    ") isn't allowed in a leading, non-existing dimension " + std::to_string(i));
      sizes[size_t(i)] = target;
      strides[size_t(i)] = 0;
    }
  }
  return self.view_as_strided(sizes, strides, self.offset());
}

Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start_opt,
             std::optional<int64_t> end_opt, int64_t step) {
  if (self.dim() == 0) throw IndexError("slice() cannot be applied to a 0-dim tensor.");
  dim = wrap_dim(dim, self.dim());
  if (step <= 0) throw Error("slice step must be positive");
  int64_t size = self.sizes()[size_t(dim)];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(INT64_MAX);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = self.sizes(), strides = self.strides();
  sizes[size_t(dim)] = (end - start + step - 1) / step;
  strides[size_t(dim)] *= step;
  return self.view_as_strided(sizes, strides, self.offset() + start * self.strides()[size_t(dim)]);
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  if (self.dim() == 0) throw IndexError("select() cannot be applied to a 0-dim tensor.");
  dim = wrap_dim(dim, self.dim());
  int64_t size = self.sizes()[size_t(dim)];
  if (index < -size || index >= size)
    throw IndexError("select(): index " + std::to_string(index) + " out of range for tensor of size " +
                     shape_str(self.sizes()) + " at dimension " + std::to_string(dim));
  if (index < 0) index += size;
  Shape sizes = self.sizes(), strides = self.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return self.view_as_strided(sizes, strides, self.offset() + index * self.strides()[size_t(dim)]);
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  dim = wrap_dim(dim, self.dim() + 1);
  Shape sizes = self.sizes(), strides = self.strides();
  int64_t stride = dim >= self.dim() ? 1 : sizes[size_t(dim)] * strides[size_t(dim)];
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return self.view_as_strided(sizes, strides, self.offset());
}

Tensor squeeze(const Tensor& self, std::optional<int64_t> only) {
  Shape sizes, strides;
  std::optional<int64_t> dim;
  if (only) dim = self.dim() == 0 ? wrap_dim(*only, 0) : wrap_dim(*only, self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) {
    bool drop = self.sizes()[size_t(d)] == 1 && (!dim || *dim == d);
    if (!drop) {
      sizes.push_back(self.sizes()[size_t(d)]);
      strides.push_back(self.strides()[size_t(d)]);
    }
  }
  return self.view_as_strided(sizes, strides, self.offset());
}

// In-place views change the tensor's own shape and strides, keeping its storage.
void restride(const Tensor& self, const Tensor& view) {
  self.impl()->sizes = view.sizes();
  self.impl()->strides = view.strides();
  self.impl()->offset = view.offset();
}

Tensor transpose_in_place(const Tensor& self, int64_t d0, int64_t d1) {
  restride(self, transpose(self, d0, d1));
  return self;
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
    parts.push_back(ops::narrow(self, dim, start, s));
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
    parts.push_back(ops::slice(self, dim, start, std::max(start, stop), int64_t{1}));
    start = std::max(start, stop);
  }
  parts.push_back(ops::slice(self, dim, start, length, int64_t{1}));
  return parts;
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
  return ops::permute(self, order);
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
  return ops::reshape(t, shape);
}

// One door call per tensor: under autograd each records its own node, as upstream's composite.
std::vector<Tensor> at_least_all(const std::vector<Tensor>& ts, int64_t rank) {
  using Raise = Tensor (*)(const Tensor&);
  Raise raise = rank == 1   ? Raise(ops::atleast_1d)
                : rank == 2 ? Raise(ops::atleast_2d)
                            : Raise(ops::atleast_3d);
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(raise(t));
  return out;
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& ts) {
  Shape shape;
  for (const Tensor& t : ts) shape = broadcast_shapes(shape, t.sizes());
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(ops::expand(t, shape, false));
  return out;
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
    out.push_back(ops::expand(ops::view(inputs[i], view), shape, false));
  }
  if (swap) std::swap(out[0], out[1]);
  return out;
}

// Tensor.view(dtype): the same bytes read as `to`. Between element sizes the last dim (stride 1)
// holds ratio times more or fewer elements, the other strides and the offset scale by the
// ratio, and upstream's checks (in its order, with its messages) refuse what would not line up.
Tensor view_as_dtype(const Tensor& t, ScalarType to) {
  int64_t from_size = int64_t(t.itemsize()), to_size = int64_t(element_size(to));
  Shape sizes = t.sizes(), strides = t.strides();
  int64_t offset = t.offset();
  if (from_size != to_size) {
    std::string what = std::string(" to view ") + upstream_type_name(t.dtype()) + " as " +
                       upstream_type_name(to) + " (different element sizes)";
    if (t.dim() == 0) throw Error("self.dim() cannot be 0" + what);
    if (strides.back() != 1)
      throw Error("self.stride(-1) must be 1" + what + ", but got " + std::to_string(strides.back()));
    bool widening = to_size > from_size;
    int64_t ratio = widening ? to_size / from_size : from_size / to_size;
    auto divisible = [&](const std::string& name, int64_t value) {
      if (widening && value % ratio != 0)
        throw Error(name + " must be divisible by " + std::to_string(ratio) + what + ", but got " +
                    std::to_string(value));
      return widening ? value / ratio : value * ratio;
    };
    sizes.back() = divisible("self.size(-1)", sizes.back());
    offset = divisible("self.storage_offset()", offset);
    for (int64_t d = 0; d + 1 < t.dim(); ++d)
      strides[size_t(d)] = divisible("self.stride(" + std::to_string(d) + ")", strides[size_t(d)]);
  }
  Tensor out = t.view_as_strided(sizes, strides, offset);
  out.impl()->dtype = to;
  return out;
}

}  // namespace

TN_KERNEL("aten::view", { return view(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::view.dtype", { return view_as_dtype(a.tensor(0), ScalarType(a.integer(1))); });
TN_KERNEL("aten::reshape", { return reshape(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::_reshape_alias",
          { return a.tensor(0).view_as_strided(a.int_list(1), a.int_list(2), a.tensor(0).offset()); });
TN_KERNEL("aten::view_as", { return view(a.tensor(0), a.tensor(1).sizes()); });
TN_KERNEL("aten::reshape_as", { return reshape(a.tensor(0), a.tensor(1).sizes()); });
TN_KERNEL("aten::permute", { return permute(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::transpose.int", { return transpose(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::swapaxes", { return transpose(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::swapdims", { return transpose(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::t", {
  const Tensor& t = a.tensor(0);
  if (t.dim() > 2)
    throw Error("t() expects a tensor with <= 2 dimensions, but self is " + std::to_string(t.dim()) + "D");
  return t.dim() < 2 ? t.view_as_strided(t.sizes(), t.strides(), t.offset()) : transpose(t, 0, 1);
});
TN_KERNEL("aten::expand", { return expand(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::expand_as", { return expand(a.tensor(0), a.tensor(1).sizes()); });
TN_KERNEL("aten::broadcast_to", { return expand(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::narrow", {
  const Tensor& t = a.tensor(0);
  if (t.dim() == 0) throw Error("narrow() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(a.integer(1), t.dim()), start = a.integer(2), length = a.integer(3);
  int64_t size = t.sizes()[size_t(dim)];
  if (start < -size || start > size)
    throw IndexError("start out of range (expected to be in range of [" + std::to_string(-size) + ", " +
                     std::to_string(size) + "], but got " + std::to_string(start) + ")");
  if (start < 0) start += size;
  if (start + length > size || length < 0)
    throw Error("start (" + std::to_string(start) + ") + length (" + std::to_string(length) +
                ") exceeds dimension size (" + std::to_string(size) + ").");
  return slice(t, dim, start, start + length, 1);
});
TN_KERNEL("aten::select.int", { return select(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::slice.Tensor", {
  return slice(a.tensor(0), a.integer(1), a.optional_integer(2), a.optional_integer(3), a.integer(4));
});
TN_KERNEL("aten::as_strided", {
  const Tensor& t = a.tensor(0);
  return t.view_as_strided(a.int_list(1), a.int_list(2), a.optional_integer(3).value_or(t.offset()));
});
TN_KERNEL("aten::unsqueeze", { return unsqueeze(a.tensor(0), a.integer(1)); });
TN_KERNEL("aten::squeeze", { return squeeze(a.tensor(0), std::nullopt); });
TN_KERNEL("aten::squeeze.dim", { return squeeze(a.tensor(0), a.integer(1)); });
TN_KERNEL("aten::unfold", {
  const Tensor& t = a.tensor(0);
  int64_t dim = t.dim() == 0 ? 0 : wrap_dim(a.integer(1), t.dim()), size = a.integer(2), step = a.integer(3);
  int64_t len = t.dim() == 0 ? 1 : t.sizes()[size_t(dim)];
  if (size > len)
    throw Error("maximum size for tensor at dimension " + std::to_string(dim) + " is " + std::to_string(len) +
                " but size is " + std::to_string(size));
  if (step <= 0) throw Error("step is " + std::to_string(step) + " but must be > 0");
  Shape sizes = t.sizes(), strides = t.strides();
  if (t.dim() == 0) {
    return t.view_as_strided({size}, {1}, t.offset());
  }
  int64_t stride = strides[size_t(dim)];
  sizes[size_t(dim)] = (len - size) / step + 1;
  strides[size_t(dim)] = stride * step;
  sizes.push_back(size);
  strides.push_back(stride);
  return t.view_as_strided(sizes, strides, t.offset());
});
TN_KERNEL("aten::t_", {
  restride(a.tensor(0), ops::t(a.tensor(0)));
  return a.tensor(0);
});
TN_KERNEL("aten::transpose_", { return transpose_in_place(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::swapaxes_", { return transpose_in_place(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::swapdims_", { return transpose_in_place(a.tensor(0), a.integer(1), a.integer(2)); });
TN_KERNEL("aten::unsqueeze_", {
  restride(a.tensor(0), unsqueeze(a.tensor(0), a.integer(1)));
  return a.tensor(0);
});
TN_KERNEL("aten::squeeze_", {
  restride(a.tensor(0), squeeze(a.tensor(0), std::nullopt));
  return a.tensor(0);
});
TN_KERNEL("aten::squeeze_.dim", {
  restride(a.tensor(0), squeeze(a.tensor(0), a.integer(1)));
  return a.tensor(0);
});
TN_KERNEL("aten::as_strided_", {
  const Tensor& t = a.tensor(0);
  restride(t, t.view_as_strided(a.int_list(1), a.int_list(2), a.optional_integer(3).value_or(t.offset())));
  return t;
});
TN_KERNEL("aten::flatten.using_ints", {
  const Tensor& t = a.tensor(0);
  if (t.dim() == 0) return reshape(t, {1});
  int64_t s = wrap_dim(a.integer(1), t.dim()), e = wrap_dim(a.integer(2), t.dim());
  if (s > e) throw Error("flatten() has invalid args: start_dim cannot come after end_dim");
  Shape shape(t.sizes().begin(), t.sizes().begin() + s);
  int64_t prod = 1;
  for (int64_t d = s; d <= e; ++d) prod *= t.sizes()[size_t(d)];
  shape.push_back(prod);
  shape.insert(shape.end(), t.sizes().begin() + e + 1, t.sizes().end());
  return reshape(t, shape);
});
TN_KERNEL("aten::alias", {
  const Tensor& t = a.tensor(0);
  return t.view_as_strided(t.sizes(), t.strides(), t.offset());
});
TN_KERNEL("aten::detach", {
  const Tensor& t = a.tensor(0);
  return t.view_as_strided(t.sizes(), t.strides(), t.offset());
});
TN_KERNEL("aten::detach_", {
  if (a.tensor(0).impl()->view_base)
    throw Error(
        "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) "
        "for "
        "training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence "
        "detach_() cannot be called on these gradients. To fix this error, please refer to the "
        "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.");
  // The tensor becomes a leaf that does not require grad (its .grad stays).
  TensorImpl* impl = a.tensor(0).impl();
  impl->requires_grad = false;
  if (impl->autograd) impl->autograd->grad_fn.reset();
  return a.tensor(0);
});
TN_KERNEL("aten::atleast_1d", { return at_least(a.tensor(0), 1); });
TN_KERNEL("aten::atleast_2d", { return at_least(a.tensor(0), 2); });
TN_KERNEL("aten::atleast_3d", { return at_least(a.tensor(0), 3); });
TN_KERNEL("aten::atleast_1d.Sequence", { return at_least_all(a.tensor_list(0), 1); });
TN_KERNEL("aten::atleast_2d.Sequence", { return at_least_all(a.tensor_list(0), 2); });
TN_KERNEL("aten::atleast_3d.Sequence", { return at_least_all(a.tensor_list(0), 3); });
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
  for (int64_t i = 0; i < self.size(d); ++i) parts.push_back(ops::select(self, d, i));
  return parts;
});
TN_KERNEL("aten::diagonal", { return diagonal(a.tensor(0), a.integer(1), a.integer(2), a.integer(3)); });
TN_KERNEL("aten::movedim.int", { return movedim(a.tensor(0), {a.integer(1)}, {a.integer(2)}); });
TN_KERNEL("aten::movedim.intlist", { return movedim(a.tensor(0), a.int_list(1), a.int_list(2)); });
TN_KERNEL("aten::moveaxis.int", { return movedim(a.tensor(0), {a.integer(1)}, {a.integer(2)}); });
TN_KERNEL("aten::moveaxis.intlist", { return movedim(a.tensor(0), a.int_list(1), a.int_list(2)); });
TN_KERNEL("aten::broadcast_tensors", { return broadcast_tensors(a.tensor_list(0)); });
TN_KERNEL("aten::meshgrid", { return meshgrid(a.tensor_list(0), "ij"); });
TN_KERNEL("aten::meshgrid.indexing", { return meshgrid(a.tensor_list(0), *a.optional_string(1)); });
TN_KERNEL("aten::unflatten.int", {
  const Tensor& self = a.tensor(0);
  int64_t d = wrap_dim(a.integer(1), self.dim());
  Shape sizes = a.int_list(2), shape = self.sizes();
  if (sizes.empty()) throw Error("unflatten: sizes must be non-empty");
  shape.erase(shape.begin() + d);
  shape.insert(shape.begin() + d, sizes.begin(), sizes.end());
  return ops::view(self, shape);
});

}  // namespace tn
