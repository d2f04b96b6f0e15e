// Creation operators and views (which share storage with their base).
#include <numeric>

#include "common.h"

namespace tn {

namespace {

ScalarType dtype_or_default(const Args& a, size_t i) { return a.optional_dtype(i).value_or(default_dtype()); }

// memory_format=preserve (the default of *_like and clone): a dense, non-overlapping
// input's stride order is kept; anything else gets contiguous strides.
Tensor empty_like(const Tensor& self, ScalarType dtype, std::optional<int64_t> memory_format) {
  bool preserve = !memory_format || *memory_format == int64_t(MemoryFormat::Preserve);
  if (!preserve || self.is_contiguous()) return Tensor::empty(self.sizes(), dtype);
  std::vector<int64_t> order(size_t(self.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return self.strides()[size_t(x)] > self.strides()[size_t(y)];
  });
  Shape strides(size_t(self.dim()));
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (self.sizes()[size_t(*it)] != 1 && self.strides()[size_t(*it)] != expected)
      return Tensor::empty(self.sizes(), dtype);  // not dense and non-overlapping
    strides[size_t(*it)] = expected;
    expected *= self.sizes()[size_t(*it)];
  }
  auto storage = std::make_shared<Storage>(size_t(self.numel()) * element_size(dtype));
  return Tensor::from_storage(storage, self.sizes(), strides, 0, dtype);
}

Tensor full_like(const Tensor& self, const Scalar& value, ScalarType dtype,
                 std::optional<int64_t> memory_format) {
  Tensor out = empty_like(self, dtype, memory_format);
  out.copy_from(scalar_tensor(value));
  return out;
}

Tensor full(const Shape& size, const Scalar& value, std::optional<ScalarType> dtype) {
  ScalarType t = dtype ? *dtype : (value.is_float() ? default_dtype() : value.type());
  Tensor out = Tensor::empty(size, t);
  out.copy_from(scalar_tensor(value));
  return out;
}

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

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<ScalarType> dtype) {
  bool any_float = start.is_float() || end.is_float() || step.is_float();
  ScalarType t = dtype.value_or(any_float ? default_dtype() : ScalarType::Long);
  if (t == ScalarType::Bool) dtype_not_implemented("arange_cpu", t);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0) throw Error("step must be nonzero");
  if ((st > 0 && e < s) || (st < 0 && e > s))
    throw Error("upper bound and larger bound inconsistent with step sign");
  int64_t n;
  if (any_float || is_floating(t))
    n = int64_t(std::ceil((e - s) / st));
  else
    n = (end.to_int() - start.to_int() + step.to_int() - (step.to_int() > 0 ? 1 : -1)) / step.to_int();
  Tensor out = Tensor::empty({n}, t);
  TN_DISPATCH_ALL_TYPES(t, "arange", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* p = out.data_as<scalar_t>();
    if (is_floating(t) || any_float) {
      for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(compute_t<scalar_t>(s + double(i) * st));
    } else {
      int64_t a0 = start.to_int(), d = step.to_int();
      for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(a0 + i * d);
    }
  });
  return out;
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<ScalarType> dtype) {
  if (steps < 0) throw Error("number of steps must be non-negative");
  ScalarType t = dtype.value_or(default_dtype());
  if (t == ScalarType::Bool) dtype_not_implemented("linspace_cpu", t);
  Tensor out = Tensor::empty({steps}, t);
  TN_DISPATCH_ALL_TYPES(t, "linspace", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    // As upstream: the ends converted to the output type first (integers wrap), the
    // step in the output type (double for integers), the first half counted from the
    // start and the second half back from the end.
    using step_t = std::conditional_t<std::is_integral_v<scalar_t>, double, compute_t<scalar_t>>;
    scalar_t* p = out.template data_as<scalar_t>();
    step_t first = step_t(compute_t<scalar_t>(start.to<scalar_t>()));
    step_t last = step_t(compute_t<scalar_t>(end.to<scalar_t>()));
    if (steps == 1) {
      p[0] = scalar_t(first);
      return;
    }
    step_t step = (last - first) / step_t(steps - 1);
    int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      p[i] = scalar_t(i < half ? first + step * step_t(i) : last - step * step_t(steps - i - 1));
  });
  return out;
}

