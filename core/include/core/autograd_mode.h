// A thread's autograd switches, as upstream's c10::GradMode and c10::InferenceMode: every
// thread starts recording gradients with inference mode off.
#pragma once

namespace tn {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
  // Sets grad mode for a scope (the backward pass runs with it off).
  class Scope {
   public:
    explicit Scope(bool enabled) : previous_(is_enabled()) { set_enabled(enabled); }
    ~Scope() { set_enabled(previous_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool previous_;
  };
};

// Set while the door runs a recorded call's kernel: the operators that kernel calls in turn
// record nothing (autograd is taken at the outermost call only).
class BelowAutograd {
 public:
  static bool is_active();
  BelowAutograd();
  ~BelowAutograd();
  BelowAutograd(const BelowAutograd&) = delete;
  BelowAutograd& operator=(const BelowAutograd&) = delete;

 private:
  bool previous_;
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
