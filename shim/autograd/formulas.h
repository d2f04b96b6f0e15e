// How a derivative formula is written: what its node keeps of the forward call (Saved) and
// what it returns. Private to shim/autograd; the kernels never include it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd.h"
#include "typed_ops.h"

namespace tn::autograd {

// A tensor kept for the backward pass: an alias without history (no cycle through its own
// node), with the version it had when saved, so a later in-place write is caught.
struct SavedTensor {
  Tensor data;
  uint32_t version = 0;
  // A saved result names the node that made it; a saved input is named by the history it has
  // when the backward reads it (an in-place write since may have given it another), as upstream's.
  std::string producer;  // "output 0 of ReluBackward0"; "" for an input
  std::weak_ptr<TensorImpl> original;
};

// What a node keeps of its forward call: every non-tensor argument as called, the tensor
// arguments and results its formula declared, and the shape and dtype of every tensor argument.
class Saved {
 public:
  Saved() = default;
  Saved(const Stack& args, const std::vector<size_t>& saved_inputs, bool copy_self);
  void save_results(const Stack& results, const std::string& node_name);
  void release() {
    released_ = true;
    tensors_.clear();
    results_.clear();
  }

  // Non-tensor arguments, typed (a.integer(2), a.scalar(1) ...), by schema position.
  Args args() const { return Args(args_); }
  const Tensor& input(size_t i) const;       // a saved tensor argument, version-checked
  const Tensor& result(size_t i = 0) const;  // a saved result, version-checked
  const Shape& input_sizes(size_t i) const { return meta_.at(i).sizes; }
  ScalarType input_dtype(size_t i) const { return meta_.at(i).dtype; }
  bool input_defined(size_t i) const { return defined_.at(i); }
  // The shape and dtype of each tensor of a Tensor[] argument.
  const std::vector<GradientMeta>& input_list(size_t i) const { return list_meta_.at(i); }
  // Whether argument i needs a gradient (some edge of it leads somewhere).
  bool needs_grad(size_t i) const { return needs_.at(i); }
  void set_needs(std::vector<bool> needs) { needs_ = std::move(needs); }

 private:
  const Tensor& unpack(const std::optional<SavedTensor>& saved) const;
  mutable Stack args_;
  std::vector<std::optional<SavedTensor>> tensors_;  // by argument position
  std::vector<std::optional<SavedTensor>> results_;
  std::vector<GradientMeta> meta_;  // by argument position (tensor arguments only)
  std::vector<std::vector<GradientMeta>> list_meta_;
  std::vector<bool> defined_, needs_;
  bool released_ = false;
};

// The gradient of each output of the call (zeros where none flowed in).
using Grads = std::vector<Tensor>;
// Returns one entry per argument, in schema order: a Tensor, a list for a Tensor[] argument,
// or None where the argument gets no gradient. Trailing entries may be left out.
using Backward = std::function<Stack(const Saved& s, const Grads& grads)>;

// What a formula keeps of the call, and which tensor arguments have no derivative (upstream's
// non-differentiable arguments: no edge in next_functions).
struct Saves {
  std::vector<size_t> inputs;  // the tensor arguments the backward reads
  bool result = false;         // whether it reads the results
  std::vector<size_t> not_differentiable;
  // Where upstream refuses a call whose non-differentiable argument requires grad (its
  // check_no_requires_grad), the function its error names, from the call's arguments.
  std::function<std::string(const Stack&)> refusing_function;
  Saves without_derivative(std::vector<size_t> arguments) && {
    not_differentiable = std::move(arguments);
    return std::move(*this);
  }
  Saves refused_as(std::function<std::string(const Stack&)> function) && {
    refusing_function = std::move(function);
    return std::move(*this);
  }
  Saves refused_as(const char* function) && {
    return std::move(*this).refused_as([name = std::string(function)](const Stack&) { return name; });
  }
};

struct Formula {
  std::string node_name;  // upstream's class name: "MulBackward0"
  Saves saves;
  Backward backward;
};

const Formula* find_formula(const std::string& full_name);

struct FormulaRegistration {
  FormulaRegistration(const char* full_name, Formula formula);
};

// TN_DERIVATIVE("aten::mul.Tensor", "MulBackward0", SAVES(0, 1), { return {...}; })
// The body sees `s` (Saved) and `g` (Grads). SAVES(...) names saved arguments, SAVES_RESULT(...)
// also the results; .without_derivative({1}) marks arguments that get no edge.
#define SAVES(...)                                  \
  ::tn::autograd::Saves {                           \
    std::vector<size_t>{__VA_ARGS__}, false, {}, {} \
  }
#define SAVES_RESULT(...)                          \
  ::tn::autograd::Saves {                          \
    std::vector<size_t>{__VA_ARGS__}, true, {}, {} \
  }
#define TN_DERIVATIVE(OP, NODE, SAVED, ...)                                                 \
  static ::tn::autograd::FormulaRegistration TN_CONCAT(formula_registration_, __COUNTER__)( \
      OP, ::tn::autograd::Formula{                                                          \
              NODE, SAVED,                                                                  \
              []([[maybe_unused]] const ::tn::autograd::Saved& s,                           \
                 [[maybe_unused]] const ::tn::autograd::Grads& g) -> ::tn::Stack __VA_ARGS__})

// An operator upstream has no derivative for either: its node raises upstream's error when the
// backward pass reaches it (NAME as upstream's message spells it: "aten::floor_divide").
#define TN_NO_DERIVATIVE_UPSTREAM(OP, NAME) \
  TN_DERIVATIVE(OP, "NotImplemented", SAVES(), { throw Error("derivative for " NAME " is not implemented"); })

// ---- helpers the formulas share ----
// Sums a broadcast gradient back to `sizes`.
Tensor sum_to(const Tensor& grad, const Shape& sizes);
// grad * scalar, grad as a Tensor/Scalar pair for readability.
Tensor scaled(const Tensor& t, double factor);
IValue none();
// grad * f'(x) elementwise, computed in double and rounded once to grad's dtype: for the
// derivatives of activations, which upstream writes as one fused loop too.
Tensor pointwise_grad(const Tensor& grad, const Tensor& x, const std::function<double(double)>& derivative);
// A reduction's result (or gradient) over `dims` (all when none or empty) with the reduced
// dims put back as size 1, to broadcast against the input of `sizes`.
Tensor unsqueeze_reduced(const Tensor& grad, const Shape& sizes,
                         const std::optional<std::vector<int64_t>>& dims, bool keepdim);
// The gradient of values the forward selected along `dim` (max.dim, sort, topk, median.dim ...):
// each to the position its index names, zeros elsewhere (upstream's
// value_selecting_reduction_backward).
Tensor to_selected(const Tensor& grad, const Tensor& indices, int64_t dim, bool keepdim, const Shape& sizes);
// The gradient of a whole-tensor max, min or median: shared by the elements equal to it, or by
// the NaNs when it is NaN (upstream's evenly_distribute_backward).
Tensor evenly_distributed(const Tensor& grad, const Tensor& x, const Tensor& value);
// The gradient of a reduction over `dims` (all when none or empty) spread back over `sizes`.
Tensor expand_reduced(const Tensor& grad, const Shape& sizes, const std::optional<std::vector<int64_t>>& dims,
                      bool keepdim);

}  // namespace tn::autograd