Tensor eye(int64_t n, int64_t m, std::optional<ScalarType> dtype) {
  if (n < 0) throw Error("n must be greater or equal to 0, got " + std::to_string(n));
  if (m < 0) throw Error("m must be greater or equal to 0, got " + std::to_string(m));
  if (dtype == ScalarType::BFloat16) dtype_not_implemented("eye", *dtype);
  Tensor out = full({n, m}, Scalar(int64_t{0}), dtype.value_or(default_dtype()));
  TN_DISPATCH_ALL_TYPES(out.dtype(), "eye", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    for (int64_t i = 0; i < std::min(n, m); ++i)
      out.data_as<scalar_t>()[i * m + i] = Scalar(int64_t{1}).to<scalar_t>();
  });
  return out;
}

}  // namespace

TN_KERNEL("aten::empty.memory_format", { return Tensor::empty(a.int_list(0), dtype_or_default(a, 1)); });
TN_KERNEL("aten::empty_strided", {
  Shape size = a.int_list(0), stride = a.int_list(1);
  int64_t extent = 1;
  for (size_t i = 0; i < size.size(); ++i) extent += (size[i] - 1) * stride[i];
  ScalarType t = dtype_or_default(a, 2);
  auto storage = std::make_shared<Storage>(size_t(std::max<int64_t>(extent, 0)) * element_size(t));
  return Tensor::from_storage(storage, size, stride, 0, t);
});
TN_KERNEL("aten::zeros", { return full(a.int_list(0), Scalar(int64_t{0}), dtype_or_default(a, 1)); });
TN_KERNEL("aten::ones", { return full(a.int_list(0), Scalar(int64_t{1}), dtype_or_default(a, 1)); });
TN_KERNEL("aten::full", { return full(a.int_list(0), a.scalar(1), a.optional_dtype(2)); });
TN_KERNEL("aten::scalar_tensor", {
  Tensor t = Tensor::empty({}, dtype_or_default(a, 1));
  t.copy_from(scalar_tensor(a.scalar(0)));
  return t;
});
TN_KERNEL("aten::empty_like", {
  return empty_like(a.tensor(0), a.optional_dtype(1).value_or(a.tensor(0).dtype()), a.optional_integer(5));
});
TN_KERNEL("aten::zeros_like", {
  return full_like(a.tensor(0), Scalar(int64_t{0}), a.optional_dtype(1).value_or(a.tensor(0).dtype()),
                   a.optional_integer(5));
});
TN_KERNEL("aten::ones_like", {
  return full_like(a.tensor(0), Scalar(int64_t{1}), a.optional_dtype(1).value_or(a.tensor(0).dtype()),
                   a.optional_integer(5));
});
TN_KERNEL("aten::full_like", {
  return full_like(a.tensor(0), a.scalar(1), a.optional_dtype(2).value_or(a.tensor(0).dtype()),
                   a.optional_integer(6));
});
TN_KERNEL("aten::new_empty",
          { return Tensor::empty(a.int_list(1), a.optional_dtype(2).value_or(a.tensor(0).dtype())); });
TN_KERNEL("aten::new_zeros", {
  return full(a.int_list(1), Scalar(int64_t{0}), a.optional_dtype(2).value_or(a.tensor(0).dtype()));
});
TN_KERNEL("aten::new_ones", {
  return full(a.int_list(1), Scalar(int64_t{1}), a.optional_dtype(2).value_or(a.tensor(0).dtype()));
});
TN_KERNEL("aten::new_full",
          { return full(a.int_list(1), a.scalar(2), a.optional_dtype(3).value_or(a.tensor(0).dtype())); });
