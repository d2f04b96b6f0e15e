// A tensor's place in the graph (its AutogradMeta in core/) and the leaves' sink.
#include <atomic>

#include "core/autograd_mode.h"
#include "core/overlap.h"
#include "formulas.h"

namespace tn::autograd {

namespace {
AutogradMeta& meta_of(const Tensor& t) {
  auto& meta = t.impl()->autograd;
  if (!meta) meta = std::make_unique<AutogradMeta>();
  return *meta;
}
const std::shared_ptr<Node> kNoNode;
std::atomic<LeafHooksPresent> leaf_hooks_present{nullptr};
}  // namespace

void set_leaf_hooks_check(LeafHooksPresent check) { leaf_hooks_present = check; }

uint64_t next_sequence_nr() {
  static std::atomic<uint64_t> counter{0};
  return counter++;
}

bool requires_grad(const Tensor& t) { return t.impl()->requires_grad; }

const std::shared_ptr<Node>& grad_fn(const Tensor& t) {
  const auto& meta = t.impl()->autograd;
  return meta ? meta->grad_fn : kNoNode;
}

uint32_t output_nr(const Tensor& t) {
  const auto& meta = t.impl()->autograd;
  return meta ? meta->output_nr : 0;
}

Edge gradient_edge(const Tensor& t) {
  if (const auto& fn = grad_fn(t)) return Edge{fn, output_nr(t)};
  if (!requires_grad(t)) return Edge{};
  AutogradMeta& meta = meta_of(t);
  std::shared_ptr<Node> accumulator = meta.grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = accumulator;
  }
  return Edge{accumulator, 0};
}

Tensor grad(const Tensor& t) {
  const auto& meta = t.impl()->autograd;
  return meta ? meta->grad : Tensor();
}

void set_grad(const Tensor& t, const Tensor& grad) { meta_of(t).grad = grad; }

void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  AutogradMeta& meta = meta_of(t);
  meta.grad_fn = node;
  meta.output_nr = output_nr;
  t.impl()->requires_grad = true;
}

void clear_history(const Tensor& t) {
  t.impl()->requires_grad = false;
  if (auto& meta = t.impl()->autograd) {
    meta->grad_fn.reset();
    meta->output_nr = 0;
  }
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : variable(std::move(leaf)) {
  sequence_nr = UINT64_MAX;  // a sink runs as soon as it is ready, as upstream's
}

namespace {

// Upstream's gradient layout contract: .grad has the leaf's strides where the leaf is dense and
// does not overlap itself (size-1 dims aside, which must not be broadcast), else is contiguous.
bool obeys_layout_contract(const Tensor& grad, const Tensor& leaf) {
  if (!is_non_overlapping_and_dense(leaf)) return grad.is_contiguous();
  for (int64_t d = 0; d < grad.dim(); ++d) {
    bool mismatch = grad.size(d) != 1 ? grad.stride(d) != leaf.stride(d) : grad.stride(d) == 0;
    if (mismatch) return false;
  }
  return true;
}

// A copy of `grad` laid out as the contract asks.
Tensor copy_obeying_layout_contract(const Tensor& grad, const Tensor& leaf) {
  if (!is_non_overlapping_and_dense(leaf)) return grad.clone();
  MetaAllocation meta(grad.is_meta());
  size_t bytes = size_t(leaf.numel()) * element_size(grad.dtype());
  Tensor out =
      Tensor::from_storage(std::make_shared<Storage>(bytes), leaf.sizes(), leaf.strides(), 0, grad.dtype());
  out.copy_from(grad);
  return out;
}

}  // namespace

// The first gradient becomes .grad itself, detached (no view of anything for autograd), when
// nothing else holds it and it has the layout .grad must have, as upstream's: no copy, even of a
// view of the gradient passed to backward, which upstream keeps too. Else a copy laid out so.
// Later ones are added in place, so .grad keeps its identity.
std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads) {
  if (grads.empty() || !grads[0].defined()) return {};  // nothing reached this leaf
  Tensor leaf(variable);
  Tensor incoming = std::move(grads[0]);
  if (LeafHooksPresent check = leaf_hooks_present; check && check(*variable))
    throw NotImplemented("torchnative does not run tensor hooks (Tensor.register_hook) yet");
  Tensor current = grad(leaf);
  if (current.defined())
    ops::add_(current, incoming);
  else if (!GradMode::is_enabled() && incoming.impl_ptr().use_count() == 1 &&
           obeys_layout_contract(incoming, leaf))
    set_grad(leaf, incoming.view_as_strided(incoming.sizes(), incoming.strides(), incoming.offset()));
  else
    set_grad(leaf, copy_obeying_layout_contract(incoming, leaf));
  return {};
}

}  // namespace tn::autograd
