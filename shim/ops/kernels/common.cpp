#include "common.h"

#include "core/overlap.h"
#include "write_rules.h"

namespace tn {

namespace {
// Upstream's combine_categories: a lower-ranked group only matters when it is of a
// higher category (e.g. a float number with an integer tensor).
ScalarType combine(ScalarType higher, ScalarType lower) {
  if (is_floating(higher)) return higher;
  if (higher == ScalarType::Bool || is_floating(lower)) return promote_types(higher, lower);
  if (higher != ScalarType::Undefined) return higher;
  return lower;
}
}  // namespace

void ResultType::add(const Tensor& t) {
  if (t.impl()->wrapped_number) {
    ScalarType s = t.dtype();
    if (is_floating(s)) s = default_dtype();
    wrapped_ = promote_types(wrapped_, s);
  } else if (t.dim() == 0) {
    zero_ = promote_types(zero_, t.dtype());
  } else {
    dim_ = promote_types(dim_, t.dtype());
  }
}

void ResultType::add(const Scalar& s) {
  ScalarType t = s.is_float() ? default_dtype() : s.type();
  wrapped_ = promote_types(wrapped_, t);
}

ScalarType ResultType::get() const { return combine(dim_, combine(zero_, wrapped_)); }

ScalarType result_type(const Tensor& a, const Tensor& b) {
  ResultType r;
  r.add(a);
  r.add(b);
  return r.get();
}

ScalarType float_type(ScalarType t) { return is_floating(t) ? t : default_dtype(); }

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape strides(shape.size(), 0);
  int64_t offset = int64_t(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] != 1) strides[d + offset] = t.strides()[d];
  return strides;
}

ReducePlan plan_reduce(const Tensor& self, const std::optional<std::vector<int64_t>>& dims_opt,
                       bool keepdim) {
  int64_t nd = self.dim();
  std::vector<bool> reduce(size_t(std::max<int64_t>(nd, 0)), false);
  bool all = !dims_opt || dims_opt->empty();
  if (!all)
    for (int64_t d : *dims_opt) {
      int64_t w = wrap_dim(d, nd);
      if (nd > 0) {
        if (reduce[size_t(w)])
          throw Error("dim " + std::to_string(w) + " appears multiple times in the list of dims");
        reduce[size_t(w)] = true;
      }
    }
  ReducePlan plan;
  Shape order;
  for (int64_t d = 0; d < nd; ++d) {
    bool r = all || reduce[size_t(d)];
    if (!r) {
      order.push_back(d);
      plan.kept_shape.push_back(self.sizes()[size_t(d)]);
      plan.out_shape.push_back(self.sizes()[size_t(d)]);
    } else if (keepdim) {
      plan.out_shape.push_back(1);
    }
  }
  for (int64_t d = 0; d < nd; ++d)
    if (all || reduce[size_t(d)]) {
      order.push_back(d);
      plan.inner *= self.sizes()[size_t(d)];
    }
  Shape sizes, strides;
  for (int64_t d : order) {
    sizes.push_back(self.sizes()[size_t(d)]);
    strides.push_back(self.strides()[size_t(d)]);
  }
  plan.values = self.view_as_strided(sizes, strides, self.offset()).contiguous();
  return plan;
}

Tensor sequential_mean(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
                       ScalarType t) {
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, t);
  TN_DISPATCH_ALL_TYPES(t, "mean", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    reduce_loop<double, scalar_t, scalar_t>(
        plan, out, 0.0, [](double acc, scalar_t x, int64_t) { return acc + double(compute_t<scalar_t>(x)); },
        [](double acc, int64_t n) { return scalar_t(compute_t<scalar_t>(acc / double(n))); });
  });
  return out;
}

// The elements in order as a 1-D tensor (a view when already contiguous).
Tensor flat(const Tensor& t) {
  Tensor c = t.contiguous();
  return c.view_as_strided({c.numel()}, {1}, c.offset());
}

Rows rows_along(const Tensor& t, int64_t dim) {
  Rows rows;
  Tensor x = t.dim() == 0 ? t.view_as_strided({1}, {1}, t.offset()) : t;
  rows.dim = wrap_dim(dim, x.dim());
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != rows.dim) rows.perm.push_back(d);
  rows.perm.push_back(rows.dim);
  for (int64_t d : rows.perm) {
    sizes.push_back(x.sizes()[size_t(d)]);
    strides.push_back(x.strides()[size_t(d)]);
  }
  rows.moved = sizes;
  rows.data = x.view_as_strided(sizes, strides, x.offset()).contiguous();
  rows.length = sizes.back();
  rows.count = 1;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) rows.count *= sizes[i];
  rows.scalar = t.dim() == 0;
  return rows;
}

Tensor from_rows(const Tensor& data, const Rows& rows, int64_t length, bool keepdim) {
  Shape moved = rows.moved;
  moved.back() = length;
  Shape strides = contiguous_strides(moved);
  size_t n = moved.size();
  Shape sizes(n), out_strides(n);
  for (size_t i = 0; i < n; ++i) {
    sizes[size_t(rows.perm[i])] = moved[i];
    out_strides[size_t(rows.perm[i])] = strides[i];
  }
  Tensor back = data.view_as_strided(sizes, out_strides, data.offset());
  if (!keepdim) {
    sizes.erase(sizes.begin() + rows.dim);
    out_strides.erase(out_strides.begin() + rows.dim);
    back = data.view_as_strided(sizes, out_strides, data.offset());
  }
  Tensor out = back.contiguous();
  if (rows.scalar) return out.view_as_strided({}, {}, out.offset());  // 0-dim in, 0-dim out
  return out;
}

bool vml_available() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

bool writes_into(const Tensor* into, const Shape& shape, ScalarType dtype,
                 const std::vector<Tensor>& inputs) {
  if (!into || into->sizes() != shape || into->dtype() != dtype || !is_non_overlapping_and_dense(*into))
    return false;
  return std::all_of(inputs.begin(), inputs.end(), [&](const Tensor& input) {
    if (input.storage() != into->storage()) return true;
    Overlap o = overlap(*into, input);
    return o == Overlap::No || (o == Overlap::Full && input.sizes() == shape);
  });
}

Tensor write_in_place(const Tensor& self, const std::string& family, const Tensor& result) {
  if (result.same(self)) return self;
  check_output_dtype(family, family + "_", 0, 1, self.dtype(), result.dtype());
  self.copy_from(result);
  return self;
}

Tensor scalar_tensor(const Scalar& s) {
  MetaAllocation with_bytes(false);  // a value even within a call on the meta device
  Tensor t = Tensor::empty({}, s.type());
  TN_DISPATCH_ALL_TYPES(t.dtype(), "scalar_tensor", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    *t.data_as<scalar_t>() = s.to<scalar_t>();
  });
  t.impl()->wrapped_number = true;
  return t;
}

void check_linalg_norm_dtype(std::optional<ScalarType> dtype, ScalarType input, const char* name) {
  if (!dtype) return;
  if (!is_floating(*dtype))
    throw Error(std::string(name) + ": dtype should be floating point or complex, but got " +
                upstream_type_name(*dtype));
  if (promote_types(input, *dtype) != *dtype)
    throw Error(std::string(name) + ": the dtype of the input (" + upstream_type_name(input) +
                ") should be convertible without narrowing to the specified dtype (" +
                upstream_type_name(*dtype) + ")");
}

}  // namespace tn