TN_KERNEL("aten::arange",
          { return arange(Scalar(int64_t{0}), a.scalar(0), Scalar(int64_t{1}), a.optional_dtype(1)); });
TN_KERNEL("aten::arange.start",
          { return arange(a.scalar(0), a.scalar(1), Scalar(int64_t{1}), a.optional_dtype(2)); });
TN_KERNEL("aten::arange.start_step",
          { return arange(a.scalar(0), a.scalar(1), a.scalar(2), a.optional_dtype(3)); });
TN_KERNEL("aten::linspace",
          { return linspace(a.scalar(0), a.scalar(1), a.integer(2), a.optional_dtype(3)); });
TN_KERNEL("aten::eye", { return eye(a.integer(0), a.integer(0), a.optional_dtype(1)); });
TN_KERNEL("aten::eye.m", { return eye(a.integer(0), a.integer(1), a.optional_dtype(2)); });

TN_KERNEL("aten::view", { return view(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::view.dtype", {
  const Tensor& t = a.tensor(0);
  ScalarType to = ScalarType(a.integer(1));
  if (element_size(to) != t.itemsize())
    throw Error("torchnative: Tensor.view(dtype) between different element sizes is not implemented");
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->dtype = to;
  impl->python_object = nullptr;
  return Tensor(impl);
});
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
TN_KERNEL("aten::contiguous", { return a.tensor(0).contiguous(); });
TN_KERNEL("aten::clone", {
  const Tensor& self = a.tensor(0);
  Tensor out = empty_like(self, self.dtype(), a.optional_integer(1));
  out.copy_from(self);
  return out;
});
// In-place views change the tensor's own shape and strides, keeping its storage.
void restride(const Tensor& self, const Tensor& view) {
  self.impl()->sizes = view.sizes();
  self.impl()->strides = view.strides();
  self.impl()->offset = view.offset();
}
TN_KERNEL("aten::t_", {
  restride(a.tensor(0), call_tensor_op("aten::t", "", {a.tensor(0)}));
  return a.tensor(0);
});
TN_KERNEL("aten::transpose_", {
  restride(a.tensor(0), transpose(a.tensor(0), a.integer(1), a.integer(2)));
  return a.tensor(0);
});
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
// set_ and resize_ follow upstream's resize_impl_cpu_: the tensor takes the storage, offset,
// sizes and strides it is given, and the storage grows when they reach past its end.
Tensor set_storage(const Tensor& self, const std::shared_ptr<Storage>& storage, int64_t offset,
                   const Shape& sizes, const std::optional<Shape>& strides) {
  if (strides && strides->size() != sizes.size())
    throw Error("unequal size length (" + std::to_string(sizes.size()) + ") and stride length (" +
                std::to_string(strides->size()) + ")");
  if (offset < 0) throw Error("Tensor: invalid storage offset " + std::to_string(offset));
  TensorImpl* impl = self.impl();
  impl->storage = storage;
  impl->offset = offset;
  if (!strides) {
    self.resize(sizes);
    return self;
  }
  int64_t last = 0;  // highest element index reached, relative to the offset
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0)
      throw Error("Trying to create tensor with negative dimension " + std::to_string(sizes[d]) + ": " +
                  shape_str(sizes));
    if (sizes[d] == 0) last = -1;
    if (last >= 0) last += (sizes[d] - 1) * (*strides)[d];
  }
  impl->sizes = sizes;
  impl->strides = *strides;
  if (last >= 0) {
    size_t needed = size_t(offset + last + 1) * self.itemsize();
    if (needed > storage->nbytes()) storage->resize(needed);
  }
  return self;
}
const std::shared_ptr<Storage>& storage_for(const Tensor& self, const StorageRef& source) {
  if (source.typed_as && *source.typed_as != self.dtype())
    throw Error(std::string("Expected a Storage of type ") + cpp_type_name(self.dtype()) +
                " or an UntypedStorage, but got type " + upstream_type_name(*source.typed_as) +
                " for argument 1 'storage'");
  return source.storage;
}
TN_KERNEL("aten::set_.source_Storage", {
  const Tensor& self = a.tensor(0);
  const auto& storage = storage_for(self, a.storage(1));
  return set_storage(self, storage, 0, {int64_t(storage->nbytes() / self.itemsize())}, std::nullopt);
});
TN_KERNEL("aten::set_.source_Storage_storage_offset", {
  const Tensor& self = a.tensor(0);
  Shape strides = a.int_list(4);
  return set_storage(self, storage_for(self, a.storage(1)), a.integer(2), a.int_list(3),
                     strides.empty() ? std::nullopt : std::optional<Shape>(strides));
});
TN_KERNEL("aten::set_.source_Tensor", {
  const Tensor& self = a.tensor(0);
  const Tensor& source = a.tensor(1);
  if (self.same(source)) return self;
  if (source.dtype() != self.dtype())
    throw Error(std::string("set_: the source tensor's dtype (") + cpp_type_name(source.dtype()) +
                ") differs from self's (" + cpp_type_name(self.dtype()) + ")");
  return set_storage(self, source.storage(), source.offset(), source.sizes(), source.strides());
});
TN_KERNEL("aten::set_",
          { return set_storage(a.tensor(0), std::make_shared<Storage>(0), 0, {0}, std::nullopt); });
