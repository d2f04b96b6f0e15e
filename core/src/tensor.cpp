#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/autograd_mode.h"
#include "core/coalesce.h"
#include "core/parallel.h"

namespace tn {

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t stride = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Tensor Tensor::empty(const Shape& sizes, ScalarType dtype) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0)
      throw Error("Trying to create tensor with negative dimension " + std::to_string(s) + ": " +
                  shape_str(sizes));
    n *= s;
  }
  auto storage = std::make_shared<Storage>(size_t(n) * element_size(dtype));
  return from_storage(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype);
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset,
                            ScalarType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->inference = InferenceMode::is_enabled();
  return Tensor(std::move(impl));
}

namespace {
// A 0-dim tensor has no size or stride to read (wrap_dim accepts 0 and -1 for it, as
// upstream's does for reductions), so refuse here as upstream's size() does.
size_t readable_dim(int64_t dim, int64_t ndim) {
  if (ndim == 0)
    throw IndexError("Dimension specified as " + std::to_string(dim) + " but tensor has no dimensions");
  return size_t(wrap_dim(dim, ndim));
}
}  // namespace

int64_t Tensor::size(int64_t dim) const { return impl_->sizes[readable_dim(dim, this->dim())]; }
int64_t Tensor::stride(int64_t dim) const { return impl_->strides[readable_dim(dim, this->dim())]; }

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : impl_->sizes) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (impl_->sizes[d] == 0) return true;
    if (impl_->sizes[d] != 1 && impl_->strides[d] != expected) return false;
    expected *= impl_->sizes[d];
  }
  return true;
}

Tensor Tensor::view_as_strided(Shape sizes, Shape strides, int64_t offset) const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = impl_->dtype;
  impl->version = impl_->version;  // views share the version counter with their base
  impl->inference = impl_->inference;
  return Tensor(std::move(impl));
}

