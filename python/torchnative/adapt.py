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
- `Tent(filter=EataFilter())`: Tent over the samples EATA's filter keeps (reliable: entropy
  below a margin; non-redundant: softmax unlike the moving average of past kept ones), each
  weighted by 1/exp(entropy - margin). A batch it keeps nothing of takes no step.
- `BNAdapt()`: no gradient; online, BatchNorm normalises with each test batch's statistics and
  folds them into its running statistics with weight `lr` (its momentum); offline, it
  normalises with the running statistics so adapted.

`wrap(..., recovery=Recovery())` reverts to the base when the moving average of the served
entropy collapses. What the filter kept, the steps taken and skipped and the recoveries are
counted in `model.counts`.

Refused by name: a model with nothing the method adapts (`NothingToAdapt`), an objective that
does not depend on the adapted parameters (`DetachedObjective`), EATA's Fisher regulariser
(not implemented). `lr=0` is an exact no-op: no step is taken, so nothing can move by a rounding.
"""
import dataclasses
import math

import torch
from torch import nn

from .delta import Delta

ATTACHED = ("online", "offline", "revert", "delta", "counts", "forward")
BATCH_NORMS = nn.modules.batchnorm._BatchNorm
AFFINE_NORMS = (BATCH_NORMS, nn.LayerNorm, nn.GroupNorm)


class NothingToAdapt(ValueError):
    """The model has none of the layers the method adapts."""


class DetachedObjective(RuntimeError):
    """The method's objective does not depend on the parameters being adapted."""


def sample_entropies(logits):
    """The entropy of softmax(logits) along dimension 1, one per sample."""
    return -(logits.softmax(1) * logits.log_softmax(1)).sum(1)


def softmax_entropy(logits):
    """Mean over the batch of the entropy of softmax(logits) along dimension 1."""
    return sample_entropies(logits).mean()


def found(names, method, what, model):
    """names, unless there are none: then NothingToAdapt, naming what the method adapts."""
    if not names:
        raise NothingToAdapt(f"{type(method).__name__} adapts {what}; {type(model).__name__} has none")
    return names


@dataclasses.dataclass
class Selection:
    """The samples of one batch an EataFilter keeps, and the moving average after it."""
    indices: torch.Tensor   # of the kept samples, in batch order
    weights: torch.Tensor   # 1/exp(entropy - margin) of each kept sample
    reliable: int           # how many samples passed the entropy margin
    average: torch.Tensor   # the moving average of kept softmax outputs, None until one is kept


class EataFilter:
    """EATA's sample selection (Niu et al., ICML 2022, Eqs. 3-5 and the authors' eata.py).

    margin: E0 as a fraction of ln C, the entropy of the uniform prediction over the C classes
    (0.4, the paper's 0.4 ln 1000 on ImageNet). A sample is reliable when its entropy is below E0.
    redundancy: epsilon; a reliable sample is kept when the cosine similarity of its softmax to
    the moving average of past kept softmax outputs is below it (0.05, the paper's ImageNet value:
    with C classes a one-hot prediction is 1/sqrt(C) similar to a uniform average, so fewer
    classes need a larger epsilon). momentum: the moving average's weight on its past (0.9).
    The average starts at the first kept batch's mean; a batch that keeps nothing leaves it."""

    def __init__(self, margin=0.4, redundancy=0.05, momentum=0.9, fishers=None, fisher_alpha=None):
        if fishers is not None or fisher_alpha is not None:
            raise NotImplementedError("EATA's Fisher regulariser (fishers, fisher_alpha) is not implemented in "
                                      "torchnative.adapt: only its sample filter is (see docs/adapt.md)")
        self.margin, self.redundancy, self.momentum = margin, redundancy, momentum

    def select(self, outputs, average):
        """The Selection of outputs (logits, classes along dimension 1) given the moving average so far."""
        with torch.no_grad():
            probabilities = outputs.softmax(1)
            entropies = sample_entropies(outputs)
            bound = self.margin * math.log(outputs.shape[1])
            reliable = entropies < bound
            kept = reliable
            if average is not None:
                similarity = torch.cosine_similarity(probabilities, average.unsqueeze(0), dim=1)
                kept = reliable & (similarity.abs() < self.redundancy)
            indices = kept.nonzero().reshape(-1)
            weights = torch.exp(bound - entropies[indices])
            return Selection(indices, weights, int(reliable.sum()), self.moved(average, probabilities[indices]))

    def moved(self, average, kept_probabilities):
        if len(kept_probabilities) == 0:
            return average
        mean = kept_probabilities.mean(0)
        return mean if average is None else self.momentum * average + (1 - self.momentum) * mean


class Tent:
    """Entropy minimisation over the affine parameters of the normalisation layers; with an
    EataFilter, over the samples it keeps, each weighted as it says."""

    uses_gradient = True

    def __init__(self, filter=None):
        self.filter = filter

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

    def objective(self, outputs, weights=None):
        if weights is None:
            return softmax_entropy(outputs)
        return (sample_entropies(outputs) * weights).mean()


