// searchsorted and bucketize.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Tensor searchsorted(const Tensor& sorted, const Tensor& values, bool out_int32, bool right) {
  if (sorted.dim() != 1 &&
      (sorted.dim() == 0 || Shape(sorted.sizes().begin(), sorted.sizes().end() - 1) !=
                                Shape(values.sizes().begin(), values.sizes().end() - (values.dim() ? 1 : 0))))
    throw Error(
        "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
        "boundaries tensor and input value tensor must match");
  Tensor seq = sorted.to(ScalarType::Double).contiguous(), vals = values.to(ScalarType::Double).contiguous();
  int64_t length = seq.size(-1);
  Tensor out = Tensor::empty(values.sizes(), out_int32 ? ScalarType::Int : ScalarType::Long);
  int64_t per_row = sorted.dim() == 1 ? vals.numel() : (values.dim() ? values.size(-1) : 1);
  for (int64_t i = 0; i < vals.numel(); ++i) {
    const double* row = seq.data_as<double>() + (sorted.dim() == 1 ? 0 : (i / per_row) * length);
    double v = vals.data_as<double>()[i];
    const double* pos =
        right ? std::upper_bound(row, row + length, v) : std::lower_bound(row, row + length, v);
    int64_t k = pos - row;
    if (out_int32)
      out.data_as<int32_t>()[i] = int32_t(k);
    else
      out.data_as<int64_t>()[i] = k;
  }
  return out;
}

}  // namespace

TN_KERNEL("aten::searchsorted.Tensor", {
  if (a.tensor(0).dtype() == ScalarType::Bool)
    dtype_not_implemented("searchsorted_out_cpu", ScalarType::Bool);
  bool right = a.boolean(3) || a.optional_string(4).value_or("") == "right";
  std::optional<Tensor> sorter = a.optional_tensor(5);
  if (!sorter) return searchsorted(a.tensor(0), a.tensor(1), a.boolean(2), right);
  // The positions are in the order `sorter` puts the sequence in, as upstream's.
  if (sorter->dtype() != ScalarType::Long)
    throw Error(std::string("torch.searchsorted(): sorter must be a tensor of long dtype but got dtype ") +
                upstream_type_name(sorter->dtype()));
  if (sorter->sizes() != a.tensor(0).sizes())
    throw Error(
        "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor " +
        shape_str(a.tensor(0).sizes()) + "and got sorter tensor " + shape_str(sorter->sizes()));
  return searchsorted(ops::gather(a.tensor(0), -1, *sorter), a.tensor(1), a.boolean(2), right);
});
TN_KERNEL("aten::bucketize.Tensor", {
  if (a.tensor(0).dtype() == ScalarType::Bool)
    dtype_not_implemented("searchsorted_out_cpu", ScalarType::Bool);
  return searchsorted(a.tensor(1), a.tensor(0), a.boolean(2), a.boolean(3));
});

}  // namespace tn
