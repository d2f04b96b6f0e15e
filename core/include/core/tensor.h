// Strided tensors over shared storage: the project's c10 TensorImpl and Tensor handle.
// This layer knows nothing of operators or Python.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/scalar.h"
#include "core/scalar_type.h"
#include "core/storage.h"

namespace tn {

using Shape = std::vector<int64_t>;

class Tensor;
struct AutogradMeta;
namespace autograd {
struct Node;  // shim/autograd: core keeps the pointer, never the graph's types
}

// State shared by every handle to one tensor. Views hold their own TensorImpl
// pointing at the same Storage.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements
  ScalarType dtype = ScalarType::Float;
  // A leaf that requires grad, or a result of a recorded call (then autograd->grad_fn is set).
  bool requires_grad = false;
  // grad, grad_fn and output number; made when first needed. Not copied with the impl.
  std::unique_ptr<AutogradMeta> autograd;
  // A Python number turned into a 0-dim tensor: it ranks below tensors in type promotion.
  bool wrapped_number = false;
  // Slot for the Python object wrapping this impl, so identity survives round trips.
  void* python_object = nullptr;
  std::shared_ptr<std::atomic<uint32_t>> version = std::make_shared<std::atomic<uint32_t>>(0);
  // The tensor this one is a view of (never itself a view), set by the dispatcher when a view
  // operator returns it: Tensor._base, and what in-place detach_ refuses.
  std::shared_ptr<TensorImpl> view_base;
  // Made under inference mode, or a view of such a tensor: upstream's inference tensor, which
  // keeps no version counter, so writing it in place outside inference mode is refused.
  bool inference = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  static Tensor empty(const Shape& sizes, ScalarType dtype);
  static Tensor from_storage(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset,
                             ScalarType dtype);

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  ScalarType dtype() const { return impl_->dtype; }
  const Shape& sizes() const { return impl_->sizes; }
  const Shape& strides() const { return impl_->strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return int64_t(impl_->sizes.size()); }
  int64_t numel() const;
  int64_t offset() const { return impl_->offset; }
  size_t itemsize() const { return element_size(impl_->dtype); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  bool is_meta() const { return impl_->storage->is_meta(); }
  char* data() const {
    return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(itemsize());
  }
  template <typename T>
  T* data_as() const {
    return reinterpret_cast<T*>(data());
  }

  // A new TensorImpl sharing this storage.
  Tensor view_as_strided(Shape sizes, Shape strides, int64_t offset) const;
  Tensor contiguous() const;
  Tensor clone() const;               // contiguous copy
  Tensor to(ScalarType dtype) const;  // same tensor when dtype already matches
  // Broadcasting, converting copy into this; a source sharing this storage is read from a
  // snapshot. Overlap checks and version counters are the dispatcher's (upstream's rules).
  // Into a meta tensor it copies nothing; out of one into another device it is refused.
  void copy_from(const Tensor& src) const;
  // resize_: contiguous strides for `sizes` (unless they are the current sizes), same storage
  // and offset; the storage grows in place when it is too small.
  void resize(const Shape& sizes) const;
  Scalar item() const;
  // After a write: the version counter moves (an inference tensor has none to move, and
  // outside inference mode the write is refused, after the fact as upstream's is).
  void bump_version() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A tensor's place in the autograd graph (upstream's AutogradMeta), kept here rather than on
// the Python object so a leaf's .grad outlives its wrapper.
struct AutogradMeta {
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  // A leaf's AccumulateGrad, shared by every graph that reaches the leaf while one lives.
  std::weak_ptr<autograd::Node> grad_accumulator;
};

Shape contiguous_strides(const Shape& sizes);
int64_t wrap_dim(int64_t dim, int64_t ndim);  // IndexError like upstream when out of range
Shape broadcast_shapes(const Shape& a, const Shape& b);
std::string shape_str(const Shape& shape);

// Multi-dimensional counter over a shape, used by every strided loop.
class IndexCounter {
 public:
  explicit IndexCounter(const Shape& sizes) : sizes_(sizes), index_(sizes.size(), 0) {}
  const Shape& index() const { return index_; }
  // Advances and returns the number of trailing dimensions that wrapped.
  void next() {
    for (int64_t d = int64_t(sizes_.size()) - 1; d >= 0; --d) {
      if (++index_[d] < sizes_[d]) return;
      index_[d] = 0;
    }
  }

 private:
  Shape sizes_;
  Shape index_;
};

}  // namespace tn
