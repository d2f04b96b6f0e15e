// Core tensor types of the shim: dtypes, scalars, storage and strided tensors.
// This layer knows nothing of operators or Python (c10's role upstream).
#pragma once

#include <atomic>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tn {

// Numbering follows upstream's c10::ScalarType so serialized dtype codes agree.
enum class ScalarType : int8_t {
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  Bool = 11,
  BFloat16 = 15,
  Undefined = -1,
};

// Error classes mirror the Python exception each one becomes at the binding layer.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct TypeError : Error {
  using Error::Error;
};
struct IndexError : Error {
  using Error::Error;
};
struct ValueError : Error {
  using Error::Error;
};
struct NotImplemented : Error {
  using Error::Error;
};

[[noreturn]] void fail(const std::string& message);

// IEEE binary16, converted with round-to-nearest-even like upstream's c10::Half.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float value);  // NOLINT: implicit like the arithmetic types it stands for
  operator float() const;
};

// bfloat16: the upper half of a float32, rounded to nearest even (NaN kept quiet).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float value);  // NOLINT
  operator float() const;
};

size_t element_size(ScalarType type);
const char* scalar_type_name(ScalarType type);    // "float32", ...
const char* upstream_type_name(ScalarType type);  // "Float", as upstream's kernel errors spell it
const char* cpp_type_name(ScalarType type);       // "float", "long int": how upstream prints a TypeMeta
// Upstream's refusal for a dtype a CPU kernel lacks: "\"kernel\" not implemented for 'Half'".
[[noreturn]] void dtype_not_implemented(const char* kernel, ScalarType type);
bool is_floating(ScalarType type);
bool is_integral(ScalarType type, bool include_bool);
bool is_signed(ScalarType type);
ScalarType promote_types(ScalarType a, ScalarType b);
// Upstream's canCast: no floating -> integral, nothing but bool -> bool.
bool can_cast(ScalarType from, ScalarType to);

// A Python number carried into C++ with its kind, so promotion can tell 1 from 1.0.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}              // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int), i_(v), d_(double(v)) {}    // NOLINT
  Scalar(int v) : Scalar(int64_t{v}) {}                            // NOLINT
  Scalar(double v) : kind_(Kind::Float), i_(int64_t(v)), d_(v) {}  // NOLINT
  Kind kind() const { return kind_; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  int64_t to_int() const { return kind_ == Kind::Float ? int64_t(d_) : i_; }
  double to_double() const { return d_; }
  // dtype a Python number gets as a "wrapped number" before promotion.
  ScalarType type() const;
  template <typename T>
  T to() const;

 private:
  Kind kind_;
  int64_t i_;
  double d_;
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Dispatch a runtime ScalarType to a compile-time C++ type. The body is a generic
// lambda taking a TypeTag, so `if constexpr` inside it discards per type:
//   TN_DISPATCH_ALL_TYPES(t, "name", [&](auto tag) { using scalar_t = TN_TYPE(tag); ... })
#define TN_TYPE(tag) typename decltype(tag)::type
#define TN_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                 \
  [&] {                                                        \
    switch (TYPE) {                                            \
      case ::tn::ScalarType::Byte:                             \
        return __VA_ARGS__(::tn::TypeTag<uint8_t>{});          \
      case ::tn::ScalarType::Char:                             \
        return __VA_ARGS__(::tn::TypeTag<int8_t>{});           \
      case ::tn::ScalarType::Short:                            \
        return __VA_ARGS__(::tn::TypeTag<int16_t>{});          \
      case ::tn::ScalarType::Int:                              \
        return __VA_ARGS__(::tn::TypeTag<int32_t>{});          \
      case ::tn::ScalarType::Long:                             \
        return __VA_ARGS__(::tn::TypeTag<int64_t>{});          \
      case ::tn::ScalarType::Half:                             \
        return __VA_ARGS__(::tn::TypeTag<::tn::Half>{});       \
      case ::tn::ScalarType::Float:                            \
        return __VA_ARGS__(::tn::TypeTag<float>{});            \
      case ::tn::ScalarType::Double:                           \
        return __VA_ARGS__(::tn::TypeTag<double>{});           \
      case ::tn::ScalarType::Bool:                             \
        return __VA_ARGS__(::tn::TypeTag<bool>{});             \
      case ::tn::ScalarType::BFloat16:                         \
        return __VA_ARGS__(::tn::TypeTag<::tn::BFloat16>{});   \
      default:                                                 \
        ::tn::fail(std::string(NAME) + ": unsupported dtype"); \
    }                                                          \
  }()

// Owned or borrowed bytes. Borrowed memory (numpy arrays, mapped files) keeps its owner
// alive through the release callback.
class Storage {
 public:
  explicit Storage(size_t nbytes);
  Storage(void* data, size_t nbytes, std::function<void()> release);
  // A window on memory someone else owns (a storage slice): `memory` keeps it alive.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> memory);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // Keeps the current bytes alive even if this storage is later resized: what a slice or an
  // asynchronous operation holds on to, so neither can see freed memory.
  const std::shared_ptr<void>& memory() const { return memory_; }
  // Only memory the storage allocated itself can grow or shrink; every tensor and storage
  // object sharing it sees the new bytes (the first min(old, new) are kept), as upstream's.
  bool resizable() const { return resizable_; }
  void resize(size_t nbytes);

 private:
  void* data_;
  size_t nbytes_;
  std::shared_ptr<void> memory_;
  bool resizable_ = false;
};

using Shape = std::vector<int64_t>;

class Tensor;

// State shared by every handle to one tensor. Views hold their own TensorImpl
// pointing at the same Storage.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements
  ScalarType dtype = ScalarType::Float;
  bool requires_grad = false;
  // A Python number turned into a 0-dim tensor: it ranks below tensors in type promotion.
  bool wrapped_number = false;
  // Slot for the Python object wrapping this impl, so identity survives round trips.
  void* python_object = nullptr;
  std::shared_ptr<std::atomic<uint32_t>> version = std::make_shared<std::atomic<uint32_t>>(0);
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
  Tensor clone() const;                     // contiguous copy
  Tensor to(ScalarType dtype) const;        // same tensor when dtype already matches
  void copy_from(const Tensor& src) const;  // broadcasting, converting copy into this
  // resize_: contiguous strides for `sizes`, same storage and offset; the storage grows in
  // place when it is too small.
  void resize(const Shape& sizes) const;
  Scalar item() const;
  void bump_version() const { ++*impl_->version; }

 private:
  std::shared_ptr<TensorImpl> impl_;
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

template <typename T>
T Scalar::to() const {
  if constexpr (std::is_same_v<T, bool>) {
    return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(float(d_));
  } else if constexpr (std::is_floating_point_v<T>) {
    return kind_ == Kind::Float ? T(d_) : T(i_);
  } else {
    // Integral targets wrap like a C++ cast of the int64 value (upstream's behaviour).
    return kind_ == Kind::Float ? T(int64_t(d_)) : T(i_);
  }
}

}  // namespace tn
