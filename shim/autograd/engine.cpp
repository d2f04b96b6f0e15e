// The backward pass: dependency counting over the graph reachable from the roots, then the
// nodes in an order where each runs once every gradient it receives has been summed.
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "core/autograd_mode.h"
#include "formulas.h"

namespace tn::autograd {

namespace {

// Upstream's validate_outputs: a gradient takes the shape (summing a broadcast one back)
// and the dtype of the input it flows to.
Tensor validated(const Tensor& grad, const GradientMeta& meta, const Node& producer, size_t index) {
  if (!grad.defined()) return grad;
  Tensor g = grad;
  if (g.sizes() != meta.sizes) {
    try {
      broadcast_shapes(meta.sizes, g.sizes());
    } catch (const Error&) {
      throw Error("Function " + producer.name() + " returned an invalid gradient at index " +
                  std::to_string(index) + " - got " + shape_str(g.sizes()) +
                  " but expected shape compatible with " + shape_str(meta.sizes));
    }
    g = sum_to(g, meta.sizes);
  }
  if (g.dtype() != meta.dtype) g = ops::_to_copy(g, meta.dtype);
  return g;
}

struct GraphTask {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::set<Node*> needed;  // nodes from which a wanted gradient can be reached
  // input slot -> indices into captured (an input may be asked for twice: [a, a], or a and the
  // result of an in-place call on it, which is the same tensor)
  std::map<std::pair<Node*, uint32_t>, std::vector<size_t>> captures;
  std::vector<Tensor> captured;
  bool keep_graph = false;
};

void accumulate(std::vector<Tensor>& buffer, size_t slot, const Tensor& grad) {
  if (buffer.size() <= slot) buffer.resize(slot + 1);
  buffer[slot] = buffer[slot].defined() ? ops::add(buffer[slot], grad) : grad;
}

// Counts, for each node reachable from the roots, the edges that lead into it, and marks the
// nodes that must run: the sinks that accumulate (every AccumulateGrad when `targets` is
// empty) and every node with an edge towards one of them or towards a captured input.
void prepare(GraphTask& task, const std::vector<Edge>& roots, const std::set<Node*>& targets,
             bool accumulate) {
  std::vector<Node*> order;  // post-order, so a node's successors are decided first
  std::set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const Edge& e : roots)
    if (e.function && seen.insert(e.function.get()).second) stack.emplace_back(e.function.get(), 0);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->next_edges.size()) {
      Node* child = node->next_edges[next++].function.get();
      if (!child) continue;
      ++task.dependencies[child];
      if (seen.insert(child).second) stack.emplace_back(child, 0);
      continue;
    }
    order.push_back(node);
    stack.pop_back();
  }
  std::set<Node*> leads;  // nodes that run or whose input is captured
  for (Node* node : order) {
    bool is_sink = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    bool is_target = targets.empty() ? is_sink : targets.count(node) > 0;
    bool runs = accumulate && is_target && is_sink;
    for (const Edge& e : node->next_edges) runs |= e.function && leads.count(e.function.get());
    if (runs) task.needed.insert(node);
    if (runs || is_target) leads.insert(node);
  }
}

// A node reached by meta gradients computes under a MetaAllocation, as a meta call does: its
// temporaries are meta tensors, and a formula that reaches an element (one with a loop of its
// own, or a cpu factory filled in it) is refused by the node's name rather than read.
std::vector<Tensor> apply_on_meta(Node* node, std::vector<Tensor> inputs) {
  MetaAllocation allocation;
  try {
    return node->apply(std::move(inputs));
  } catch (const MetaDataAccess&) {
    throw MetaDataAccess("torchnative has no meta (shape-only) implementation of " + node->name() +
                         " (a backward) yet");
  }
}

std::vector<Tensor> apply(Node* node, std::vector<Tensor> inputs) {
  bool meta =
      std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.is_meta(); });
  return meta ? apply_on_meta(node, std::move(inputs)) : node->apply(std::move(inputs));
}

// Runs `node` on its summed input and hands each result to the node its edge names.
void run_node(GraphTask& task, Node* node, std::priority_queue<std::pair<uint64_t, Node*>>& ready) {
  std::vector<Tensor> inputs = std::move(task.buffers[node]);
  task.buffers.erase(node);
  for (uint32_t slot = 0; slot < inputs.size(); ++slot)
    if (auto it = task.captures.find({node, slot}); it != task.captures.end())
      for (size_t index : it->second) task.captured[index] = inputs[slot];
  std::vector<Tensor> outputs;
  if (task.needed.count(node)) {
    outputs = apply(node, std::move(inputs));
    if (!task.keep_graph) node->release_saved();
  }
  for (size_t i = 0; i < node->next_edges.size(); ++i) {
    const Edge& e = node->next_edges[i];
    if (!e.function) continue;
    Node* child = e.function.get();
    if (i < outputs.size() && outputs[i].defined())
      accumulate(task.buffers[child], e.input_nr, validated(outputs[i], node->next_meta[i], *node, i));
    if (--task.dependencies[child] == 0) ready.emplace(child->sequence_nr, child);
  }
}

}  // namespace

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                                 bool keep_graph, const std::vector<Tensor>& inputs, bool allow_unused,
                                 bool accumulate_grad) {
  GradMode::Scope no_grad(false);  // create_graph is refused: the backward records nothing
  GraphTask task;
  task.keep_graph = keep_graph;
  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradient_edge(roots[i]);
    if (!e.function)
      throw Error("element " + std::to_string(i) +
                  " of tensors does not require grad and does not have a grad_fn");
    root_edges.push_back(e);
  }
  std::set<Node*> targets;
  std::vector<Edge> input_edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    if (!e.function) throw Error("One of the differentiated Tensors does not require grad");
    input_edges.push_back(e);
    targets.insert(e.function.get());
    if (!accumulate_grad) task.captures[{e.function.get(), e.input_nr}].push_back(i);
  }
  task.captured.resize(inputs.size());
  prepare(task, root_edges, targets, accumulate_grad);
  // The roots' gradients enter their nodes' buffers as if from one more edge each.
  std::priority_queue<std::pair<uint64_t, Node*>> ready;
  for (size_t i = 0; i < root_edges.size(); ++i) {
    // torch.autograd checked the shapes (_make_grads); the dtype is the root's.
    Tensor g = root_grads[i];
    if (g.dtype() != roots[i].dtype()) g = ops::_to_copy(g, roots[i].dtype());
    accumulate(task.buffers[root_edges[i].function.get()], root_edges[i].input_nr, g);
  }
  for (const Edge& e : root_edges)
    if (task.dependencies[e.function.get()] == 0) ready.emplace(e.function->sequence_nr, e.function.get());
  std::set<Node*> done;
  while (!ready.empty()) {
    Node* node = ready.top().second;
    ready.pop();
    if (!done.insert(node).second) continue;
    run_node(task, node, ready);
  }
  if (accumulate_grad) return {};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!task.captured[i].defined() && !allow_unused)
      throw Error(
          "One of the differentiated Tensors appears to not have been used in the graph. Set "
          "allow_unused=True "
          "if this is the desired behavior.");
  return task.captured;
}

}  // namespace tn::autograd
