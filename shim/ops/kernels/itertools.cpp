// cartesian_prod and combinations.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

TN_KERNEL("aten::cartesian_prod", {
  auto ts = a.tensor_list(0);
  if (ts.size() == 1) return ts[0];
  auto grids = ops::meshgrid(ts, "ij");
  std::vector<Tensor> columns;
  for (const Tensor& g : grids) columns.push_back(ops::reshape(g, Shape{-1}));
  return ops::stack(columns, int64_t{1});
});
TN_KERNEL("aten::combinations", {
  const Tensor& self = a.tensor(0);
  if (self.dim() != 1) throw Error("Expect a 1D vector, but got shape " + shape_str(self.sizes()));
  int64_t r = a.integer(1), n = self.size(0);
  bool with_replacement = a.boolean(2);
  if (r < 0) throw Error("Expect a non-negative number, but got " + std::to_string(r));
  std::vector<std::vector<int64_t>> combos;
  std::vector<int64_t> current;
  std::function<void(int64_t)> walk = [&](int64_t start) {
    if (int64_t(current.size()) == r) {
      combos.push_back(current);
      return;
    }
    for (int64_t i = start; i < n; ++i) {
      current.push_back(i);
      walk(with_replacement ? i : i + 1);
      current.pop_back();
    }
  };
  if (r > 0) walk(0);
  if (r == 0) return Tensor::empty({0}, self.dtype());
  Tensor index = Tensor::empty({int64_t(combos.size()) * r}, ScalarType::Long);
  for (size_t i = 0; i < combos.size(); ++i)
    for (int64_t j = 0; j < r; ++j) index.data_as<int64_t>()[int64_t(i) * r + j] = combos[i][size_t(j)];
  return ops::reshape(ops::index_select(self, int64_t{0}, index), Shape{int64_t(combos.size()), r});
});

}  // namespace tn
