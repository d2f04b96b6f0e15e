"""Test-time adaptation of a model as it serves.

    model = adapt.wrap(model, method=adapt.Tent(), lr=1e-3)
    model.online()     # every forward call adapts, then returns its outputs
    model.offline()    # serves the adapted model without adapting further
    model.revert()     # the base weights are back, byte for byte

`wrap` returns the same nn.Module (its state_dict, `.to()` and hooks are untouched): it attaches
`online`, `offline`, `revert` and `delta` (the `torchnative.delta.Delta` of the adapted tensors)
and routes `forward` through the adapter. The state of an adaptation (the base copy, the optimizer
and its moments, whether it is online) lives in the wrapper; a method only says which tensors it
adapts, how the model serves while adapting or not, and what it minimises.

Methods:
- `Tent()`: one gradient step per forward call on the mean entropy of the softmax of the
  outputs, over the affine parameters of BatchNorm, LayerNorm and GroupNorm; everything else is
  left as it is. BatchNorm normalises with the batch's statistics (online and offline, since the
  adapted affine parameters are fitted to batch-normalised features) and its running statistics
  are neither used nor updated.
- `BNAdapt()`: no gradient; online, BatchNorm normalises with each test batch's statistics and
  folds them into its running statistics with weight `lr` (its momentum); offline, it
  normalises with the running statistics so adapted.

Refused by name: a model with nothing the method adapts (`NothingToAdapt`), an objective that
does not depend on the adapted parameters (`DetachedObjective`). `lr=0` is an exact no-op: no
step is taken, so nothing can move by a rounding.
"""
import torch
from torch import nn

from .delta import Delta

ATTACHED = ("online", "offline", "revert", "delta", "forward")
BATCH_NORMS = nn.modules.batchnorm._BatchNorm
AFFINE_NORMS = (BATCH_NORMS, nn.LayerNorm, nn.GroupNorm)


class NothingToAdapt(ValueError):
    """The model has none of the layers the method adapts."""


class DetachedObjective(RuntimeError):
    """The method's objective does not depend on the parameters being adapted."""


def softmax_entropy(logits):
    """Mean over the batch of the entropy of softmax(logits) along dimension 1."""
    return -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()


def found(names, method, what, model):
    """names, unless there are none: then NothingToAdapt, naming what the method adapts."""
    if not names:
        raise NothingToAdapt(f"{type(method).__name__} adapts {what}; {type(model).__name__} has none")
    return names


class Tent:
    """Entropy minimisation over the affine parameters of the normalisation layers."""

    uses_gradient = True

    def adapted_names(self, model):
        affine = {id(parameter) for module in model.modules() if isinstance(module, AFFINE_NORMS)
                  for parameter in module.parameters(recurse=False)}
        names = [name for name, parameter in model.named_parameters() if id(parameter) in affine]
        return found(names, self, "the affine parameters of BatchNorm, LayerNorm and GroupNorm", model)

    def configure(self, model, adapting, lr):
        for module in model.modules():
            if isinstance(module, BATCH_NORMS):
                # Training mode without tracking: batch statistics, running buffers left alone.
                module.train()
                module.track_running_stats = False

    def objective(self, outputs):
        return softmax_entropy(outputs)


class BNAdapt:
    """BatchNorm statistics of the test batches, no gradient."""

    uses_gradient = False

    def adapted_names(self, model):
        statistics = {id(buffer) for module in model.modules() if isinstance(module, BATCH_NORMS)
                      for buffer in module.buffers(recurse=False)}
        names = [name for name, buffer in model.named_buffers() if id(buffer) in statistics]
        return found(names, self, "the running statistics of BatchNorm layers", model)

    def configure(self, model, adapting, lr):
        for module in model.modules():
            if isinstance(module, BATCH_NORMS) and module.running_mean is not None:
                module.track_running_stats = True
                module.train(adapting)
                if adapting:
                    module.momentum = lr

    def objective(self, outputs):
        return None


class Adapter:
    """The state of one wrapped model's adaptation."""

    def __init__(self, model, method, lr, optimizer, episodic):
        self.model, self.method, self.lr, self.episodic = model, method, lr, episodic
        self.delta = Delta(model, method.adapted_names(model))
        self.make_optimizer = optimizer or torch.optim.SGD
        self.optimizer = self.new_optimizer()
        self.adapting = False
        self.serve = model.forward

    def new_optimizer(self):
        if not self.method.uses_gradient:
            return None
        parameters = list(self.delta.current().values())
        for parameter in parameters:
            parameter.requires_grad_(True)
        return self.make_optimizer(parameters, lr=self.lr)

    def forward(self, *args, **kwargs):
        adapting = self.adapting and self.lr != 0
        # Configured at every call, so that a model.eval() or .train() in between changes nothing.
        self.method.configure(self.model, adapting, self.lr)
        if not adapting:
            return self.serve(*args, **kwargs)
        if self.episodic:
            self.revert()
        if not self.method.uses_gradient:
            with torch.no_grad():
                return self.serve(*args, **kwargs)
        with torch.enable_grad():  # adapts even when the caller serves under no_grad
            outputs = self.serve(*args, **kwargs)
            self.step(self.method.objective(outputs))
        return outputs

    def step(self, loss):
        """One optimizer step on loss over the adapted parameters only; the parameters' own .grad
        (a user's training in progress, say) is left as it was."""
        parameters = list(self.delta.current().values())
        name = type(self.method).__name__
        if loss is None or not loss.requires_grad:
            raise DetachedObjective(f"{name}'s objective does not require grad: it is detached from the "
                                    "adapted parameters, so a step would silently change nothing")
        gradients = torch.autograd.grad(loss, parameters, allow_unused=True)
        if all(gradient is None for gradient in gradients):
            raise DetachedObjective(f"{name}'s objective does not depend on any adapted parameter")
        saved = [parameter.grad for parameter in parameters]
        for parameter, gradient in zip(parameters, gradients):
            parameter.grad = gradient
        self.optimizer.step()
        for parameter, grad in zip(parameters, saved):
            parameter.grad = grad

    def online(self):
        self.adapting = True
        return self.model

    def offline(self):
        self.adapting = False
        return self.model

    def revert(self):
        """The base back in every adapted tensor, and the optimizer's moments forgotten."""
        self.delta.revert()
        self.optimizer = self.new_optimizer()
        return self.model


def wrap(model, method, lr, optimizer=None, episodic=False):
    """model itself, adapting with method when online (see the module's docstring).

    optimizer: a callable taking (parameters, lr=lr), such as torch.optim.Adam or
    functools.partial(torch.optim.SGD, momentum=0.9); plain SGD by default. episodic: revert to
    the base before each adapting call (every batch adapts from the source model)."""
    taken = [name for name in ATTACHED if name in vars(model)]
    if taken:
        raise ValueError(f"the model already has {', '.join(taken)} of its own (wrapped twice?): "
                         "adapt.wrap attaches these")
    adapter = Adapter(model, method, lr, optimizer, episodic)
    model.forward = adapter.forward
    model.online, model.offline, model.revert = adapter.online, adapter.offline, adapter.revert
    model.delta = adapter.delta
    adapter.method.configure(model, False, lr)
    return model
