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
  Tensor out =
      ops::empty_like(self, dtype, std::nullopt, std::nullopt, std::nullopt, a.optional_memory_format(6));
  out.copy_from(self);
  return out;
});
namespace {

// Tensor.to's copy: _to_copy's, which keeps the layout under memory_format=preserve.
Tensor converted_copy(const Tensor& t, ScalarType dtype, std::optional<MemoryFormat> memory_format) {
  return ops::_to_copy(t, dtype, std::nullopt, std::nullopt, std::nullopt, false, memory_format);
}

}  // namespace

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
  return (to == t.dtype() && !a.boolean(3)) ? t : converted_copy(t, to, a.optional_memory_format(4));
});
TN_KERNEL("aten::to.other", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.tensor(1).dtype();
  return (to == t.dtype() && !a.boolean(3)) ? t : converted_copy(t, to, a.optional_memory_format(4));
});
TN_KERNEL("aten::to.device", {
  const Tensor& t = a.tensor(0);
  ScalarType to = ScalarType(a.integer(2));
  return (to == t.dtype() && !a.boolean(4)) ? t : converted_copy(t, to, a.optional_memory_format(5));
});
TN_KERNEL("aten::to.dtype_layout", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.optional_dtype(1).value_or(t.dtype());
  return (to == t.dtype() && !a.boolean(6)) ? t : converted_copy(t, to, a.optional_memory_format(7));
});
TN_KERNEL("aten::type_as", {
  const Tensor& t = a.tensor(0);
  ScalarType to = a.tensor(1).dtype();
  return to == t.dtype() ? t : converted_copy(t, to, std::nullopt);
});

}  // namespace tn
