// A tensor's place in the graph (its AutogradMeta in core/) and the leaves' sink.
#include <atomic>

#include "core/autograd_mode.h"
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

// The first gradient becomes .grad as a copy of its own (what reached us may be a view of
// another tensor's memory); later ones are added in place, so .grad keeps its identity.
std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads) {
  if (grads.empty() || !grads[0].defined()) return {};  // nothing reached this leaf
  Tensor leaf(variable);
  const Tensor& incoming = grads[0];
  if (LeafHooksPresent check = leaf_hooks_present; check && check(*variable))
    throw NotImplemented("torchnative does not run tensor hooks (Tensor.register_hook) yet");
  Tensor current = grad(leaf);
  if (!current.defined())
    set_grad(leaf, incoming.clone());
  else
    ops::add_(current, incoming);
  return {};
}

}  // namespace tn::autograd
