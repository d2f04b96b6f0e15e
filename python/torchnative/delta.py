"""A weight delta: the base a model's adapted tensors started from, and the way back to it.

`Delta(model, names)` copies exactly the named parameters and buffers (the ones a method adapts),
so its cost is those tensors' bytes and nothing else (`base_nbytes`). `revert()` writes the copy
back in place, bit for bit. `save(path)` persists the adapted values with the sha256 of the base
they were adapted from; `Delta.load(path, model)` applies them only to a model whose tensors hash
to that same base, and refuses any other with `BaseMismatch`. `publish(engine or device, weight)`
sends the adapted model as a coordinator round's contribution, in a round whose model is the base.

The base is the whole model as it was when the Delta was made: the adapted tensors (copied) and
the rest of what `state_dict` holds (hashed then, not copied): parameters and persistent buffers,
the model a coordinator's round carries; a buffer registered with `persistent=False` is not part
of it. Both count, because adapted tensors fit the rest: Tent's
BatchNorm scales start at 1 in every freshly built network, and a delta fitted to one network's
features means nothing on another's.

Tied tensors: a GPT's head sharing its token embedding's weight (`model.head.weight =
model.tok_emb.weight`) is one Parameter that `state_dict` lists under both names and
`named_parameters` under the first only. A Delta takes either name and holds the tensor once,
under its first name (copied once, reverted in place once, so the tie is kept); a state_dict
given to it (a round's model) must hold the same bytes under both names.
"""
import hashlib
from itertools import chain

import torch

FORMAT = "torchnative.delta/1"


class BaseMismatch(ValueError):
    """The model a saved delta is applied to is not the base the delta was adapted from."""


class TiedMismatch(ValueError):
    """A state_dict holds different values under the names of one tied tensor of the model."""


def named_tensors(model):
    """Every parameter and buffer of model by qualified name (a tied tensor under its first name)."""
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    return tensors


def first_names(model):
    """{name: the first name of its tensor} for every parameter and buffer of model under every
    name state_dict gives it: a tied tensor's names all map to the one named_parameters gives."""
    first, names = {}, {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        for name, tensor in chain(module.named_parameters(prefix, recurse=False),
                                  module.named_buffers(prefix, recurse=False)):
            names[name] = first.setdefault(id(tensor), name)
    return names


def raw_bytes(tensor):
    return tensor.detach().cpu().contiguous().numpy().tobytes()


def fold_ties(model, state):
    """state ({name: tensor} under state_dict's names) with each tied tensor of model once, under
    its first name. Refuses (TiedMismatch, naming them) names of one tied tensor holding different
    values: loading them would keep the last one's silently."""
    names, folded, source = first_names(model), {}, {}
    for name, tensor in state.items():
        first = names.get(name, name)
        if first not in folded:
            folded[first], source[first] = tensor, name
        elif raw_bytes(tensor) != raw_bytes(folded[first]):
            raise TiedMismatch(f"'{source[first]}' and '{name}' are one tied tensor of the model, but the "
                               "state gives them different values")
    return folded


def tensors_sha256(names, tensors):
    """sha256 over each named tensor's name, dtype, shape and bytes, in the order of names: a base
    with the same bytes under other names or shapes is another base."""
    digest = hashlib.sha256()
    for name in names:
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}\0{tensor.dtype}\0{list(tensor.shape)}\0".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def state_tensors(model):
    """Every tensor model's state_dict holds (its parameters and persistent buffers, not the
    buffers registered with persistent=False), each once, under its first name."""
    return fold_ties(model, {name: value for name, value in model.state_dict(keep_vars=True).items()
                             if isinstance(value, torch.Tensor)})  # not a module's extra state


def rest_sha256(model, adapted_names):
    """sha256 of every tensor of model's state_dict but the adapted ones, in name order (a tied
    tensor once, under its first name): what is_base compares a round's state_dict with."""
    tensors = state_tensors(model)
    return tensors_sha256(sorted(set(tensors) - set(adapted_names)), tensors)


def _select(model, names, purpose):
    tensors = named_tensors(model)
    missing = [name for name in names if name not in tensors]
    if missing:
        raise BaseMismatch(f"{purpose}: the model has no parameter or buffer named {', '.join(missing)}")
    return {name: tensors[name] for name in names}


def one_name_each(model, names):
    """names with each tensor once, under its first name (a tied tensor's other names folded)."""
    first = first_names(model)
    return tuple(dict.fromkeys(first.get(name, name) for name in names))


