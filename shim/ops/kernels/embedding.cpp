// embedding, embedding_renorm_ and one_hot.
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

// Each distinct looked-up row whose norm exceeds max_norm scaled to max_norm / (norm + 1e-7), in
// ascending row order, as upstream's embedding_renorm_cpu_ (the norm read back as a double).
TN_KERNEL("aten::embedding_renorm_", {
  const Tensor& self = a.tensor(0);
  const Tensor& indices = a.tensor(1);
  double max_norm = a.real(2), norm_type = a.real(3);
  if (self.dim() != 2)
    throw Error(
        "Expected 2-dimensional tensor, but got " + std::to_string(self.dim()) +
        "-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)");
  if (indices.dtype() != ScalarType::Long && indices.dtype() != ScalarType::Int)
    throw Error(
        "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int");
  Tensor rows = ops::_to_copy(flat(indices), ScalarType::Long).contiguous();
  std::vector<int64_t> sorted(rows.data_as<int64_t>(), rows.data_as<int64_t>() + rows.numel());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (int64_t index : sorted) {
    if (index < -self.size(0) || index >= self.size(0))
      throw IndexError("index " + std::to_string(index) + " is out of bounds for dimension 0 with size " +
                       std::to_string(self.size(0)));
    Tensor row = ops::select(self, 0, index);
    double norm = ops::norm(row, Scalar(norm_type)).item().to_double();
    if (norm > max_norm) ops::mul_(row, Scalar(max_norm / (norm + 1e-7)));
  }
  return self;
});

}  // namespace tn