TN_KERNEL("aten::is_set_to", {
  const Tensor& self = a.tensor(0);
  const Tensor& other = a.tensor(1);
  return self.storage() == other.storage() && self.offset() == other.offset() &&
         self.sizes() == other.sizes() && self.strides() == other.strides();
});
TN_KERNEL("aten::resize_", {
  const Tensor& self = a.tensor(0);
  std::optional<int64_t> format = a.optional_integer(2);
  if (format == int64_t(MemoryFormat::Preserve)) throw Error("Unsupported memory formatPreserve");
  if (format && *format != int64_t(MemoryFormat::Contiguous))
    throw NotImplemented(
        "torchnative: resize_ supports only contiguous_format (channels_last restriding is missing)");
  self.resize(a.int_list(1));
  return self;
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
TN_KERNEL("aten::detach_", { return a.tensor(0); });
TN_KERNEL("aten::size.int", { return a.tensor(0).size(a.integer(1)); });
TN_KERNEL("aten::stride.int", { return a.tensor(0).stride(a.integer(1)); });
TN_KERNEL("aten::item", { return a.tensor(0).item(); });
TN_KERNEL("aten::_local_scalar_dense", { return a.tensor(0).item(); });
TN_KERNEL("aten::is_floating_point", { return is_floating(a.tensor(0).dtype()); });
TN_KERNEL("aten::is_same_size", { return a.tensor(0).sizes() == a.tensor(1).sizes(); });
TN_KERNEL("aten::to.dtype", {
  const Tensor& t = a.tensor(0);
  ScalarType to = ScalarType(a.integer(1));
  return (to == t.dtype() && !a.boolean(3)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::to.other", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.tensor(1).dtype();
  return (to == t.dtype() && !a.boolean(3)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::to.device", {
  const Tensor& t = a.tensor(0);
  ScalarType to = ScalarType(a.integer(2));
  return (to == t.dtype() && !a.boolean(4)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::to.dtype_layout", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.optional_dtype(1).value_or(t.dtype());
  return (to == t.dtype() && !a.boolean(6)) ? t : t.to(to).clone();
});
// torchvision asks at import which CUDA its ops were built for; this is a CPU build.
TN_KERNEL("torchvision::_cuda_version", { return int64_t{-1}; });
TN_KERNEL("aten::type_as", { return a.tensor(0).to(a.tensor(1).dtype()); });

}  // namespace tn
