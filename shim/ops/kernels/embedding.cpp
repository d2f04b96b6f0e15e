// embedding and one_hot.
#include <algorithm>
#include <map>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

TN_KERNEL("aten::one_hot", {
  const Tensor& self = a.tensor(0);
  if (self.dtype() != ScalarType::Long) throw Error("one_hot is only applicable to index tensor.");
  int64_t classes = a.integer(1);
  Tensor values = self.contiguous();
  int64_t max_value = -1;
  for (int64_t i = 0; i < values.numel(); ++i) {
    int64_t v = values.data_as<int64_t>()[i];
    if (v < 0) throw Error("Class values must be non-negative.");
    max_value = std::max(max_value, v);
  }
  if (classes == -1) classes = max_value + 1;
  if (max_value >= classes) throw Error("Class values must be smaller than num_classes.");
  Shape shape = self.sizes();
  shape.push_back(classes);
  Tensor out = Tensor::empty(shape, ScalarType::Long);
  std::fill_n(out.data_as<int64_t>(), out.numel(), 0);
  for (int64_t i = 0; i < values.numel(); ++i)
    out.data_as<int64_t>()[i * classes + values.data_as<int64_t>()[i]] = 1;
  return out;
});
TN_KERNEL("aten::embedding", {
  const Tensor& weight = a.tensor(0);
  Tensor indices = a.tensor(1);
  if (indices.dtype() != ScalarType::Long && indices.dtype() != ScalarType::Int)
    throw Error(
        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but "
        "got torch.FloatTensor instead (while checking arguments for embedding)");
  if (weight.dim() != 2) throw Error("'weight' must be 2-D");
  Tensor rows = ops::index_select(weight, 0, flat(indices));
  Shape shape = indices.sizes();
  shape.push_back(weight.size(1));
  return ops::reshape(rows, shape);
});

}  // namespace tn
