"""Reductions and scans: whole-tensor, dim, negative dim, dim tuples, keepdim, dtype=,
empty and 0-dim inputs, non-contiguous inputs, nan propagation, bad dims."""

from functools import partial

import torch

from cases.common import ALL, FLOATS, NUMERIC, into_out, main_dtype, method
from spec import CONTIGUOUS, OFFSET, STEPPED, TRANSPOSED, Arg, Case


class Reduction:
    def __init__(self, name, dtypes, dim_required=False, tuple_dims=False, keepdim=True,
                 has_out=True, dtype_kw=False, has_method=True, domain="real"):
        self.name = name
        self.dtypes = dtypes
        self.dim_required = dim_required  # scans: no whole-tensor form
        self.tuple_dims = tuple_dims
        self.keepdim = keepdim
        self.has_out = has_out
        self.dtype_kw = dtype_kw
        self.has_method = has_method
        self.domain = domain


REDUCTIONS = (
    Reduction("sum", ALL, tuple_dims=True, dtype_kw=True),
    Reduction("nansum", NUMERIC, tuple_dims=True, dtype_kw=True, domain="special"),
    Reduction("mean", FLOATS + ("int64",), tuple_dims=True, dtype_kw=True),
    Reduction("nanmean", FLOATS, tuple_dims=True, domain="special"),
    Reduction("prod", ALL, dtype_kw=True, domain="small"),
    Reduction("max", ALL, has_out=False),
    Reduction("min", ALL, has_out=False),
    Reduction("amax", ALL, tuple_dims=True),
    Reduction("amin", ALL, tuple_dims=True),
    Reduction("argmax", NUMERIC),
    Reduction("argmin", NUMERIC),
    Reduction("var", FLOATS, tuple_dims=True),
    Reduction("std", FLOATS, tuple_dims=True),
    Reduction("var_mean", FLOATS, tuple_dims=True, has_out=False, has_method=False),
    Reduction("std_mean", FLOATS, tuple_dims=True, has_out=False, has_method=False),
    Reduction("all", ALL),
    Reduction("any", ALL),
    Reduction("logsumexp", FLOATS + ("int64",), dim_required=True, tuple_dims=True),
    Reduction("median", NUMERIC, has_out=False),
    Reduction("nanmedian", FLOATS, has_out=False, domain="special"),
    Reduction("mode", NUMERIC, has_out=False, dim_required=True),
    Reduction("count_nonzero", ALL, tuple_dims=True, keepdim=False, has_out=False),
    Reduction("cumsum", ALL, dim_required=True, keepdim=False, dtype_kw=True),
    Reduction("cumprod", ALL, dim_required=True, keepdim=False, dtype_kw=True, domain="small"),
    Reduction("cummax", ALL, dim_required=True, keepdim=False, has_out=False),
    Reduction("cummin", ALL, dim_required=True, keepdim=False, has_out=False),
    Reduction("logcumsumexp", FLOATS, dim_required=True, keepdim=False),
)


