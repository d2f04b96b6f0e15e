// Rearranging copies: flip, fliplr, flipud, roll, rot90, repeat, tile, repeat_interleave, tril, triu, diag,
// diagflat, diag_embed.
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

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
    Tensor rolled = roll(ops::reshape(self, Shape{self.numel()}), shifts, {0});
    return ops::reshape(rolled, self.sizes());
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
    Tensor tail = ops::narrow(out, d, n - s, s);
    Tensor head = ops::narrow(out, d, int64_t{0}, n - s);
    out = ops::cat({tail, head}, d);
  }
  return out.same(self) ? self.clone() : out;
}

Tensor repeat(const Tensor& self, const std::vector<int64_t>& repeats) {
  if (int64_t(repeats.size()) < self.dim())
    throw Error("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  size_t n = repeats.size();
  Shape padded(n - size_t(self.dim()), 1);
  padded.insert(padded.end(), self.sizes().begin(), self.sizes().end());
  Tensor source = ops::reshape(self, padded);
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
  target.copy_from(ops::reshape(source, source_split));
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
  Tensor input = dim ? self : ops::reshape(self, Shape{self.numel()});
  int64_t d = dim ? wrap_dim(*dim, self.dim()) : 0;
  Tensor counts = repeats;
  if (repeats.dim() == 0 || repeats.numel() == 1)
    counts = ops::expand(ops::reshape(repeats, Shape{1}), Shape{input.dim() ? input.size(d) : 1}, false);
  else if (repeats.numel() != input.size(d))
    throw Error("repeats must have the same size as input along dim");
  Tensor index = repeat_interleave_counts(counts);
  return ops::index_select(input.dim() ? input : ops::reshape(input, Shape{1}), d, index);
}

Tensor triangle(const Tensor& self, int64_t diagonal, bool lower) {
  if (self.dim() < 2) wrap_dim(-2, self.dim());  // upstream's IndexError for the missing row dim
  Tensor out = self.clone();
  int64_t rows = self.size(-2), cols = self.size(-1);
  int64_t batch = rows * cols != 0 ? out.numel() / (rows * cols) : 0;
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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

// tril_/triu_ write only the zeros, through self's strides, as upstream's in-place kernel:
// the elements kept are never read or rewritten (which shows on an expanded self).
Tensor zero_outside_triangle(const Tensor& self, int64_t diagonal, bool lower) {
  if (self.dim() < 2) wrap_dim(-2, self.dim());
  int64_t rows = self.size(-2), cols = self.size(-1);
  int64_t row_stride = self.stride(-2), col_stride = self.stride(-1);
  Shape batch_sizes(self.sizes().begin(), self.sizes().end() - 2);
  Shape batch_strides(self.strides().begin(), self.strides().end() - 2);
  TN_DISPATCH_ALL_TYPES(self.dtype(), lower ? "tril" : "triu", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* p = self.template data_as<scalar_t>();
    strided_loop<1>(batch_sizes, {batch_strides}, [&](const std::array<int64_t, 1>& o) {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          if (lower ? j - i > diagonal : j - i < diagonal)
            p[o[0] + i * row_stride + j * col_stride] = scalar_t(0);
    });
  });
  return self;
}

Tensor diag(const Tensor& self, int64_t offset) {
  if (self.dtype() == ScalarType::Half) dtype_not_implemented("diag", self.dtype());
  if (self.dim() == 1) {
    int64_t n = self.size(0) + std::abs(offset);
    Tensor out = Tensor::empty({n, n}, self.dtype());
    out.copy_from(scalar_tensor(Scalar(int64_t{0})));
    ops::diagonal(out, offset, 0, 1).copy_from(self);
    return out;
  }
  if (self.dim() == 2) return ops::diagonal(self, offset, 0, 1).clone();
  throw Error("diag(): Supports 1D or 2D tensors. Got " + std::to_string(self.dim()) + "D");
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
  if (k == 1) return ops::transpose(flip(self, {d1}), d0, d1).clone();
  if (k == 2) return flip(self, {d0, d1});
  if (k == 3) return ops::transpose(flip(self, {d0}), d0, d1).clone();
  return self.clone();
}

}  // namespace

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
TN_KERNEL("aten::tril_", { return zero_outside_triangle(a.tensor(0), a.integer(1), true); });
TN_KERNEL("aten::triu_", { return zero_outside_triangle(a.tensor(0), a.integer(1), false); });
TN_KERNEL("aten::diag", { return diag(a.tensor(0), a.integer(1)); });
TN_KERNEL("aten::diagflat", {
  const Tensor& self = a.tensor(0);
  return ops::diag(ops::reshape(self, Shape{self.numel()}), a.integer(1));  // through the door: decomposed
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
  ops::diagonal(out, offset, d1, d2).copy_from(self);
  return out;
});
TN_KERNEL("aten::rot90", { return rot90(a.tensor(0), a.integer(1), a.int_list(2)); });

}  // namespace tn
