// Upsampling: upsample_nearest2d, upsample_bilinear2d.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Shape output_size_of(const Tensor& input, const std::optional<std::vector<int64_t>>& size,
                     const std::optional<std::vector<double>>& scales) {
  if (size) return *size;
  if (!scales) throw Error("Must specify exactly one of output_size and scale_factors");
  Shape out;
  for (size_t i = 0; i < scales->size(); ++i)
    out.push_back(int64_t(std::floor(double(input.size(2 + int64_t(i))) * (*scales)[i])));
  return out;
}

Tensor upsample_nearest2d(const Tensor& input, const Shape& size,
                          const std::optional<std::vector<double>>& scales) {
  int64_t h = input.size(2), w = input.size(3), oh = size[0], ow = size[1];
  // As upstream: with a scale factor, source = floor(dst / scale), else floor(dst * in / out).
  auto source = [&](int64_t dst, int64_t in, int64_t out, size_t axis) {
    double scale = scales ? 1.0 / (*scales)[axis] : double(in) / double(out);
    return std::min(int64_t(std::floor(double(dst) * scale)), in - 1);
  };
  Tensor iy = Tensor::empty({oh}, ScalarType::Long), ix = Tensor::empty({ow}, ScalarType::Long);
  for (int64_t i = 0; i < oh; ++i) iy.data_as<int64_t>()[i] = source(i, h, oh, 0);
  for (int64_t j = 0; j < ow; ++j) ix.data_as<int64_t>()[j] = source(j, w, ow, 1);
  return ops::index_select(ops::index_select(input, int64_t{2}, iy), int64_t{3}, ix);
}

Tensor upsample_bilinear2d(const Tensor& input, const Shape& size, bool align_corners,
                           const std::optional<std::vector<double>>& scales) {
  Tensor x = input.contiguous();
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = size[0], ow = size[1];
  auto ratio = [&](int64_t in, int64_t out, size_t axis) {
    if (align_corners) return out > 1 ? double(in - 1) / double(out - 1) : 0.0;
    return scales ? 1.0 / (*scales)[axis] : double(in) / double(out);
  };
  double rh = ratio(h, oh, 0), rw = ratio(w, ow, 1);
  Tensor out = Tensor::empty({n, c, oh, ow}, x.dtype());
  TN_DISPATCH_ALL_TYPES(x.dtype(), "upsample_bilinear2d", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = x.template data_as<scalar_t>();
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t i = 0; i < oh; ++i) {
        double sy = align_corners ? rh * double(i) : std::max(rh * (double(i) + 0.5) - 0.5, 0.0);
        int64_t y0 = std::min<int64_t>(int64_t(sy), h - 1), y1 = std::min<int64_t>(y0 + 1, h - 1);
        double ly = sy - double(y0);
        for (int64_t j = 0; j < ow; ++j) {
          double sx = align_corners ? rw * double(j) : std::max(rw * (double(j) + 0.5) - 0.5, 0.0);
          int64_t x0 = std::min<int64_t>(int64_t(sx), w - 1), x1 = std::min<int64_t>(x0 + 1, w - 1);
          double lx = sx - double(x0);
          auto at = [&](int64_t yy, int64_t xx) {
            return double(compute_t<scalar_t>(in[(p * h + yy) * w + xx]));
          };
          double v = (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) +
                     ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
          out.template data_as<scalar_t>()[(p * oh + i) * ow + j] = scalar_t(compute_t<scalar_t>(v));
        }
      }
  });
  return out;
}

}  // namespace

TN_KERNEL("aten::upsample_nearest2d.vec", {
  const Tensor& x = a.tensor(0);
  std::optional<std::vector<double>> scales;
  if (!a[2].is_none()) scales = a[2].get<std::vector<double>>();
  return upsample_nearest2d(x, output_size_of(x, a.optional_int_list(1), scales), scales);
});
TN_KERNEL("aten::upsample_bilinear2d.vec", {
  const Tensor& x = a.tensor(0);
  std::optional<std::vector<double>> scales;
  if (!a[3].is_none()) scales = a[3].get<std::vector<double>>();
  return upsample_bilinear2d(x, output_size_of(x, a.optional_int_list(1), scales), a.boolean(2), scales);
});

}  // namespace tn