class BNAdapt:
    """BatchNorm statistics of the test batches, no gradient."""

    uses_gradient = False
    filter = None  # statistics of the whole batch: no sample to weigh

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


class Recovery:
    """Back to the base when the served entropy collapses (after SAR's model recovery, Niu et al.,
    ICLR 2023, which compares its moving average with a fixed 0.2 nats on ImageNet's 1000 classes).

    The moving average of each adapting call's mean entropy starts at the first call's and weighs
    its past by momentum (0.9, SAR's); when it falls below `below` times that first value (0.2, our
    choice: relative, so that one default serves any number of classes), the wrapper reverts and
    the average starts again at the next call."""

    def __init__(self, below=0.2, momentum=0.9):
        self.below, self.momentum = below, momentum

    def moved(self, average, entropy):
        return entropy if average is None else self.momentum * average + (1 - self.momentum) * entropy


@dataclasses.dataclass
class Counts:
    """What the adapting calls of a wrapped model did (model.counts)."""
    steps: int = 0       # optimizer steps taken
    skipped: int = 0     # calls whose filter kept no sample: no step, no byte moved
    reliable: int = 0    # samples below the filter's entropy margin
    kept: int = 0        # samples the filter kept (reliable and non-redundant)
    recoveries: int = 0  # reverts to the base on a collapsed entropy


class Adapter:
    """The state of one wrapped model's adaptation."""

    def __init__(self, model, method, lr, optimizer, episodic, recovery):
        self.model, self.method, self.lr, self.episodic = model, method, lr, episodic
        self.recovery = recovery
        self.delta = Delta(model, method.adapted_names(model))
        self.make_optimizer = optimizer or torch.optim.SGD
        self.optimizer = self.new_optimizer()
        self.adapting = False
        self.serve = model.forward
        self.counts = Counts()
        # The stream's moving averages: of the filter's kept softmax outputs (kept across a
        # revert, as EATA keeps it: it describes the stream, not the weights) and of the entropy
        # (restarted by a revert, which is what recovery watches for).
        self.kept_average = None
        self.entropy_start = self.entropy_average = None

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
                outputs = self.serve(*args, **kwargs)
        else:
            with torch.enable_grad():  # adapts even when the caller serves under no_grad
                outputs = self.serve(*args, **kwargs)
                self.learn(outputs)
        self.recover_if_collapsed(outputs)
        return outputs

    def learn(self, outputs):
        """A step on the method's objective, over the samples its filter keeps (all, without one)."""
        if self.method.filter is None:
            self.step(self.method.objective(outputs))
            return
        selection = self.method.filter.select(outputs, self.kept_average)
        self.kept_average = selection.average
        self.counts.reliable += selection.reliable
        self.counts.kept += len(selection.indices)
        if len(selection.indices) == 0:
            self.counts.skipped += 1  # nothing to learn from: a step on an empty mean would be NaN
            return
        self.step(self.method.objective(outputs[selection.indices], selection.weights))

    def recover_if_collapsed(self, outputs):
        if self.recovery is None:
            return
        entropy = softmax_entropy(outputs.detach()).item()
        self.entropy_average = self.recovery.moved(self.entropy_average, entropy)
        if self.entropy_start is None:
            self.entropy_start = entropy
        elif self.entropy_average < self.recovery.below * self.entropy_start:
            self.revert()
            self.counts.recoveries += 1

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
        self.counts.steps += 1
        for parameter, grad in zip(parameters, saved):
            parameter.grad = grad

    def online(self):
        self.adapting = True
        return self.model

    def offline(self):
        self.adapting = False
        return self.model

    def revert(self):
        """The base back in every adapted tensor, the optimizer's moments and the entropy's moving
        average forgotten."""
        self.delta.revert()
        self.optimizer = self.new_optimizer()
        self.entropy_start = self.entropy_average = None
        return self.model


def wrap(model, method, lr, optimizer=None, episodic=False, recovery=None):
    """model itself, adapting with method when online (see the module's docstring).

    optimizer: a callable taking (parameters, lr=lr), such as torch.optim.Adam or
    functools.partial(torch.optim.SGD, momentum=0.9); plain SGD by default. episodic: revert to
    the base before each adapting call (every batch adapts from the source model). recovery: a
    Recovery, to revert when the served entropy collapses."""
    taken = [name for name in ATTACHED if name in vars(model)]
    if taken:
        raise ValueError(f"the model already has {', '.join(taken)} of its own (wrapped twice?): "
                         "adapt.wrap attaches these")
    adapter = Adapter(model, method, lr, optimizer, episodic, recovery)
    model.forward = adapter.forward
    model.online, model.offline, model.revert = adapter.online, adapter.offline, adapter.revert
    model.delta, model.counts = adapter.delta, adapter.counts
    adapter.method.configure(model, False, lr)
    return model
