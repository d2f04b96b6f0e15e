// Derivatives of pixel_shuffle and pixel_unshuffle (kernels/pixel_shuffle.cpp): each is the
// other's inverse permutation of elements, so each one's gradient is the other applied to it.
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::pixel_shuffle", "PixelShuffleBackward0", SAVES(),
              { return {ops::pixel_unshuffle(g[0], s.args().integer(1))}; });
TN_DERIVATIVE("aten::pixel_unshuffle", "PixelUnshuffleBackward0", SAVES(),
              { return {ops::pixel_shuffle(g[0], s.args().integer(1))}; });

}  // namespace tn::autograd
