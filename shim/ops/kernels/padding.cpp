// pad (constant, reflect, replicate, circular).
#include "padding.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

Tensor pad_index(int64_t size, int64_t lo, int64_t hi, const std::string& mode) {
  MetaAllocation with_bytes(false);  // an index map with values, even within a call on the meta device
  Tensor index = Tensor::empty({size + lo + hi}, ScalarType::Long);
  for (int64_t j = -lo; j < size + hi; ++j) {
    int64_t k;
    if (mode == "reflect")
      k = j < 0 ? -j : j >= size ? 2 * (size - 1) - j : j;
    else if (mode == "replicate")
      k = std::clamp<int64_t>(j, 0, size - 1);
    else if (mode == "circular")
      k = ((j % size) + size) % size;
    else
      throw Error("Unrecognised padding mode " + mode);
    index.data_as<int64_t>()[j + lo] = k;
  }
  return index;
}

namespace {

// Pads the last len(pad)/2 dims; pad lists (left, right) pairs from the last dim backwards.
Tensor pad(const Tensor& self, const std::vector<int64_t>& p, const std::string& mode, double value) {
  if (p.size() % 2 != 0) throw Error("Padding length must be divisible by 2");
  int64_t n = int64_t(p.size()) / 2;
  if (n > self.dim()) throw Error("Padding length too large");
  if (mode == "constant") {
    Shape shape = self.sizes();
    for (int64_t i = 0; i < n; ++i) {
      int64_t d = self.dim() - 1 - i;
      shape[size_t(d)] += p[size_t(2 * i)] + p[size_t(2 * i + 1)];
      if (shape[size_t(d)] < 0)
        throw Error("The input size " + std::to_string(self.size(d)) + ", plus negative padding " +
                    std::to_string(p[size_t(2 * i)]) + " and " + std::to_string(p[size_t(2 * i + 1)]) +
                    " resulted in a negative output size, which is invalid. Check dimension " +
                    std::to_string(d) + " of your input.");
    }
    Tensor out = Tensor::empty(shape, self.dtype());
    out.copy_from(scalar_tensor(Scalar(value)));
    Tensor dst = out, src = self;
    for (int64_t i = 0; i < n; ++i) {
      int64_t d = self.dim() - 1 - i, lo = p[size_t(2 * i)], hi = p[size_t(2 * i + 1)];
      int64_t s0 = std::max<int64_t>(-lo, 0), s1 = self.size(d) - std::max<int64_t>(-hi, 0);
      src = ops::slice(src, d, s0, s1, int64_t{1});
      dst = ops::slice(dst, d, std::max<int64_t>(lo, 0), std::max<int64_t>(lo, 0) + (s1 - s0), int64_t{1});
    }
    dst.copy_from(src);
    return out;
  }
  // reflect / replicate / circular: gather along each padded dim with an index map.
  Tensor out = self;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = self.dim() - 1 - i, lo = p[size_t(2 * i)], hi = p[size_t(2 * i + 1)], size = out.size(d);
    if (mode == "reflect" && (lo >= size || hi >= size))
      throw Error(
          "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
          "(" +
          std::to_string(lo) + ", " + std::to_string(hi) + ") at dimension " + std::to_string(d) +
          " of input " + shape_str(self.sizes()));
    Tensor index = pad_index(size, lo, hi, mode);
    // On the meta device only the map's length counts (and index_select refuses a cpu index there).
    if (out.is_meta()) index = Tensor::empty(index.sizes(), ScalarType::Long);
    out = ops::index_select(out, d, index);
  }
  return out;
}

}  // namespace

TN_KERNEL("aten::pad", {
  return pad(a.tensor(0), a.int_list(1), a.optional_string(2).value_or("constant"),
             a.optional_real(3).value_or(0.0));
});

}  // namespace tn
