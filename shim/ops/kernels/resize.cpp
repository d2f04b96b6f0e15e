// Storage and size changes: set_, resize_, is_set_to.
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// set_ and resize_ follow upstream's resize_impl_cpu_: the tensor takes the storage, offset,
// sizes and strides it is given, and the storage grows when they reach past its end.
Tensor set_storage(const Tensor& self, const std::shared_ptr<Storage>& storage, int64_t offset,
                   const Shape& sizes, const std::optional<Shape>& strides) {
  if (strides && strides->size() != sizes.size())
    throw Error("unequal size length (" + std::to_string(sizes.size()) + ") and stride length (" +
                std::to_string(strides->size()) + ")");
  if (offset < 0) throw Error("Tensor: invalid storage offset " + std::to_string(offset));
  TensorImpl* impl = self.impl();
  impl->storage = storage;
  impl->offset = offset;
  if (!strides) {
    self.resize(sizes);
    return self;
  }
  int64_t last = 0;  // highest element index reached, relative to the offset
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0)
      throw Error("Trying to create tensor with negative dimension " + std::to_string(sizes[d]) + ": " +
                  shape_str(sizes));
    if (sizes[d] == 0) last = -1;
    if (last >= 0) last += (sizes[d] - 1) * (*strides)[d];
  }
  impl->sizes = sizes;
  impl->strides = *strides;
  if (last >= 0) {
    size_t needed = size_t(offset + last + 1) * self.itemsize();
    if (needed > storage->nbytes()) storage->resize(needed);
  }
  return self;
}

const std::shared_ptr<Storage>& storage_for(const Tensor& self, const StorageRef& source) {
  if (source.typed_as && *source.typed_as != self.dtype())
    throw Error(std::string("Expected a Storage of type ") + cpp_type_name(self.dtype()) +
                " or an UntypedStorage, but got type " + upstream_type_name(*source.typed_as) +
                " for argument 1 'storage'");
  return source.storage;
}

}  // namespace

TN_KERNEL("aten::set_.source_Storage", {
  const Tensor& self = a.tensor(0);
  const auto& storage = storage_for(self, a.storage(1));
  return set_storage(self, storage, 0, {int64_t(storage->nbytes() / self.itemsize())}, std::nullopt);
});
TN_KERNEL("aten::set_.source_Storage_storage_offset", {
  const Tensor& self = a.tensor(0);
  Shape strides = a.int_list(4);
  return set_storage(self, storage_for(self, a.storage(1)), a.integer(2), a.int_list(3),
                     strides.empty() ? std::nullopt : std::optional<Shape>(strides));
});
TN_KERNEL("aten::set_.source_Tensor", {
  const Tensor& self = a.tensor(0);
  const Tensor& source = a.tensor(1);
  if (self.same(source)) return self;
  if (source.dtype() != self.dtype())
    throw Error(std::string("set_: the source tensor's dtype (") + cpp_type_name(source.dtype()) +
                ") differs from self's (" + cpp_type_name(self.dtype()) + ")");
  return set_storage(self, source.storage(), source.offset(), source.sizes(), source.strides());
});
TN_KERNEL("aten::set_",
          { return set_storage(a.tensor(0), std::make_shared<Storage>(0), 0, {0}, std::nullopt); });
TN_KERNEL("aten::is_set_to", {
  const Tensor& self = a.tensor(0);
  const Tensor& other = a.tensor(1);
  return self.storage() == other.storage() && self.offset() == other.offset() &&
         self.sizes() == other.sizes() && self.strides() == other.strides();
});
TN_KERNEL("aten::resize_", {
  const Tensor& self = a.tensor(0);
  std::optional<int64_t> format = a.optional_integer(2);
  if (format == int64_t(MemoryFormat::Preserve)) throw Error("Unsupported memory formatPreserve");
  if (format && *format != int64_t(MemoryFormat::Contiguous))
    throw NotImplemented(
        "torchnative: resize_ supports only contiguous_format (channels_last restriding is missing)");
  self.resize(a.int_list(1));
  return self;
});

}  // namespace tn
