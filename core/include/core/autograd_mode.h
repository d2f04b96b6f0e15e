// A thread's autograd switches, as upstream's c10::GradMode and c10::InferenceMode: every
// thread starts recording gradients with inference mode off.
#pragma once

namespace tn {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Under inference mode every tensor made (not a view) is an inference tensor
// (TensorImpl::inference) and gradients are not recorded.
class InferenceMode {
 public:
  static bool is_enabled();
  // Switches inference mode to `enabled` and gradient recording to its opposite, as upstream's
  // guard does; the destructor restores both.
  explicit InferenceMode(bool enabled);
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool previous_inference_;
  bool previous_grad_;
};

}  // namespace tn
