"""Gradient twins: every floating case of the operator families, differentiated, and every
float64 one checked by upstream's torch.autograd.gradcheck.

A case's twin (its name with spec.GRADIENT appended) calls the same function on the same
values, with each floating tensor input made a leaf that requires grad, and returns which
of the outputs require grad and the gradient, for every such leaf, of a weighted sum of
the floating outputs that do (``torch.autograd.grad`` with ``allow_unused``). The judge
compares the gradients like any result, with tolerances derived from upstream's own
float32-vs-float64 error: the reference pass differentiates the same function in float64.

- A leaf keeps its input's geometry: ``detach()`` of a transposed, stepped, offset or
  expanded view is a leaf with the same strides (an expanded leaf has stride 0, its
  gradient summed over the broadcast), so the formulas see what the forward kernels see.
- A case writing into its first input (common.inplace) writes into a clone of the leaf:
  an in-place call on a non-leaf, as ``relu(inplace=True)`` and ``out += identity`` are
  in real models, differentiated through the in-place node. (Writing into the leaf
  itself would only test the error upstream raises for it.)
- The weights are dyadic (odd multiples of 1/4 up to 2.25), exact in every floating dtype,
  and differ per element, so a formula that drops or transposes a term shows.

A float64 case's gradcheck twin (spec.GRADCHECK) runs ``torch.autograd.gradcheck`` (finite
differences against the formulas, the whole Jacobian) over the same call: True on both sides,
or the same exception where upstream's own formulas fail it (a kink at the sample point, an
input with overlapping memory). Cases with NaN/inf inputs (the "special" domain) have none:
finite differences there say nothing.
"""

import torch

from spec import GRADCHECK, GRADIENT, Arg, Case, Lcg

# Case dtypes whose twins are made: the dtypes gradients are compared in (point 5 of issue 31).
DTYPES = ("float32", "float64")


def twin(case):
    """The gradient twin of ``case``, or None when it has nothing to differentiate."""
    if case.dtype not in DTYPES or case.exact:
        return None
    call = _differentiated(case.fn, case.name, getattr(case.fn, "writes_first_input", False))
    return Case(case.name + GRADIENT, call, case.args, case.dtype, requires=case.requires)


def gradcheck_twin(case):
    """The gradcheck twin of a float64 ``case`` without NaN/inf inputs, or None."""
    special = any(isinstance(arg, Arg) and arg.domain == "special" for arg in case.args)
    if case.dtype != "float64" or case.exact or special:
        return None
    call = _gradchecked(case.fn, getattr(case.fn, "writes_first_input", False))
    return Case(case.name + GRADCHECK, call, case.args, case.dtype, requires=case.requires)


def _gradchecked(fn, writes_first_input):
    def call(*inputs):
        positions = [index for index, value in enumerate(inputs) if _floating(value)]

        def function(*leaves):
            arguments = list(inputs)
            for index, leaf in zip(positions, leaves):
                arguments[index] = leaf
            if writes_first_input and positions and positions[0] == 0:
                arguments[0] = arguments[0].clone()
            return tuple(output for output in _tensors(fn(*arguments)) if output.is_floating_point())

        leaves = tuple(inputs[index].detach().requires_grad_() for index in positions)
        if not leaves or not any(output.requires_grad for output in function(*leaves)):
            return "no output requires grad"
        # Undefined output gradients are an engine feature the shim does not have yet
        # (torch._C._functions.UndefinedGrad); both sides leave that check out.
        return torch.autograd.gradcheck(function, leaves, check_undefined_grad=False)
    return call


def _differentiated(fn, name, writes_first_input):
    def call(*inputs):
        leaves = [value.detach().requires_grad_() if _floating(value) else None for value in inputs]
        arguments = [value if leaf is None else leaf for value, leaf in zip(inputs, leaves)]
        if writes_first_input and leaves and leaves[0] is not None:
            arguments[0] = leaves[0].clone()
        outputs = list(_tensors(fn(*arguments)))
        requiring = [output.requires_grad for output in outputs]
        differentiable = [output for output in outputs if output.requires_grad and output.is_floating_point()]
        if not differentiable:
            return tuple(requiring), "no output requires grad"
        total = sum((output * _weights(output, "%s#w%d" % (name, index))).sum()
                    for index, output in enumerate(differentiable))
        wrt = [leaf for leaf in leaves if leaf is not None]
        return tuple(requiring), torch.autograd.grad(total, wrt, allow_unused=True)
    return call


def _floating(value):
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _tensors(result):
    """The tensors of a case's result, in order, through tuples and lists."""
    if isinstance(result, torch.Tensor):
        yield result
    elif isinstance(result, (tuple, list)):
        for item in result:
            yield from _tensors(item)


def _weights(output, seed):
    rng = Lcg(seed)
    values = [(2 * rng.below(10) - 9) / 4.0 for _ in range(output.numel())]
    return torch.tensor(values, dtype=output.dtype).reshape(output.shape)
