#include "core/autograd_mode.h"

namespace tn {

namespace {
thread_local bool grad_enabled = true;
thread_local bool inference_enabled = false;
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

bool InferenceMode::is_enabled() { return inference_enabled; }

InferenceMode::InferenceMode(bool enabled)
    : previous_inference_(inference_enabled), previous_grad_(grad_enabled) {
  inference_enabled = enabled;
  grad_enabled = !enabled;
}

InferenceMode::~InferenceMode() {
  inference_enabled = previous_inference_;
  grad_enabled = previous_grad_;
}

}  // namespace tn
