// Derivatives of the fused transformer kernels (kernels/transformers.cpp): upstream has none
// (it takes these paths in inference only, but does not refuse inputs that require grad).
#include "formulas.h"

namespace tn::autograd {

TN_NO_DERIVATIVE_UPSTREAM("aten::_native_multi_head_attention", "aten::_native_multi_head_attention");
TN_NO_DERIVATIVE_UPSTREAM("aten::_transformer_encoder_layer_fwd", "aten::_transformer_encoder_layer_fwd");

}  // namespace tn::autograd
