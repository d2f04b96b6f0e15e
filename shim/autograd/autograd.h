// Reverse-mode automatic differentiation: the graph of backward nodes the door records and
// the engine that runs it (upstream's torch::autograd::Node, Edge and Engine, smaller).
// The door (ops/dispatcher.cpp) is the only caller of call_recorded; python/ reads nodes and
// runs the engine. Formulas live in formulas/, one file per kernel family.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops.h"

namespace tn::autograd {

struct Node;

// Where a gradient goes: the input slot `input_nr` of `function` (a tensor's output number on
// its grad_fn). An edge without a function leads nowhere (the input needs no gradient).
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
};

// The shape and dtype the gradient along an edge must have: the engine sums a broadcast
// gradient back to it and casts to it, as upstream's validate_outputs does.
struct GradientMeta {
  Shape sizes;
  ScalarType dtype = ScalarType::Float;
};

struct Node {
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  // One gradient per output of the forward call (undefined where none flowed in); returns one
  // per next edge (undefined for none).
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads) = 0;
  // Frees what the forward call saved (a backward without retain_graph).
  virtual void release_saved() {}

  std::vector<Edge> next_edges;
  std::vector<GradientMeta> next_meta;  // one per next edge
  uint64_t sequence_nr = 0;             // creation order: the engine runs later nodes first
  void* python_object = nullptr;        // the live grad_fn object (python/), so identity holds
};

// The sink of a leaf that requires grad: adds what reaches it into the leaf's .grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::string name() const override { return "torch::autograd::AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  std::shared_ptr<TensorImpl> variable;
};

uint64_t next_sequence_nr();

// Whether a leaf has tensor hooks (Tensor.register_hook keeps them on the Python object), set
// by python/: the sink refuses to accumulate past hooks it cannot run.
using LeafHooksPresent = bool (*)(const TensorImpl& leaf);
void set_leaf_hooks_check(LeafHooksPresent check);

// ---- tensors ----
bool requires_grad(const Tensor& t);
const std::shared_ptr<Node>& grad_fn(const Tensor& t);  // null for a leaf
uint32_t output_nr(const Tensor& t);
// (grad_fn, output number) of a computed tensor, the AccumulateGrad of a leaf that requires
// grad (made on first use, then shared), an empty edge otherwise.
Edge gradient_edge(const Tensor& t);
// The leaf's .grad (undefined when none) and its setter; set_grad(t, Tensor()) clears it.
Tensor grad(const Tensor& t);
void set_grad(const Tensor& t, const Tensor& grad);
// t becomes the output `output_nr` of `node` (requires grad from now on).
void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t output_nr);
// requires_grad_(false) and detach_(): t becomes a leaf that does not require grad.
void clear_history(const Tensor& t);

// ---- the door ----
// Whether a call must be recorded: grad mode on, not already inside a recorded call, and
// some tensor argument requires grad.
bool should_record(const Stack& stack);
// Runs `run` (the door's own steps) below autograd and records the call's node from the
// operator's formula; refuses by name what cannot be differentiated yet.
void call_recorded(const Operator& op, Stack& stack, const std::function<void(Stack&)>& run);

// ---- the engine ----
// torch._C._ImperativeEngine.run_backward: gradients of `roots` (seeded with `root_grads`)
// flow back through their graphs. With accumulate_grad they are added into the .grad of the
// leaves (of `inputs` alone when given) and nothing is returned; without, the gradients of
// `inputs` are returned (undefined for an unused input when allow_unused).
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                                 bool keep_graph, const std::vector<Tensor>& inputs, bool allow_unused,
                                 bool accumulate_grad);

}  // namespace tn::autograd
