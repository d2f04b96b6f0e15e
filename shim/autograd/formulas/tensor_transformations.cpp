// Derivatives of the tiling operators (kernels/tensor_transformations.cpp).
#include "formulas.h"

namespace tn::autograd {

// repeat: the gradient viewed as (r0, s0, r1, s1, ...) summed over the tiles r_i (the input's
// sizes s_i padded with leading 1s to the number of repeats).
TN_DERIVATIVE("aten::repeat", "RepeatBackward0", SAVES(), {
  std::vector<int64_t> repeats = s.args().int_list(1);
  Shape sizes = s.input_sizes(0);
  sizes.insert(sizes.begin(), repeats.size() - sizes.size(), 1);
  std::vector<int64_t> interleaved, tiles;
  for (size_t i = 0; i < repeats.size(); ++i) {
    tiles.push_back(int64_t(interleaved.size()));
    interleaved.push_back(repeats[i]);
    interleaved.push_back(sizes[i]);
  }
  Tensor summed = ops::sum(ops::reshape(g[0], interleaved), tiles, false, std::nullopt);
  return {ops::reshape(summed, s.input_sizes(0))};
});

}  // namespace tn::autograd
