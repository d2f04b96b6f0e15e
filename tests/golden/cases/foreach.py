"""The _foreach_* operators the optimizers' foreach=True paths call: each over a list of two
tensors of different shapes (one of them a non-contiguous view, or empty), with a tensor list,
a scalar or a scalar list; in-place forms return the list they wrote. Not differentiated:
upstream has no derivatives for them (an out-of-place result's backward is refused on both
sides; the harness would compare two refusals worded differently)."""

import torch

from cases.common import FLOATS, NUMERIC, main_dtype
from spec import CONTIGUOUS, EXPANDED, STEPPED, TRANSPOSED, Arg, Case

# The lists' shapes and layouts: tag -> (first, second); the second list matches the first.
LISTS = {
    "plain": (((3, 4), CONTIGUOUS), ((5,), CONTIGUOUS)),
    "views": (((3, 4), TRANSPOSED), ((2, 5), STEPPED)),
    "empty": (((0, 3), CONTIGUOUS), ((), CONTIGUOUS)),
}


def args(tag, count, domain="real", last_domain=None):
    """`count` lists of the tag's two tensors, flattened: a0 b0 a1 b1 ..."""
    (first, first_layout), (second, second_layout) = LISTS[tag]
    out = []
    for i in range(count):
        domain_i = last_domain if last_domain and i == count - 1 else domain
        out += [Arg(first, domain_i, layout=first_layout), Arg(second, domain_i, layout=second_layout)]
    return out


def pairs(tensors):
    return [list(tensors[i:i + 2]) for i in range(0, len(tensors), 2)]


def functional(name, *extra, **kwargs):
    def call(*tensors):
        return tuple(getattr(torch, name)(*pairs(tensors), *extra, **kwargs))
    return call


def in_place(name, *extra, **kwargs):
    def call(*tensors):
        lists = pairs(tensors)
        returned = getattr(torch, name)(*lists, *extra, **kwargs)
        return tuple(lists[0]), returned is None
    return call


# (op, list count, domain of the last list, extra positional arguments, keyword arguments, dtypes)
BINARY = (
    ("add", 1, None, (2,), {}, NUMERIC), ("add", 2, None, (), {"alpha": 0.5}, FLOATS),
    ("add", 1, None, ([1.5, -2],), {}, NUMERIC), ("sub", 2, None, (), {"alpha": 2}, NUMERIC),
    ("sub", 1, None, (0.25,), {}, FLOATS), ("mul", 2, None, (), {}, NUMERIC), ("mul", 1, None, ([3, 0.5],), {}, FLOATS),
    ("div", 2, "nonzero", (), {}, FLOATS), ("div", 1, None, (4,), {}, NUMERIC), ("div", 1, None, ([2, -0.5],), {}, FLOATS),
    ("maximum", 2, None, (), {}, NUMERIC), ("minimum", 2, None, (), {}, NUMERIC),
    ("addcmul", 3, None, (), {"value": 0.5}, FLOATS), ("addcmul", 3, None, ([2, -1],), {}, FLOATS),
    ("addcdiv", 3, "nonzero", (), {"value": -2}, FLOATS), ("addcdiv", 3, "nonzero", ([0.1, 3],), {}, FLOATS),
)
UNARY = (("sqrt", "pos"), ("exp", "small"), ("neg", "real"), ("reciprocal", "nonzero"), ("abs", "real"),
         ("log", "pos"), ("sigmoid", "real"), ("trunc", "real"))


def variant(extra, kwargs):
    if kwargs:
        return "_".join("%s%s" % item for item in kwargs.items())
    if extra and isinstance(extra[0], list):
        return "scalarlist"
    return "scalar" if extra else "list"


def binary_cases():
    for op, count, last, extra, kwargs, dtypes in BINARY:
        form = variant(extra, kwargs)
        for tag in LISTS:
            for dtype in (dtypes if tag == "plain" else (main_dtype(dtypes),)):
                inputs = args(tag, count, last_domain=last)
                name = "_foreach_%s/%s/%s_%s" % (op, dtype, form, tag)
                yield Case(name, functional("_foreach_" + op, *extra, **kwargs), inputs, dtype)
                yield Case(name.replace(op, op + "_", 1), in_place("_foreach_%s_" % op, *extra, **kwargs), inputs,
                           dtype)


def unary_cases():
    for op, domain in UNARY:
        for tag in LISTS:
            for dtype in (FLOATS if tag == "plain" else ("float32",)):
                inputs = args(tag, 1, domain)
                name = "_foreach_%s/%s/%s" % (op, dtype, tag)
                yield Case(name, functional("_foreach_" + op), inputs, dtype)
                yield Case(name.replace(op, op + "_", 1), in_place("_foreach_%s_" % op), inputs, dtype)
    for tag in LISTS:
        yield Case("_foreach_zero_/float32/%s" % tag, in_place("_foreach_zero_"), args(tag, 1), "float32")
        yield Case("_foreach_norm/float32/%s" % tag, functional("_foreach_norm"), args(tag, 1), "float32")
        yield Case("_foreach_norm/float64/ord1_%s" % tag, functional("_foreach_norm", 1), args(tag, 1), "float64")


def shape(*sizes):
    return Arg(sizes)


# Refusals: upstream's checks of the lists, and the per-tensor operator's own errors.
ERRORS = (
    ("empty_list", lambda: torch._foreach_add([], 1), ()),
    ("lengths_differ", lambda a, b, c: torch._foreach_mul([a, b], [c]), (shape(2), shape(3), shape(2))),
    ("scalar_list_length", lambda a, b: torch._foreach_add([a, b], [1.0]), (shape(2), shape(3))),
    ("shapes_differ", lambda a, b: torch._foreach_add_([a], [b]), (shape(2), shape(3))),
    ("in_place_on_expanded", lambda a: torch._foreach_add_([a], 1), (Arg((3, 4), layout=EXPANDED),)),
    ("float_into_int", lambda a: torch._foreach_add_([a.long()], 1.5), (shape(2),)),
)


def error_cases():
    for tag, call, inputs in ERRORS:
        yield Case("_foreach/float32/error_%s" % tag, call, inputs, "float32")


def cases():
    yield from binary_cases()
    yield from unary_cases()
    yield from error_cases()