void Tensor::bump_version() const {
  if (!impl_->inference) {
    ++*impl_->version;
    return;
  }
  if (!InferenceMode::is_enabled())
    throw Error(
        "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get "
        "a "
        "normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more "
        "details.");
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

namespace {

// A copy of a meta tensor is a meta tensor (there are no values to copy), whether or not the
// caller runs under a MetaAllocation (the autograd engine's copies of gradients do not).
Tensor empty_for_copy_of(const Tensor& source, const Shape& sizes, ScalarType type) {
  if (!source.is_meta()) return Tensor::empty(sizes, type);
  MetaAllocation meta;
  return Tensor::empty(sizes, type);
}

}  // namespace

Tensor Tensor::clone() const {
  Tensor out = empty_for_copy_of(*this, sizes(), dtype());
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(ScalarType type) const {
  if (type == dtype()) return *this;
  Tensor out = empty_for_copy_of(*this, sizes(), type);
  out.copy_from(*this);
  return out;
}

namespace {

template <typename Dst, typename Src>
Dst convert(Src value) {
  if constexpr (std::is_same_v<Dst, bool>) {
    return float(value) != 0.0f || (std::is_integral_v<Src> && value != Src(0));
  } else if constexpr (std::is_same_v<Src, Half> || std::is_same_v<Src, BFloat16>) {
    return convert<Dst>(float(value));
  } else if constexpr (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>) {
    return Dst(float(value));
  } else if constexpr (std::is_integral_v<Dst> && std::is_floating_point_v<Src>) {
    // Float to narrow integer goes through int64 first, as upstream's casts do on x86.
    if (!std::isfinite(value) || value >= 9.3e18 || value <= -9.3e18)
      return Dst(int64_t(std::numeric_limits<int64_t>::min()));
    return Dst(int64_t(value));
  } else {
    return Dst(value);
  }
}

}  // namespace

void Tensor::resize(const Shape& sizes) const {
  if (sizes == impl_->sizes) return;  // as upstream: the same sizes keep their strides
  int64_t numel = 1;
  for (int64_t s : sizes) {
    // Upstream multiplies the sizes as unsigned numbers, so a negative one overflows.
    if (s < 0 || (s != 0 && numel > std::numeric_limits<int64_t>::max() / s))
      throw Error("numel: integer multiplication overflow");
    numel *= s;
  }
  impl_->sizes = sizes;
  impl_->strides = contiguous_strides(sizes);
  if (numel == 0) return;  // upstream leaves the storage alone for an empty result
  size_t needed = size_t(numel + impl_->offset) * itemsize();
  if (needed > impl_->storage->nbytes()) impl_->storage->resize(needed);
}

void Tensor::copy_from(const Tensor& src) const {
  Shape target = sizes();
  // The output first, as upstream names them in a mismatch ("tensor a" is the output).
  const Shape broadcast = broadcast_shapes(target, src.sizes());
  if (broadcast != target)
    throw Error("output with shape " + shape_str(target) + " doesn't match the broadcast shape " +
                shape_str(broadcast));
  if (is_meta()) return;
  int64_t n = numel();
  if (n == 0) return;
  // Both split between threads as upstream's copies are (core/parallel.h), by elements.
  if (is_contiguous() && src.is_contiguous() && src.sizes() == target && src.dtype() == dtype()) {
    // Same storage bytes may overlap (x.copy_(x)): one memmove, which is safe.
    if (src.storage() == storage()) {
      std::memmove(data(), src.data(), size_t(n) * itemsize());
      return;
    }
    char *out = data(), *in = src.data();
    parallel_for(n, kGrainSize, [&](int64_t begin, int64_t end) {
      std::memcpy(out + begin * int64_t(itemsize()), in + begin * int64_t(itemsize()),
                  size_t(end - begin) * itemsize());
    });
    return;
  }
  // A source that overlaps the destination is read from a snapshot first.
  Tensor source = src;
  if (src.storage() == storage()) source = src.clone();
  // Align the source's strides to the destination rank, zero stride on broadcast dimensions.
  int64_t nd = dim(), sd = source.dim();
  Shape src_strides(nd, 0);
  for (int64_t d = 0; d < sd; ++d)
    if (source.sizes()[d] != 1) src_strides[nd - sd + d] = source.strides()[d];
  const Coalesced<2> layout = coalesce<2>(target, {strides(), src_strides});
  TN_DISPATCH_ALL_TYPES(dtype(), "copy_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using dst_t = scalar_t;
    TN_DISPATCH_ALL_TYPES(source.dtype(), "copy_", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      dst_t* const out = data_as<dst_t>();
      const scalar_t* const in = source.data_as<scalar_t>();
      // The two common rows get loops of their own, which the compiler vectorizes: a dense run
      // of each (a conversion, a contiguous(), a cat), and a dense run of the destination from
      // one source element (a fill, an expand).
      auto row = [&](const std::array<int64_t, 2>& at, int64_t length, const std::array<int64_t, 2>& step) {
        int64_t o = at[0], s = at[1];
        if (step[0] == 1 && step[1] == 1) {
          for (int64_t i = 0; i < length; ++i) out[o + i] = convert<dst_t>(in[s + i]);
        } else if (step[0] == 1 && step[1] == 0) {
          std::fill_n(out + o, length, convert<dst_t>(in[s]));
        } else {
          for (int64_t i = 0; i < length; ++i) out[o + i * step[0]] = convert<dst_t>(in[s + i * step[1]]);
        }
      };
      parallel_for(n, kGrainSize,
                   [&](int64_t begin, int64_t end) { rows_in_range<2>(layout, begin, end, row); });
    });
  });
}

Scalar Tensor::item() const {
  if (numel() != 1)
    throw Error("a Tensor with " + std::to_string(numel()) + " elements cannot be converted to Scalar");
  return TN_DISPATCH_ALL_TYPES(dtype(), "item", [&](auto tag_) -> Scalar {
    using scalar_t = TN_TYPE(tag_);
    scalar_t v = *data_as<scalar_t>();
    if constexpr (std::is_same_v<scalar_t, bool>)
      return Scalar(v);
    else if constexpr (std::is_integral_v<scalar_t>)
      return Scalar(int64_t(v));
    else
      return Scalar(double(v));
  });
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t min = ndim > 0 ? -ndim : -1, max = ndim > 0 ? ndim - 1 : 0;
  if (dim < min || dim > max)
    throw IndexError("Dimension out of range (expected to be in range of [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], but got " + std::to_string(dim) + ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error("The size of tensor a (" + std::to_string(da) + ") must match the size of tensor b (" +
                  std::to_string(db) + ") at non-singleton dimension " + std::to_string(i));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

}  // namespace tn
