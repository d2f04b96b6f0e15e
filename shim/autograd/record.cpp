// The door's autograd step: one node per outermost call whose inputs require grad, from the
// operator's formula; the calls the kernel makes below it record nothing.
#include <algorithm>
#include <set>
#include <sstream>

#include "core/autograd_mode.h"
#include "formulas.h"

namespace tn::autograd {

namespace {

std::set<std::string> words(const char* text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.insert(word);
  return out;
}

// Operators whose results never require grad, whatever their inputs (upstream's
// output_differentiability [False], and the *_like factories that read only a shape).
const std::set<std::string> kNotDifferentiable = words(
    "detach detach_ zeros_like ones_like empty_like full_like rand_like randn_like randint_like new_zeros "
    "new_ones new_empty new_full new_empty_strided bernoulli argmax argmin view.dtype _local_scalar_dense "
    "isnan isinf isfinite isposinf isneginf signbit any all searchsorted bucketize nonzero eq ne lt le gt ge "
    "logical_not logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not equal "
    "is_nonzero allclose isclose is_same_size result_type _has_same_storage_numel argsort randperm "
    "multinomial "
    "histc count_nonzero unique_consecutive _unique one_hot");
// (An overload with a formula of its own is differentiated even so: eq_ writes zeros' history
// into a floating self, as upstream's EqBackward0.)

// Composite operators whose kernels reach their parts only through the door: the parts
// record their own nodes. The graph is upstream's for cross_entropy (LogSoftmaxBackward0 then
// NllLossBackward0), relu6 (HardtanhBackward0), dropout (MulBackward0), kl_div (its xlogy, mul,
// sub and reduction), the stacks (CatBackward0), take_along_dim (GatherBackward0), msort
// (SortBackward0), max_pool3d (MaxPool3DWithIndicesBackward0), adaptive_avg_pool3d (MeanBackward1
// for a (1, 1, 1) output, else AdaptiveAvgPool3DBackward0) and upstream's other
// CompositeImplicitAutograd operators listed; the norms' are
// their parts' (mean, var, sub, div ...) where upstream has one Native*NormBackward0 node.
const std::set<std::string> kDecomposed = words(
    "batch_norm cross_entropy_loss relu6 dropout feature_dropout alpha_dropout feature_alpha_dropout "
    "embedding_bag layer_norm group_norm instance_norm kl_div column_stack hstack "
    "vstack dstack pairwise_distance inner kron tensordot msort take_along_dim "
    "linalg_matrix_power linalg_norm linalg_matrix_norm meshgrid tensor_split repeat_interleave "
    "combinations einsum cosine_similarity logdet diagflat atleast_1d.Sequence atleast_2d.Sequence "
    "atleast_3d.Sequence max_pool2d max_pool3d adaptive_avg_pool3d");

// out= overloads upstream computes as composites of other out= calls, without refusing inputs
// that require grad (the out tensor gets no history either way).
const std::set<std::string> kOutUnchecked = words("nanmean");

// In-place forms upstream refuses when self requires grad (NotImplementedError at the call).
const std::set<std::string> kInPlaceWithoutDerivative = words("acosh_ asinh_ atanh_");

bool is_not_differentiable(const Operator& op) {
  return kNotDifferentiable.count(op.schema.name) || kNotDifferentiable.count(op.family()) ||
         kNotDifferentiable.count(op.schema.name + "." + op.schema.overload);
}

template <typename F>
void for_each_tensor(const IValue& v, F&& f) {
  if (v.is<Tensor>()) f(v.get<Tensor>());
  if (v.is<std::vector<Tensor>>())
    for (const Tensor& t : v.get<std::vector<Tensor>>()) f(t);
  if (v.is<std::vector<std::optional<Tensor>>>())
    for (const auto& t : v.get<std::vector<std::optional<Tensor>>>()) f(t ? *t : Tensor());
}

// A call's node: the operator's formula over what the call saved.
struct FormulaNode final : Node {
  explicit FormulaNode(const Formula& f) : formula(f) {}
  std::string name() const override { return formula.node_name; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override;
  void release_saved() override { saved.release(); }

  const Formula& formula;
  Saved saved;
  std::vector<GradientMeta> output_meta;  // to give outputs no gradient reached a zero one
  std::vector<size_t> first_edge_of;      // argument position -> its first edge (one past the end: none)
};

std::vector<Tensor> FormulaNode::apply(std::vector<Tensor> grads) {
  grads.resize(std::max(grads.size(), output_meta.size()));
  for (size_t i = 0; i < output_meta.size(); ++i)
    if (!grads[i].defined() && is_floating(output_meta[i].dtype))
      grads[i] = ops::zeros(output_meta[i].sizes, output_meta[i].dtype);
  Stack by_argument = formula.backward(saved, grads);
  std::vector<Tensor> out(next_edges.size());
  for (size_t i = 0; i < by_argument.size() && i + 1 < first_edge_of.size(); ++i) {
    size_t edge = first_edge_of[i];
    if (edge == first_edge_of[i + 1]) continue;  // not differentiable: no edge
    if (by_argument[i].is<Tensor>()) out.at(edge) = by_argument[i].get<Tensor>();
    if (by_argument[i].is<std::vector<Tensor>>())
      for (const Tensor& t : by_argument[i].get<std::vector<Tensor>>()) out.at(edge++) = t;
  }
  return out;
}

// Gradients cannot flow through an operator we have no formula for: refused by name when
// the backward pass reaches it (as upstream's NotImplemented node), so a forward over
// parameters that require grad still computes.
struct NoDerivativeNode final : Node {
  explicit NoDerivativeNode(std::string op) : op_name(std::move(op)) {}
  std::string name() const override { return "NotImplemented"; }
  std::vector<Tensor> apply(std::vector<Tensor>) override {
    throw NotImplemented("torchnative has no derivative for " + op_name + " yet");
  }
  std::string op_name;
};

// The edges of a call's differentiable tensor arguments, in schema order (a list gives one
// per element, None an empty one), where each argument's first edge is, and which need a
// gradient.
void collect_edges(const Operator& op, const Stack& stack, const std::vector<size_t>& not_differentiable,
                   Node& node, std::vector<size_t>* first_edge_of, std::vector<bool>* needs) {
  for (size_t i = 0; i < stack.size(); ++i) {
    first_edge_of->push_back(node.next_edges.size());
    bool differentiable =
        i < op.schema.arguments.size() && op.schema.arguments[i].type.kind == SchemaType::Kind::Tensor &&
        std::find(not_differentiable.begin(), not_differentiable.end(), i) == not_differentiable.end();
    bool needed = false;
    if (differentiable && stack[i].is_none()) {
      node.next_edges.emplace_back();
      node.next_meta.emplace_back();
    } else if (differentiable) {
      for_each_tensor(stack[i], [&](const Tensor& t) {
        node.next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
        node.next_meta.push_back(t.defined() ? GradientMeta{t.sizes(), t.dtype()} : GradientMeta{});
        needed |= node.next_edges.back().function != nullptr;
      });
    }
    needs->push_back(needed);
  }
  first_edge_of->push_back(node.next_edges.size());
}

void refuse_grad_where_upstream_does(const Operator& op, const Stack& stack, const Saves& saves) {
  if (!saves.refusing_function) return;
  for (size_t i : saves.not_differentiable)
    if (i < stack.size() && stack[i].is<Tensor>() && stack[i].get<Tensor>().defined() &&
        requires_grad(stack[i].get<Tensor>()))
      throw Error("The function '" + saves.refusing_function(stack) +
                  "' is not differentiable with respect to argument '" + op.schema.arguments.at(i).name +
                  "'. This input cannot have requires_grad True.");
}

const Formula* formula_for(const Operator& op) {
  if (const Formula* f = find_formula(op.schema.full_name())) return f;
  if (op.is_inplace() && op.functional) return find_formula(op.functional->schema.full_name());
  return nullptr;
}

// The node of a call, its edges taken before the call runs (an in-place call moves self's
// history); a formula's node keeps what the formula reads (self copied first when it is
// overwritten).
std::shared_ptr<Node> make_node(const Operator& op, const Stack& stack, bool inplace) {
  std::vector<bool> needs;
  std::shared_ptr<Node> node;
  if (const Formula* formula = formula_for(op)) {
    refuse_grad_where_upstream_does(op, stack, formula->saves);
    auto made = std::make_shared<FormulaNode>(*formula);
    collect_edges(op, stack, formula->saves.not_differentiable, *made, &made->first_edge_of, &needs);
    made->saved = Saved(stack, formula->saves.inputs, inplace);
    made->saved.set_needs(std::move(needs));
    node = made;
  } else {
    node = std::make_shared<NoDerivativeNode>(op.schema.full_name());
    std::vector<size_t> first_edge_of;
    collect_edges(op, stack, {}, *node, &first_edge_of, &needs);
  }
  node->sequence_nr = next_sequence_nr();
  return node;
}

void run_below(const std::function<void(Stack&)>& run, Stack& stack) {
  BelowAutograd below;
  run(stack);
}

bool is_returned_argument(const Tensor& t, const Stack& args) {
  return std::any_of(args.begin(), args.end(),
                     [&](const IValue& a) { return a.is<Tensor>() && a.get<Tensor>().same(t); });
}

// The results join the graph as the node's outputs, numbered flat (a Tensor[] result gives
// one output per element, as upstream's). Results that are not floating point, and a result
// that is an argument itself (contiguous of a contiguous tensor, to its own dtype), do not;
// an in-place call's self does.
void set_output_histories(const std::shared_ptr<Node>& node, const Stack& results, const Stack& args,
                          bool inplace) {
  bool any_output = false;
  std::vector<GradientMeta> output_meta;
  for (size_t r = 0; r < results.size(); ++r)
    for_each_tensor(results[r], [&](const Tensor& out) {
      auto number = uint32_t(output_meta.size());
      output_meta.push_back(out.defined() ? GradientMeta{out.sizes(), out.dtype()}
                                          : GradientMeta{{}, ScalarType::Undefined});
      if (!out.defined() || !is_floating(out.dtype())) return;
      if (!(inplace && r == 0) && is_returned_argument(out, args)) return;
      set_history(out, node, number);
      any_output = true;
    });
  auto* formula_node = dynamic_cast<FormulaNode*>(node.get());
  if (!formula_node) return;
  formula_node->output_meta = std::move(output_meta);
  if (formula_node->formula.saves.result && any_output)
    formula_node->saved.save_results(results, formula_node->formula.node_name);
}

// ---- in-place writes through views ----

bool is_view(const Tensor& t) { return t.impl()->view_base != nullptr; }

// Tensors over a fresh zeroed buffer laid out as `base`'s storage, one with base's geometry
// and one with the view's: the view's part of a gradient of the base.
struct Layout {
  Tensor base, view;
};
Layout layout_like(const Tensor& base, const Tensor& view, ScalarType dtype) {
  int64_t extent = int64_t(base.storage()->nbytes() / base.itemsize());
  Tensor buffer = ops::zeros({extent}, dtype);
  return {buffer.view_as_strided(base.sizes(), base.strides(), base.offset()),
          buffer.view_as_strided(view.sizes(), view.strides(), view.offset())};
}

// The base's history after a write through one of its views (upstream's CopySlices): the
// base's gradient passes unchanged outside the view; inside, the write's own node turns the
// view's part into the gradient of the values the view held before, and of the write's other
// inputs.
struct CopySlices final : Node {
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> write)
      : base_meta(base.view_as_strided(base.sizes(), base.strides(), base.offset())),
        view_meta(view.view_as_strided(view.sizes(), view.strides(), view.offset())),
        write(std::move(write)) {}
  std::string name() const override { return "torch::autograd::CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    Layout g = layout_like(base_meta, view_meta, grads.at(0).dtype());
    g.base.copy_from(grads.at(0));
    std::vector<Tensor> inner = write->apply({g.view.clone()});
    if (inner.at(0).defined())
      g.view.copy_from(inner[0]);
    else
      g.view.copy_from(ops::zeros_like(g.view));
    inner[0] = g.base.clone();
    return inner;
  }
  void release_saved() override { write->release_saved(); }
  Tensor base_meta, view_meta;  // geometry only: aliases without history
  std::shared_ptr<Node> write;
};

// The view's history after the write: its part of the base's new values.
struct ViewOfBase final : Node {
  ViewOfBase(const Tensor& base, const Tensor& view)
      : base_meta(base.view_as_strided(base.sizes(), base.strides(), base.offset())),
        view_meta(view.view_as_strided(view.sizes(), view.strides(), view.offset())) {}
  std::string name() const override { return "AsStridedBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    Layout g = layout_like(base_meta, view_meta, grads.at(0).dtype());
    g.view.copy_from(grads.at(0));
    return {g.base.clone()};
  }
  Tensor base_meta, view_meta;
};

// An in-place call on a view whose base has a history (or whose other inputs require grad):
// the write's node is made as for a tensor, then wrapped so the base's history continues
// through it and the view becomes a view of the new base.
void record_write_through_view(const Operator& op, Stack& stack, const std::function<void(Stack&)>& run) {
  Tensor view = stack.at(0).get<Tensor>();
  Tensor base(view.impl()->view_base);
  if (requires_grad(base) && !grad_fn(base))
    throw Error("a view of a leaf Variable that requires grad is being used in an in-place operation.");
  std::shared_ptr<Node> write = make_node(op, stack, true);
  if (auto* formula_node = dynamic_cast<FormulaNode*>(write.get())) {
    std::vector<bool> needs(formula_node->first_edge_of.size() - 1, false);
    for (size_t i = 0; i + 1 < formula_node->first_edge_of.size(); ++i)
      needs[i] = i == 0 || formula_node->first_edge_of[i] != formula_node->first_edge_of[i + 1];
    formula_node->saved.set_needs(std::move(needs));  // the view's old values always need theirs
  }
  auto copy_slices = std::make_shared<CopySlices>(base, view, write);
  copy_slices->next_edges = write->next_edges;
  copy_slices->next_meta = write->next_meta;
  copy_slices->next_edges.at(0) = gradient_edge(base);
  copy_slices->next_meta.at(0) = GradientMeta{base.sizes(), base.dtype()};
  copy_slices->sequence_nr = write->sequence_nr;
  run_below(run, stack);
  set_history(base, copy_slices, 0);
  set_output_histories(write, stack, Stack{}, true);  // for the formula's saved results
  auto view_node = std::make_shared<ViewOfBase>(base, view);
  view_node->next_edges = {Edge{copy_slices, 0}};
  view_node->next_meta = {GradientMeta{base.sizes(), base.dtype()}};
  view_node->sequence_nr = next_sequence_nr();
  set_history(view, view_node, 0);
}

}  // namespace

bool should_record(const Stack& stack) {
  if (!GradMode::is_enabled() || BelowAutograd::is_active()) return false;
  bool any = false;
  for (const IValue& v : stack)
    for_each_tensor(v, [&](const Tensor& t) { any |= t.defined() && requires_grad(t); });
  return any;
}

void call_recorded(const Operator& op, Stack& stack, const std::function<void(Stack&)>& run) {
  if (kDecomposed.count(op.schema.name) || kDecomposed.count(op.schema.name + "." + op.schema.overload)) {
    run(stack);
    return;
  }
  if (is_not_differentiable(op) && !find_formula(op.schema.full_name())) {
    run_below(run, stack);
    return;
  }
  if (op.schema.out_count() > 0 && kOutUnchecked.count(op.schema.name)) {
    run_below(run, stack);
    return;
  }
  if (op.schema.out_count() > 0) {
    // Upstream refuses out= where the function has a derivative; where we have none we
    // cannot tell, and refuse by name.
    if (op.functional && formula_for(*op.functional))
      throw Error(
          op.schema.name +
          "(): functions with out=... arguments don't support automatic differentiation, but one of the "
          "arguments requires grad.");
    throw NotImplemented("torchnative has no derivative for " + op.schema.full_name() + " yet");
  }
  bool inplace = op.is_inplace();
  // Upstream's in-place foreach operators (the optimizers' steps) record nothing: the lists'
  // tensors keep their histories, and a leaf that requires grad may be written.
  if (inplace && op.schema.name.rfind("_foreach_", 0) == 0) {
    run_below(run, stack);
    return;
  }
  // dropout_ and kin: the decomposed functional result, then copied in, each recorded.
  if (inplace && op.functional && kDecomposed.count(op.functional->schema.name)) {
    Tensor self = stack.at(0).get<Tensor>();
    Dispatcher::instance().call(*op.functional, stack);
    ops::copy_(self, stack.at(0).get<Tensor>(), false);
    stack.assign(1, IValue(self));
    return;
  }
  if (inplace && kInPlaceWithoutDerivative.count(op.schema.name))
    throw NotImplemented("the derivative for 'inplace version of " + op.functional->schema.name +
                         "' is not implemented.");
  if (inplace) {
    const Tensor& self = stack.at(0).get<Tensor>();
    if (is_view(self)) return record_write_through_view(op, stack, run);
    if (requires_grad(self) && !grad_fn(self))
      throw Error("a leaf Variable that requires grad is being used in an in-place operation.");
  }
  std::shared_ptr<Node> node = make_node(op, stack, inplace);
  Stack args = inplace ? Stack{} : stack;  // to tell results that are arguments themselves
  run_below(run, stack);
  set_output_histories(node, stack, args, inplace);
}

}  // namespace tn::autograd
