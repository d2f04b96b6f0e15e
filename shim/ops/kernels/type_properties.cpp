// Questions about tensors and dtypes: size, stride, item, _local_scalar_dense, is_floating_point,
// is_complex, _has_compatible_shallow_copy_type, is_same_size, equal, result_type, promote_types, can_cast.
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

TN_KERNEL("aten::size.int", { return a.tensor(0).size(a.integer(1)); });
TN_KERNEL("aten::stride.int", { return a.tensor(0).stride(a.integer(1)); });
TN_KERNEL("aten::item", { return a.tensor(0).item(); });
TN_KERNEL("aten::_local_scalar_dense", { return a.tensor(0).item(); });
TN_KERNEL("aten::is_floating_point", { return is_floating(a.tensor(0).dtype()); });
// The shim has no complex dtypes (a complex tensor is refused where it would be made).
TN_KERNEL("aten::is_complex", { return (void)a.tensor(0), false; });
// Every shim tensor is a dense CPU tensor of one TensorImpl type: Module._apply may always
// swap a parameter's data in place.
// Tensor.data = other keeps the object only within a device (Module._apply makes new
// parameters when moving between the cpu and meta).
TN_KERNEL("aten::_has_compatible_shallow_copy_type",
          { return a.tensor(0).is_meta() == a.tensor(1).is_meta(); });
TN_KERNEL("aten::is_same_size", { return a.tensor(0).sizes() == a.tensor(1).sizes(); });
// torchvision asks at import which CUDA its ops were built for; this is a CPU build.
TN_KERNEL("torchvision::_cuda_version", { return int64_t{-1}; });
TN_KERNEL("aten::result_type.Tensor", { return int64_t(result_type(a.tensor(0), a.tensor(1))); });
TN_KERNEL("aten::result_type.Scalar",
          { return int64_t(result_type(a.tensor(0), scalar_tensor(a.scalar(1)))); });
TN_KERNEL("aten::result_type.Scalar_Tensor",
          { return int64_t(result_type(scalar_tensor(a.scalar(0)), a.tensor(1))); });
TN_KERNEL("aten::result_type.Scalar_Scalar",
          { return int64_t(result_type(scalar_tensor(a.scalar(0)), scalar_tensor(a.scalar(1)))); });
TN_KERNEL("aten::promote_types",
          { return int64_t(promote_types(ScalarType(a.integer(0)), ScalarType(a.integer(1)))); });
TN_KERNEL("aten::can_cast", { return can_cast(ScalarType(a.integer(0)), ScalarType(a.integer(1))); });
TN_KERNEL("aten::equal", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  if (x.sizes() != y.sizes()) return false;
  Tensor same = ops::eq(x, y);
  return ops::all(same).item().to<bool>();
});

}  // namespace tn
