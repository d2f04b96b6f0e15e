// Derivatives of the tiling, flipping and triangle operators (kernels/tensor_transformations.cpp).
#include <algorithm>

#include "formulas.h"

namespace tn::autograd {

namespace {
// repeat: the gradient viewed as (r0, s0, r1, s1, ...) summed over the tiles r_i (the input's
// sizes s_i padded with leading 1s to the number of repeats).
Tensor repeat_grad(const Tensor& g, const Shape& input_sizes, const std::vector<int64_t>& repeats) {
  Shape sizes = input_sizes;
  sizes.insert(sizes.begin(), repeats.size() - sizes.size(), 1);
  std::vector<int64_t> interleaved, tiles;
  for (size_t i = 0; i < repeats.size(); ++i) {
    tiles.push_back(int64_t(interleaved.size()));
    interleaved.push_back(repeats[i]);
    interleaved.push_back(sizes[i]);
  }
  Tensor summed = ops::sum(ops::reshape(g, interleaved), tiles, false, std::nullopt);
  return ops::reshape(summed, input_sizes);
}
}  // namespace

TN_DERIVATIVE("aten::repeat", "RepeatBackward0", SAVES(),
              { return {repeat_grad(g[0], s.input_sizes(0), s.args().int_list(1))}; });
// tile is repeat with the repeats padded with leading 1s to the input's dims.
TN_DERIVATIVE("aten::tile", "RepeatBackward0", SAVES(), {
  std::vector<int64_t> repeats = s.args().int_list(1);
  repeats.insert(repeats.begin(), std::max<int64_t>(0, int64_t(s.input_sizes(0).size() - repeats.size())), 1);
  return {repeat_grad(g[0], s.input_sizes(0), repeats)};
});
TN_DERIVATIVE("aten::flip", "FlipBackward0", SAVES(), { return {ops::flip(g[0], s.args().int_list(1))}; });
TN_DERIVATIVE("aten::flipud", "FlipBackward0", SAVES(), { return {ops::flip(g[0], {0})}; });
TN_DERIVATIVE("aten::fliplr", "FlipBackward0", SAVES(), { return {ops::flip(g[0], {1})}; });
TN_DERIVATIVE("aten::roll", "RollBackward0", SAVES(), {
  std::vector<int64_t> back = s.args().int_list(1);
  for (int64_t& shift : back) shift = -shift;
  return {ops::roll(g[0], back, s.args().int_list(2))};
});
TN_DERIVATIVE("aten::tril", "TrilBackward0", SAVES(), { return {ops::tril(g[0], s.args().integer(1))}; });
TN_DERIVATIVE("aten::triu", "TriuBackward0", SAVES(), { return {ops::triu(g[0], s.args().integer(1))}; });
TN_DERIVATIVE("aten::rot90", "Rot90Backward0", SAVES(),
              { return {ops::rot90(g[0], -s.args().integer(1), s.args().int_list(2))}; });

}  // namespace tn::autograd
