// Copies and fills: copy_, fill_, zero_, clone, _to_copy, to, type_as, contiguous.
#include <cmath>
#include <limits>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

// ---- copies and fills ----
TN_KERNEL("aten::copy_", {
  const Tensor& self = a.tensor(0);
  self.copy_from(a.tensor(1));
  return self;
});
TN_KERNEL("aten::fill_.Scalar", {
  const Tensor& self = a.tensor(0);
  self.copy_from(scalar_tensor(a.scalar(1)));
  return self;
});
TN_KERNEL("aten::fill_.Tensor", {
  const Tensor& self = a.tensor(0);
  if (a.tensor(1).dim() != 0)
    throw Error("fill_ only supports 0-dimension value tensor but got tensor with " +
                std::to_string(a.tensor(1).dim()) + " dimensions.");
  self.copy_from(a.tensor(1));
  return self;
});
TN_KERNEL("aten::zero_", {
  const Tensor& self = a.tensor(0);
  self.copy_from(scalar_tensor(Scalar(int64_t{0})));
  return self;
});
TN_KERNEL("aten::_to_copy", {
  const Tensor& self = a.tensor(0);
  auto dtype = a.optional_dtype(1);
  Tensor out = Tensor::empty(self.sizes(), dtype.value_or(self.dtype()));
  out.copy_from(self);
  return out;
});
TN_KERNEL("aten::contiguous", { return a.tensor(0).contiguous(); });
TN_KERNEL("aten::clone", {
  const Tensor& self = a.tensor(0);
  Tensor out = ops::empty_like(self, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                               a.optional_memory_format(1));
  out.copy_from(self);
  return out;
});
TN_KERNEL("aten::to.dtype", {
  const Tensor& t = a.tensor(0);
  ScalarType to = ScalarType(a.integer(1));
  return (to == t.dtype() && !a.boolean(3)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::to.other", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.tensor(1).dtype();
  return (to == t.dtype() && !a.boolean(3)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::to.device", {
  const Tensor& t = a.tensor(0);
  ScalarType to = ScalarType(a.integer(2));
  return (to == t.dtype() && !a.boolean(4)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::to.dtype_layout", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.optional_dtype(1).value_or(t.dtype());
  return (to == t.dtype() && !a.boolean(6)) ? t : t.to(to).clone();
});
TN_KERNEL("aten::type_as", { return a.tensor(0).to(a.tensor(1).dtype()); });

}  // namespace tn
