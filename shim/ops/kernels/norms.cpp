// Vector norms: norm, linalg_vector_norm, frobenius_norm.
#include <algorithm>
#include <limits>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// p-norms: 0 counts nonzeros, inf/-inf take max/min of |x|, others (sum |x|^p)^(1/p).
Tensor vector_norm(const Tensor& self, double p, const Dims& dims, bool keepdim,
                   std::optional<ScalarType> dtype, const char* name) {
  if (!is_floating(self.dtype()))
    throw Error(std::string(name) + "(): input dtype should be either floating point or complex. Got " +
                upstream_type_name(self.dtype()) + " instead.");
  ScalarType t = dtype.value_or(self.dtype());
  // dtype= converts the input first, as upstream's: a double input's float 2-norm is float's.
  if (p == 2 && t == ScalarType::Float) return norm2_float(self.to(t), dims, keepdim);
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  if (self.numel() == 0 && p < 0)
    throw IndexError(std::string(name) +
                     "(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor out = Tensor::empty(plan.out_shape, t);
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
  TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = plan.values.template data_as<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const scalar_t* row = in + i * plan.inner;
      double acc = 0;
      if (std::isinf(p)) {
        acc = p > 0 ? 0 : std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < plan.inner; ++j) {
          double x = std::abs(double(row[j]));
          if (std::isnan(x)) {
            acc = x;
            break;
          }
          acc = p > 0 ? std::max(acc, x) : std::min(acc, x);
        }
      } else if (p == 0) {
        for (int64_t j = 0; j < plan.inner; ++j) acc += double(row[j]) != 0;
      } else if (p == 1) {
        for (int64_t j = 0; j < plan.inner; ++j) acc += std::abs(double(row[j]));
      } else if (p == 2) {
        for (int64_t j = 0; j < plan.inner; ++j) acc += double(row[j]) * double(row[j]);
        acc = std::sqrt(acc);
      } else {
        for (int64_t j = 0; j < plan.inner; ++j) acc += std::pow(std::abs(double(row[j])), p);
        acc = std::pow(acc, 1.0 / p);
      }
      out.template data_as<scalar_t>()[i] = scalar_t(acc);
    }
  });
  return out;
}

double p_of(const std::optional<Scalar>& p) { return p ? p->to_double() : 2.0; }

}  // namespace

TN_KERNEL("aten::norm.Scalar", {
  return vector_norm(a.tensor(0), a.scalar(1).to_double(), std::nullopt, false, std::nullopt, "norm");
});
TN_KERNEL("aten::norm.ScalarOpt_dim", {
  return vector_norm(a.tensor(0), p_of(a.optional_scalar(1)), a.optional_int_list(2), a.boolean(3),
                     std::nullopt, "norm");
});
TN_KERNEL("aten::norm.ScalarOpt_dtype", {
  return vector_norm(a.tensor(0), p_of(a.optional_scalar(1)), std::nullopt, false, a.optional_dtype(2),
                     "norm");
});
TN_KERNEL("aten::norm.ScalarOpt_dim_dtype", {
  return vector_norm(a.tensor(0), p_of(a.optional_scalar(1)), a.optional_int_list(2), a.boolean(3),
                     a.optional_dtype(4), "norm");
});
TN_KERNEL("aten::linalg_vector_norm", {
  // After the input's own dtype check (vector_norm's); torch.norm's dtype= may narrow.
  if (is_floating(a.tensor(0).dtype()))
    check_linalg_norm_dtype(a.optional_dtype(4), a.tensor(0).dtype(), "linalg.vector_norm");
  return vector_norm(a.tensor(0), a.scalar(1).to_double(), a.optional_int_list(2), a.boolean(3),
                     a.optional_dtype(4), "linalg.vector_norm");
});
TN_KERNEL("aten::frobenius_norm",
          { return vector_norm(a.tensor(0), 2.0, std::nullopt, false, std::nullopt, "frobenius_norm"); });
TN_KERNEL("aten::frobenius_norm.dim", {
  return vector_norm(a.tensor(0), 2.0, a.optional_int_list(1), a.boolean(2), std::nullopt, "frobenius_norm");
});

}  // namespace tn
