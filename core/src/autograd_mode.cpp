#include "core/autograd_mode.h"

namespace tn {

namespace {
thread_local bool grad_enabled = true;
thread_local bool inference_enabled = false;
thread_local bool below_autograd = false;
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

bool InferenceMode::is_enabled() { return inference_enabled; }

InferenceMode::InferenceMode(bool enabled)
    : previous_inference_(inference_enabled), previous_grad_(grad_enabled) {
  inference_enabled = enabled;
  grad_enabled = !enabled;
}

bool BelowAutograd::is_active() { return below_autograd; }
BelowAutograd::BelowAutograd() : previous_(below_autograd) { below_autograd = true; }
BelowAutograd::~BelowAutograd() { below_autograd = previous_; }

InferenceMode::~InferenceMode() {
  inference_enabled = previous_inference_;
  grad_enabled = previous_grad_;
}

}  // namespace tn
