// unique (_unique2) and unique_consecutive.
#include <algorithm>
#include <map>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// torch.unique on the flattened input: sorted values, inverse indices, counts.
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& self, bool return_inverse, bool return_counts) {
  if (self.dtype() == ScalarType::Half) dtype_not_implemented("unique", self.dtype());
  Tensor flat_values = flat(self);
  auto [sorted, order] = ops::sort(flat_values, 0, false);
  int64_t n = flat_values.numel();
  std::vector<int64_t> starts;
  Tensor inverse = Tensor::empty(return_inverse ? self.sizes() : Shape{0}, ScalarType::Long);
  TN_DISPATCH_ALL_TYPES(self.dtype(), "unique", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* s = sorted.template data_as<scalar_t>();
    const int64_t* o = order.template data_as<int64_t>();
    int64_t group = -1;
    for (int64_t i = 0; i < n; ++i) {
      // NaNs are never equal, so each NaN is its own value (as upstream's sort-based unique).
      bool same = i > 0 && compute_t<scalar_t>(s[i]) == compute_t<scalar_t>(s[i - 1]);
      if (!same) {
        starts.push_back(i);
        ++group;
      }
      if (return_inverse) inverse.data_as<int64_t>()[o[i]] = group;
    }
  });
  int64_t groups = int64_t(starts.size());
  Tensor values = Tensor::empty({groups}, self.dtype());
  Tensor counts = Tensor::empty({return_counts ? groups : 0}, ScalarType::Long);
  for (int64_t g = 0; g < groups; ++g) {
    ops::select(values, int64_t{0}, g).copy_from(ops::select(sorted, int64_t{0}, starts[size_t(g)]));
    if (return_counts)
      counts.data_as<int64_t>()[g] = (g + 1 < groups ? starts[size_t(g + 1)] : n) - starts[size_t(g)];
  }
  return {values, inverse, counts};
}

}  // namespace

TN_KERNEL("aten::_unique2", {
  auto [v, inv, c] = unique(a.tensor(0), a.boolean(2), a.boolean(3));
  return IValue::tuple({v, inv, c});
});
TN_KERNEL("aten::unique_consecutive", {
  if (a.optional_integer(3))
    throw NotImplemented("torchnative does not implement aten::unique_consecutive with dim= yet");
  const Tensor& self = a.tensor(0);
  Tensor values_in = flat(self);
  std::vector<int64_t> starts;
  int64_t n = values_in.numel();
  Tensor inverse = Tensor::empty(a.boolean(1) ? self.sizes() : Shape{0}, ScalarType::Long);
  TN_DISPATCH_ALL_TYPES(self.dtype(), "unique_consecutive", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* v = values_in.template data_as<scalar_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (i == 0 || compute_t<scalar_t>(v[i]) != compute_t<scalar_t>(v[i - 1])) starts.push_back(i);
      if (a.boolean(1)) inverse.data_as<int64_t>()[i] = int64_t(starts.size()) - 1;
    }
  });
  int64_t groups = int64_t(starts.size());
  Tensor index = Tensor::empty({groups}, ScalarType::Long);
  std::copy(starts.begin(), starts.end(), index.data_as<int64_t>());
  Tensor counts = Tensor::empty({a.boolean(2) ? groups : 0}, ScalarType::Long);
  if (a.boolean(2))
    for (int64_t g = 0; g < groups; ++g)
      counts.data_as<int64_t>()[g] = (g + 1 < groups ? starts[size_t(g + 1)] : n) - starts[size_t(g)];
  return IValue::tuple({ops::index_select(values_in, 0, index), inverse, counts});
});

}  // namespace tn