def _reduction_cases(op):
    function = getattr(torch, op.name)
    # Scans have no whole-tensor form; their "full" case reduces dim 0.
    whole = (lambda a: function(a, 0)) if op.dim_required else function
    whole_tag = "dim0" if op.dim_required else "full"

    def case(dtype, tag, call, shape=(3, 4), layout=CONTIGUOUS, domain=None):
        args = (Arg(shape, domain or op.domain, None, layout),)
        return Case("%s/%s/%s" % (op.name, dtype, tag), call, args, dtype)

    for dtype in op.dtypes:
        yield case(dtype, "3x4/" + whole_tag, whole)
        yield case(dtype, "2x3x4/dim1", lambda a: function(a, 1), (2, 3, 4))
    main = main_dtype(op.dtypes)
    for dtype in dict.fromkeys((main, "int64" if "int64" in op.dtypes else main)):
        yield case(dtype, "3x4/dim_kw", lambda a: function(a, dim=-1))
        if op.keepdim:
            yield case(dtype, "3x4/keepdim", lambda a: function(a, 1, keepdim=True))
            yield case(dtype, "2x3x4/keepdim_kw", lambda a: function(a, dim=0, keepdim=True), (2, 3, 4))
        if not op.dim_required:
            yield case(dtype, "empty0x3/full", function, (0, 3))
        yield case(dtype, "empty0x3/dim0", lambda a: function(a, 0), (0, 3))
        yield case(dtype, "empty0x3/dim1", lambda a: function(a, 1), (0, 3))
    if op.tuple_dims:
        yield case(main, "2x3x4/dims02", lambda a: function(a, (0, 2)), (2, 3, 4))
        if op.keepdim:
            yield case(main, "2x3x4/dims_neg_keepdim", lambda a: function(a, (-1, 0), keepdim=True), (2, 3, 4))
    if not op.dim_required:
        yield case(main, "0d/full", function, ())
        yield case(main, "7/full", function, (7,))
        if op.has_method:
            yield case(main, "method_full", method(op.name))
    yield case(main, "0d/dim0", lambda a: function(a, 0), ())
    yield case(main, "0d/dim-1", lambda a: function(a, -1), ())
    yield case(main, "transposed/dim0", lambda a: function(a, 0), layout=TRANSPOSED)
    yield case(main, "stepped/dim1", lambda a: function(a, 1), layout=STEPPED)
    yield case(main, "offset/" + whole_tag, whole, layout=OFFSET)
    if op.has_method:
        yield case(main, "3x4/method", lambda a: getattr(a, op.name)(1))
    yield case(main, "3x4/kw", lambda a: function(input=a, dim=1))
    yield case(main, "3x4/bad_dim", lambda a: function(a, 2))
    if op.has_out:
        yield case(main, "3x4/out", into_out(lambda a, **kwargs: function(a, 1, **kwargs)))
    if op.dtype_kw:
        yield case(main, "3x4/dtype_float64", lambda a: function(a, 1, dtype=torch.float64))
        yield case("int32", "3x4/dtype_int64", lambda a: function(a, 0, dtype=torch.int64))
        yield case("int64", "3x4/dtype_float32", lambda a: function(a, 1, dtype=torch.float32))
        yield case("bool", "3x4/dim1", lambda a: function(a, 1))
    for dtype in FLOATS:
        if dtype in op.dtypes:
            yield case(dtype, "special/" + whole_tag, whole, (4, 4), domain="special")
            yield case(dtype, "special/dim1", lambda a: function(a, 1), (4, 4), domain="special")


def _norm_cases():
    """torch.norm and linalg norms: p-norms, dims and keepdim."""
    variants = (
        ("fro", torch.norm), ("p1", partial(torch.norm, p=1)), ("pinf", partial(torch.norm, p=float("inf"))),
        ("p3_dim1", partial(torch.norm, p=3, dim=1)), ("dim0_keepdim", partial(torch.norm, dim=0, keepdim=True)),
        ("fro_dims", partial(torch.norm, p="fro", dim=(0, 1))), ("method", method("norm")),
        ("vector_norm", torch.linalg.vector_norm), ("vector_norm_ord0", partial(torch.linalg.vector_norm, ord=0)),
        ("vector_norm_dim", partial(torch.linalg.vector_norm, ord=1.5, dim=1)),
        ("matrix_norm", torch.linalg.matrix_norm), ("matrix_norm_ord1", partial(torch.linalg.matrix_norm, ord=1)),
        ("linalg_norm", torch.linalg.norm),
    )
    for tag, call in variants:
        for dtype in ("float32", "float64"):
            yield Case("norm/%s/3x4/%s" % (dtype, tag), call, (Arg((3, 4)),), dtype)
    for dtype in ("float16", "bfloat16", "int64"):
        yield Case("norm/%s/3x4/fro" % dtype, torch.norm, (Arg((3, 4)),), dtype)
    yield Case("norm/float32/empty/fro", torch.norm, (Arg((0, 3)),), "float32")
    yield Case("norm/float32/special/fro", torch.norm, (Arg((4, 4), "special"),), "float32")
    yield Case("norm/float32/transposed/p1_dim0", partial(torch.norm, p=1, dim=0),
               (Arg((3, 4), layout=TRANSPOSED),), "float32")


