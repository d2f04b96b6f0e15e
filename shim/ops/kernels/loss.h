// What nll_loss's derivative shares with its kernel (kernels/loss.cpp).
#pragma once

#include <optional>

#include "ops.h"

namespace tn {

// nll_loss's gradient of `input` as upstream's nll_loss_backward (1-d and 2-d inputs) and
// nll_loss2d_backward (the rest) compute it: -w[t] g at each sample's target class, or for a
// reduced loss w[t] times -(g / total weight) (-g for a sum), in the input's dtype, the total
// weight summed as the forward sums it.
Tensor nll_loss_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index);

}  // namespace tn
