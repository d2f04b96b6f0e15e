"""Aliasing sweep, part two: assignment and augmented assignment written through views.

Python statements generated from small tables, run on x, a (6, 4) tensor (also
as the transposed view of a (4, 6) one), returning x's base so every write shows:

  subscript  ``x[:, 1] += rhs``: getitem, the in-place op, setitem, for each
             SUBSCRIPTS view, each OPS operator and each right-hand side: a
             Python scalar, a tensor, the same view again (full overlap) or
             another view of x (disjoint, or partially overlapping for x[1:])
  view       ``v = x.t(); v += rhs``: the in-place op alone on VIEWS, whose other
             view shares memory with different strides or overlaps in part
  advanced   ``t[i] = rhs``, ``t[i] += rhs`` with index tensors, pairs, masks and
             mixed keys on x and on views of it, the values a scalar, the same
             selection (a copy), or a view of t (values aliasing the target)

Case names: alias.<form>/<dtype>/<layout of x>_<view>_<operator>_<right-hand side>.
"""

import torch

from spec import TEMPORARY, Arg, Case

SHAPE = (6, 4)
# name: (view, its shape, another view of x of that shape)
SUBSCRIPTS = {
    "col": ("x[:, 1]", (6,), "x[:, 0]"),
    "row": ("x[1]", (4,), "x[0]"),
    "rows": ("x[1:]", (5, 4), "x[:-1]"),           # partial overlap
    "step": ("x[::2]", (3, 4), "x[1::2]"),
    "inner_step": ("x[:, ::2]", (6, 2), "x[:, 1::2]"),
    "block": ("x[1:3, 1:3]", (2, 2), "x[2:4, 0:2]"),  # partial overlap at x[2, 1]
    "t_row": ("x.t()[1]", (6,), "x.t()[2]"),
}
VIEWS = {
    "t": ("x.t()", (4, 6), "x.view(4, 6)"),         # the same memory, other strides
    "diagonal": ("x.diagonal()", (4,), "x[0]"),     # x[0, 0] in both
    "flat_step": ("x.view(-1)[::3]", (8,), "x.view(-1)[1::3]"),
    "expanded": ("x[0].expand(6, 4)", (6, 4), "x"),  # several elements at one address
    "t_col": ("x.t()[:, 1]", (4,), "x[0]"),
}
OPS = {"iadd": "+=", "isub": "-=", "imul": "*=", "itruediv": "/=", "ifloordiv": "//=", "imod": "%=",
       "ipow": "**=", "iand": "&=", "ior": "|=", "ixor": "^=", "ilshift": "<<=", "irshift": ">>=",
       "assign": "="}
ARITHMETIC = ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "assign")
# The operators each dtype is swept over (float32 and int64 also over the ones that must raise).
DTYPE_OPS = {
    "float32": tuple(OPS), "int64": tuple(OPS), "float64": ARITHMETIC, "int32": tuple(OPS),
    "bool": ("iadd", "imul", "iand", "ior", "ixor", "assign"),
    "float16": ("iadd", "isub", "imul", "itruediv", "assign"),
    "bfloat16": ("iadd", "isub", "imul", "itruediv", "assign"),
}
EXPONENTS = ("ipow", "ilshift", "irshift")  # right-hand tensors in [0, 3] (ints) / [-2, 2]

# Advanced keys on a target t (x and views of it with at least 3 rows and columns):
# name: (key, a view of t of the selection's shape, or None)
TARGETS = {"x": "x", "t": "x.t()", "step": "x[::2]", "cols": "x[:, 1:]"}
ADVANCED = {
    "rows": ("[torch.tensor([0, 2])]", "t[1:3]"),
    "cols": ("[:, torch.tensor([0, 2])]", "t[:, 1:3]"),
    "pairs": ("[torch.tensor([0, 2]), torch.tensor([1, 0])]", "t[1, :2]"),
    "mask": ("[t > 0]", None),
    "mixed": ("[torch.tensor([0, 2]), 1:]", "t[1:3, :-1]"),
}


class Statement:
    """Runs ``source`` with x (and r, a tensor input) bound; returns x's base."""

    def __init__(self, source, transposed):
        self.source = source
        self.code = compile(source, "<%s>" % source, "exec")
        self.transposed = transposed

    def __call__(self, base, *rhs):
        x = base.t() if self.transposed else base
        exec(self.code, {"torch": torch, "x": x, "r": rhs[0] if rhs else None})
        return base


def _right_hand_sides(shape, other, op, dtype, same):
    """(name, source text, extra inputs) of the right-hand sides of one view."""
    domain = "exponent" if op in EXPONENTS else "real" if dtype == "bool" else "nonzero"
    yield "scalar", "True" if dtype == "bool" else "2", ()
    yield "tensor", "r", (Arg(shape, domain),)
    yield "same", same, ()
    yield "other", other, ()


def _case(form, dtype, layout, view, op, rhs, source, extra):
    """Layout "xt": x is the transposed view of a (4, 6) base (Statement transposes it)."""
    transposed = layout == "xt"
    base = Arg(SHAPE[::-1] if transposed else SHAPE, "real" if dtype == "bool" else "nonzero")  # not all True
    name = "alias.%s/%s/%s_%s_%s_%s" % (form, dtype, layout, view, op, rhs)
    return Case(name, Statement(source, transposed), (base,) + extra, dtype)


def _with_temporary(form, dtype, layout, view, op, rhs, statement, text, extra):
    """The case (`statement` then the right-hand side `text`), and when that is a view of x,
    its twin reading a copy of it."""
    yield _case(form, dtype, layout, view, op, rhs, statement + text, extra)
    if rhs in ("same", "other", "view"):
        yield _case(form, dtype, layout, view, op, rhs + TEMPORARY, statement + "(%s).clone()" % text, extra)


def cases():
    for dtype, ops in DTYPE_OPS.items():
        layouts = ("x", "xt") if dtype in ("float32", "int64") else ("x",)
        for layout in layouts:
            for view, (target, shape, other) in SUBSCRIPTS.items():
                for op in ops:
                    for rhs, text, extra in _right_hand_sides(shape, other, op, dtype, target):
                        yield from _with_temporary("subscript", dtype, layout, view, op, rhs,
                                                   "%s %s " % (target, OPS[op]), text, extra)
        if dtype in ("float32", "int64"):
            for view, (target, shape, other) in VIEWS.items():
                for op in ops:
                    for rhs, text, extra in _right_hand_sides(shape, other, op, dtype, target):
                        yield from _with_temporary("view", dtype, "x", view, op, rhs,
                                                   "v = %s\nv %s " % (target, OPS[op]), text, extra)
        if dtype in ("float32", "int64", "bool"):
            for target, expression in TARGETS.items():
                for key_name, (key, view) in ADVANCED.items():
                    for op in ("assign", "iadd", "imul"):
                        values = {"scalar": "True" if dtype == "bool" else "2", "same": "t" + key}
                        if view:
                            values["view"] = view
                        for rhs, text in values.items():
                            yield from _with_temporary("advanced", dtype, "x", "%s_%s" % (target, key_name), op,
                                                       rhs, "t = %s\nt%s %s " % (expression, key, OPS[op]),
                                                       text, ())