def _variance_cases():
    """unbiased / correction arguments and degenerate sample counts."""
    for name in ("var", "std", "var_mean"):
        function = getattr(torch, name)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/3x4/biased" % (name, dtype), partial(function, unbiased=False),
                       (Arg((3, 4)),), dtype)
            yield Case("%s/%s/3x4/dim1_biased" % (name, dtype), lambda a, f=function: f(a, 1, unbiased=False),
                       (Arg((3, 4)),), dtype)
            yield Case("%s/%s/3x4/correction0" % (name, dtype),
                       lambda a, f=function: f(a, dim=(1,), correction=0), (Arg((3, 4)),), dtype)
            yield Case("%s/%s/1x4/one_sample" % (name, dtype), lambda a, f=function: f(a, 0),
                       (Arg((1, 4)),), dtype)


def _aminmax_cases():
    for dtype in ALL:
        yield Case("aminmax/%s/3x4/full" % dtype, torch.aminmax, (Arg((3, 4)),), dtype)
    yield Case("aminmax/float32/3x4/dim1", partial(torch.aminmax, dim=1), (Arg((3, 4)),), "float32")
    yield Case("aminmax/int64/3x4/keepdim", partial(torch.aminmax, dim=0, keepdim=True),
               (Arg((3, 4)),), "int64")
    yield Case("aminmax/float32/empty/full", torch.aminmax, (Arg((0, 3)),), "float32")
    for keepdim in (True, False):
        yield Case("aminmax/float32/0d/dim0_keepdim_%s" % keepdim, partial(torch.aminmax, dim=0, keepdim=keepdim),
                   (Arg(()),), "float32")


def _kthvalue_cases():
    for dtype in NUMERIC:
        yield Case("kthvalue/%s/3x4/k2" % dtype, lambda a: torch.kthvalue(a, 2), (Arg((3, 4)),), dtype)
    yield Case("kthvalue/float32/3x4/dim0_keepdim", lambda a: torch.kthvalue(a, 3, 0, True),
               (Arg((3, 4)),), "float32")
    yield Case("kthvalue/float32/3x4/k_too_large", lambda a: torch.kthvalue(a, 5), (Arg((3, 4)),), "float32")


def _summation_order_cases():
    """Layouts that pick upstream's cascade-sum loops (contiguous inner / outer, vectorized or
    scalar, multi-level accumulators for long rows), its float32 2-norm kernels (last-dim
    lanes or one fused running sum) and the last-dim softmax's vectorized row sum."""
    shapes = (
        ("1000/full", (1000,), CONTIGUOUS, None), ("33x17/dim0", (33, 17), CONTIGUOUS, 0),
        ("17x33/dim1", (17, 33), CONTIGUOUS, 1), ("4x5x6/dims02", (4, 5, 6), CONTIGUOUS, (0, 2)),
        ("9x37/transposed_dim1", (9, 37), TRANSPOSED, 1), ("5x40/stepped_full", (5, 40), STEPPED, None),
    )
    for tag, shape, layout, dim in shapes:
        for dtype in ("float32", "float64"):
            arg = (Arg(shape, layout=layout),)
            for name, function in (("sum", torch.sum), ("nansum", torch.nansum), ("mean", torch.mean)):
                call = function if dim is None else partial(function, dim=dim)
                yield Case("%s/%s/%s" % (name, dtype, tag), call, arg, dtype)
            norm = torch.linalg.vector_norm if dim is None else partial(torch.linalg.vector_norm, dim=dim)
            yield Case("linalg_vector_norm/%s/%s" % (dtype, tag), norm, arg, dtype)
    for dtype in ("float32", "float64"):
        yield Case("nansum/%s/special_300" % dtype, torch.nansum, (Arg((300,), "special"),), dtype)
        for name in ("softmax", "log_softmax"):
            yield Case("%s/%s/5x37/dim1" % (name, dtype), partial(getattr(torch, name), dim=1),
                       (Arg((5, 37)),), dtype)


def cases():
    yield from _summation_order_cases()
    for op in REDUCTIONS:
        yield from _reduction_cases(op)
    yield from _norm_cases()
    yield from _variance_cases()
    yield from _aminmax_cases()
    yield from _kthvalue_cases()
