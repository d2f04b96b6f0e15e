// pixel_shuffle and pixel_unshuffle: a reshape, a permutation and a copy into a new
// contiguous tensor, as upstream's pixel_shuffle_cpu (whose result is never a view).
#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

void check_shuffle_input(const Tensor& self, int64_t factor, const char* name, const char* factor_name) {
  if (self.dim() < 3)
    throw Error(std::string(name) + " expects input to have at least 3 dimensions, but got input with " +
                std::to_string(self.dim()) + " dimension(s)");
  if (factor <= 0)
    throw Error(std::string(name) + " expects a positive " + factor_name + ", but got " +
                std::to_string(factor));
}

// The leading (batch) sizes, then `tail`.
Shape batch_then(const Tensor& self, std::initializer_list<int64_t> tail) {
  Shape shape(self.sizes().begin(), self.sizes().end() - 3);
  shape.insert(shape.end(), tail);
  return shape;
}

// The permutation of a tensor with `batch` leading dims and 5 more: `order` over the last 5.
std::vector<int64_t> batch_then_order(size_t batch, std::initializer_list<int64_t> order) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < batch; ++i) dims.push_back(int64_t(i));
  for (int64_t d : order) dims.push_back(int64_t(batch) + d);
  return dims;
}

}  // namespace

// (*, C r r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r) -> (*, C, H r, W r).
TN_KERNEL("aten::pixel_shuffle", {
  const Tensor& self = a.tensor(0);
  int64_t r = a.integer(1);
  check_shuffle_input(self, r, "pixel_shuffle", "upscale_factor");
  int64_t c = self.size(-3), h = self.size(-2), w = self.size(-1);
  if (c % (r * r) != 0)
    throw Error(
        "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
        "upscale_factor, but input.size(-3)=" +
        std::to_string(c) + " is not divisible by " + std::to_string(r * r));
  Tensor split = ops::reshape(self, batch_then(self, {c / (r * r), r, r, h, w}));
  Tensor moved = ops::permute(split, batch_then_order(size_t(self.dim() - 3), {0, 3, 1, 4, 2}));
  return ops::reshape(moved.contiguous(), batch_then(self, {c / (r * r), h * r, w * r}));
});
// (*, C, H r, W r) -> (*, C, H, r, W, r) -> (*, C, r, r, H, W) -> (*, C r r, H, W).
TN_KERNEL("aten::pixel_unshuffle", {
  const Tensor& self = a.tensor(0);
  int64_t r = a.integer(1);
  check_shuffle_input(self, r, "pixel_unshuffle", "downscale_factor");
  int64_t c = self.size(-3), h = self.size(-2), w = self.size(-1);
  for (auto [size, axis] : {std::pair{h, "height"}, std::pair{w, "width"}})
    if (size % r != 0)
      throw Error(std::string("pixel_unshuffle expects ") + axis +
                  " to be divisible by downscale_factor, but input.size(" + (axis[0] == 'h' ? "-2" : "-1") +
                  ")=" + std::to_string(size) + " is not divisible by " + std::to_string(r));
  // Upstream's pixel_unshuffle_cpu returns an empty input's copy, its shape unchanged.
  if (self.numel() == 0) return self.clone();
  Tensor split = ops::reshape(self, batch_then(self, {c, h / r, r, w / r, r}));
  Tensor moved = ops::permute(split, batch_then_order(size_t(self.dim() - 3), {0, 2, 4, 1, 3}));
  return ops::reshape(moved.contiguous(), batch_then(self, {c * r * r, h / r, w / r}));
});

}  // namespace tn