class Delta:
    """The base of the named tensors of model (copied now) and their offset from it. `names` may
    name a tied tensor under any of its names, once or more: `self.names` holds each tensor once,
    under its first name."""

    def __init__(self, model, names):
        if not names:
            raise ValueError("a Delta needs at least one tensor to adapt")
        self.model = model
        self.names = one_name_each(model, names)
        current = _select(model, self.names, "Delta")
        self._base = {name: tensor.detach().clone() for name, tensor in current.items()}
        self._rest_sha256 = rest_sha256(model, self.names)

    @property
    def base_nbytes(self):
        """Bytes held by the base copy: only the adapted tensors'."""
        return sum(tensor.numel() * tensor.element_size() for tensor in self._base.values())

    def base_sha256(self):
        """(sha256 of the adapted tensors' base, sha256 of the rest of the model when the Delta was made)."""
        return tensors_sha256(self.names, self._base), self._rest_sha256

    def current(self):
        """The model's adapted tensors as they are now, by name (looked up again each time, so that
        a module whose tensors were replaced, by `.to()` say, is still followed)."""
        return _select(self.model, self.names, "Delta")

    def offset(self):
        """{name: current - base} for every adapted tensor (floating tensors; others are exact
        counters, given as the difference too)."""
        return {name: tensor.detach() - self._base[name] for name, tensor in self.current().items()}

    def revert(self):
        """Writes the base back into the model's tensors, in place, bit for bit."""
        with torch.no_grad():
            for name, tensor in self.current().items():
                tensor.copy_(self._base[name])

    def save(self, path):
        """Persists the adapted values (not base + offset, which would round) with the base's hash."""
        adapted = {name: tensor.detach().clone() for name, tensor in self.current().items()}
        torch.save({"format": FORMAT, "names": list(self.names), "base_sha256": list(self.base_sha256()),
                    "adapted": adapted}, path)

    @classmethod
    def load(cls, path, model):
        """A Delta over model, whose current tensors must be the saved delta's base (else BaseMismatch),
        with the saved adapted values written into model."""
        record = torch.load(path)
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise BaseMismatch(f"{path} is not a saved torchnative Delta ({FORMAT})")
        names = record["names"]
        found = (tensors_sha256(names, _select(model, names, f"loading the delta {path}")),
                 rest_sha256(model, names))
        for part, saved, actual in zip(("adapted tensors", "rest of the model"), record["base_sha256"], found):
            if saved != actual:
                raise BaseMismatch(f"the delta {path} was adapted from a base whose {part} hash to sha256 {saved}, "
                                   f"but this model's hash to {actual}: refusing to apply it to another base")
        delta = cls(model, names)
        with torch.no_grad():
            for name, tensor in delta.current().items():
                tensor.copy_(record["adapted"][name])
        return delta

    def is_base(self, state):
        """Whether {name: tensor}, a model's state_dict (its parameters and persistent buffers,
        under state_dict's names), hashes to this delta's base (a tied tensor's names holding one
        value)."""
        try:
            state = fold_ties(self.model, state)
        except TiedMismatch:
            return False
        rest = sorted(set(state) - set(self.names))
        return set(self.names) <= set(state) and (
            tensors_sha256(self.names, state), tensors_sha256(rest, state)) == self.base_sha256()

    def publish(self, to, weight):
        """Takes part in one coordinator round with the adapted model as this device's
        contribution, weighted by `weight` examples: `to` is a torchnative.device.Device or a
        torchnative.nn.federated.Engine with a coordinator. The round's model must be this delta's
        base (its adapted tensors and the rest hash alike, else BaseMismatch, and nothing is sent):
        the contribution is that model with the adapted tensors' current values. Returns the
        round's RoundReport (contributed, error)."""
        from torchnative.device import examples_of

        device = getattr(to, "device", to)  # an Engine's Device, or the Device itself
        if device is None or not hasattr(device, "participate_once"):
            raise ValueError(f"publish takes a torchnative.device.Device or an Engine with a coordinator, not {to!r}")
        examples = examples_of(weight)

        def contribution(state, config):
            if not self.is_base(state):
                raise BaseMismatch(f"round {config['round_id']} of task '{config['task_id']}' trains from a model "
                                   "that is not this delta's base: refusing to contribute an adaptation of "
                                   "another model")
            adapted = {name: tensor.detach() for name, tensor in self.current().items()}
            first = first_names(self.model)  # a tied adapted tensor goes under each of its names
            return {name: adapted.get(first.get(name, name), tensor) for name, tensor in state.items()}, examples

        return device.participate_once(contribution)
