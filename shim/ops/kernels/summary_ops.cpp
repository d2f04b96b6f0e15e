// Counting: bincount, histc.
#include <algorithm>
#include <map>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

TN_KERNEL("aten::bincount", {
  const Tensor& self = a.tensor(0);
  if (self.dim() != 1 || !is_integral(self.dtype(), false))
    throw Error("bincount only supports 1-d non-negative integral inputs.");
  auto weights = a.optional_tensor(1);
  int64_t minlength = a.integer(2);
  if (minlength < 0) throw Error("minlength should be >= 0");
  Tensor v = self.to(ScalarType::Long).contiguous();
  int64_t bins = minlength;
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t x = v.data_as<int64_t>()[i];
    if (x < 0) throw Error("bincount only supports 1-d non-negative integral inputs.");
    bins = std::max(bins, x + 1);
  }
  ScalarType t = weights ? (weights->dtype() == ScalarType::Float ? ScalarType::Float : ScalarType::Double)
                         : ScalarType::Long;
  Tensor out = Tensor::empty({bins}, ScalarType::Double);
  std::fill_n(out.data_as<double>(), bins, 0.0);
  Tensor w = weights ? weights->to(ScalarType::Double).contiguous() : Tensor();
  for (int64_t i = 0; i < v.numel(); ++i)
    out.data_as<double>()[v.data_as<int64_t>()[i]] += weights ? w.data_as<double>()[i] : 1.0;
  return out.to(t);
});
TN_KERNEL("aten::histc", {
  const Tensor& self = a.tensor(0);
  if (!is_floating(self.dtype())) dtype_not_implemented("histogram_cpu", self.dtype());
  int64_t bins = a.integer(1);
  if (bins <= 0) throw Error("bins must be > 0");
  Tensor v = flat(self).to(ScalarType::Double).contiguous();
  double lo = a.scalar(2).to_double(), hi = a.scalar(3).to_double();
  if (lo == hi && v.numel() > 0) {
    lo = *std::min_element(v.data_as<double>(), v.data_as<double>() + v.numel());
    hi = *std::max_element(v.data_as<double>(), v.data_as<double>() + v.numel());
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  if (lo > hi) throw Error("max must be larger than min");
  Tensor out = Tensor::empty({bins}, ScalarType::Double);
  std::fill_n(out.data_as<double>(), bins, 0.0);
  for (int64_t i = 0; i < v.numel(); ++i) {
    double x = v.data_as<double>()[i];
    if (x < lo || x > hi || std::isnan(x)) continue;
    int64_t b = int64_t((x - lo) * double(bins) / (hi - lo));
    if (b == bins) b -= 1;
    out.data_as<double>()[b] += 1;
  }
  return out.to(self.dtype());
});

}  // namespace tn
