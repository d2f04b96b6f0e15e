"""Elementwise binary, unary and ternary ops, swept over dtypes, shapes and call forms.

Rather than the full cross product, each op gets three sweeps:
  dtypes  every applicable dtype, function form, a few shapes;
  shapes  0-dim, empty, broadcasting and non-contiguous inputs on one dtype;
  forms   method, keyword, in-place, out=, operators and Python scalars on a
          float and an integer/bool dtype;
plus mixed-dtype type-promotion pairs and nan/inf/-0.0 inputs.
"""

import operator
from functools import partial

import torch

from cases.common import (ALL, FLOATS, INTS, NUMERIC, FLOAT_OUT, inplace, into_out,
                          main_dtype, method, second_dtype)
from spec import CHANNELS_LAST, CONTIGUOUS, EXPANDED, OFFSET, STEPPED, TRANSPOSED, Arg, Case

# Binary input pairs: tag -> ((lhs shape, layout), (rhs shape, layout)).
PAIRS = {
    "3x4": (((3, 4), CONTIGUOUS), ((3, 4), CONTIGUOUS)),
    "row": (((3, 4), CONTIGUOUS), ((4,), CONTIGUOUS)),
    "outer": (((3, 1), CONTIGUOUS), ((1, 4), CONTIGUOUS)),
    "3d": (((2, 3, 4), CONTIGUOUS), ((3, 1), CONTIGUOUS)),
    "0d_lhs": (((), CONTIGUOUS), ((2, 3), CONTIGUOUS)),
    "0d_rhs": (((2, 3), CONTIGUOUS), ((), CONTIGUOUS)),
    "0d": (((), CONTIGUOUS), ((), CONTIGUOUS)),
    "empty": (((0, 3), CONTIGUOUS), ((3,), CONTIGUOUS)),
    "transposed": (((3, 4), TRANSPOSED), ((3, 4), CONTIGUOUS)),
    "stepped": (((3, 4), STEPPED), ((4,), CONTIGUOUS)),
    "offset": (((2, 3), OFFSET), ((2, 3), TRANSPOSED)),
    "expanded": (((3, 4), EXPANDED), ((3, 4), CONTIGUOUS)),
    "mismatch": (((3,), CONTIGUOUS), ((4,), CONTIGUOUS)),  # broadcasting error
}

# (lhs dtype, rhs dtype, pair): promotion between categories, and with 0-dim
# tensors, which only participate in promotion when of a higher category.
PROMOTIONS = (
    ("float32", "int64", "3x4"), ("int64", "float32", "3x4"), ("int32", "int64", "0d_rhs"),
    ("int8", "uint8", "3x4"), ("bool", "int32", "3x4"), ("float16", "float32", "0d_rhs"),
    ("bfloat16", "float16", "3x4"), ("int64", "float64", "0d_rhs"), ("float32", "float64", "3x4"),
    ("uint8", "int64", "0d_rhs"), ("int16", "float16", "row"), ("int32", "int64", "3x4"),
)

SCALARS = (("int", 2), ("float", 1.5), ("bool", True))


class Binary:
    def __init__(self, name, dtypes, lhs="real", rhs="real", symbol=None, other="other",
                 variants=(), has_inplace=True, scalar_other=True):
        self.name = name
        self.dtypes = dtypes
        self.lhs = lhs
        self.rhs = rhs
        self.other = other  # keyword name of the second operand
        self.variants = variants  # (tag, extra keyword arguments)
        self.has_inplace = has_inplace
        self.scalar_other = scalar_other  # whether `other` may be a Python number
        self.operator = getattr(operator, symbol) if symbol else None
        # a += b etc.; comparisons have no augmented form.
        self.ioperator = getattr(operator, "i" + symbol.rstrip("_"), None) if symbol else None


BINARY_OPS = (
    Binary("add", ALL, symbol="add", variants=(("alpha", {"alpha": 2}), ("alpha_float", {"alpha": 0.5}))),
    Binary("sub", ALL, symbol="sub", variants=(("alpha", {"alpha": 2}),)),
    Binary("mul", ALL, symbol="mul"),
    Binary("div", ALL, rhs="nonzero", symbol="truediv",
           variants=(("trunc", {"rounding_mode": "trunc"}), ("floor", {"rounding_mode": "floor"}))),
    Binary("remainder", NUMERIC, rhs="nonzero", symbol="mod"),
    Binary("fmod", NUMERIC, rhs="nonzero"),
    Binary("floor_divide", NUMERIC, rhs="nonzero", symbol="floordiv"),
    Binary("pow", NUMERIC, lhs="small", rhs="exponent", symbol="pow", other="exponent"),
    Binary("atan2", FLOAT_OUT, scalar_other=False),
    Binary("hypot", FLOATS, scalar_other=False),
    Binary("copysign", FLOAT_OUT),
    Binary("maximum", ALL, has_inplace=False, scalar_other=False),
    Binary("minimum", ALL, has_inplace=False, scalar_other=False),
    Binary("fmax", NUMERIC, has_inplace=False, scalar_other=False),
    Binary("fmin", NUMERIC, has_inplace=False, scalar_other=False),
    Binary("xlogy", FLOAT_OUT, rhs="pos"),
    Binary("logaddexp", FLOATS, has_inplace=False, scalar_other=False),
    Binary("nextafter", ("float32", "float64"), scalar_other=False),
    Binary("eq", ALL, symbol="eq"),
    Binary("ne", ALL, symbol="ne"),
    Binary("lt", ALL, symbol="lt"),
    Binary("le", ALL, symbol="le"),
    Binary("gt", ALL, symbol="gt"),
    Binary("ge", ALL, symbol="ge"),
    Binary("logical_and", ALL, scalar_other=False),
    Binary("logical_or", ALL, scalar_other=False),
    Binary("logical_xor", ALL, scalar_other=False),
    Binary("bitwise_and", INTS + ("bool",), symbol="and_"),
    Binary("bitwise_or", INTS + ("bool",), symbol="or_"),
    Binary("bitwise_xor", INTS + ("bool",), symbol="xor"),
    Binary("bitwise_left_shift", INTS, rhs="exponent", symbol="lshift"),
    Binary("bitwise_right_shift", INTS, rhs="exponent", symbol="rshift"),
)


def _binary_cases(op):
    function = getattr(torch, op.name)

    def case(form, call, pair, dtype, dtypes=(None, None), domains=None):
        (lshape, llayout), (rshape, rlayout) = PAIRS[pair]
        lhs_domain, rhs_domain = domains or (op.lhs, op.rhs)
        label = dtype if dtypes == (None, None) else "+".join(dtypes)
        args = (Arg(lshape, lhs_domain, dtypes[0], llayout), Arg(rshape, rhs_domain, dtypes[1], rlayout))
        return Case("%s/%s/%s/%s" % (op.name, label, pair, form), call, args, dtype)

    def scalar_case(form, call, dtype):
        return Case("%s/%s/3x4/%s" % (op.name, dtype, form), call, (Arg((3, 4), op.lhs),), dtype)

    for dtype in op.dtypes:
        yield case("fn", function, "3x4", dtype)
        yield case("fn", function, "row", dtype)
        yield case("method", method(op.name), "outer", dtype)
        for tag, kwargs in op.variants:
            yield case("fn_" + tag, partial(function, **kwargs), "3x4", dtype)

    main = main_dtype(op.dtypes)
    for pair in PAIRS:
        if pair not in ("3x4", "row"):
            yield case("fn", function, pair, main)
    if op.has_inplace:
        yield case("inplace", inplace(op.name + "_"), "outer", main)     # (3,1) cannot hold (3,4)
        yield case("inplace", inplace(op.name + "_"), "expanded", main)  # writes overlap

    for dtype in dict.fromkeys((main, second_dtype(op.dtypes))):
        yield case("kw", lambda a, b: function(input=a, **{op.other: b}), "3x4", dtype)
        if op.has_inplace:
            yield case("inplace", inplace(op.name + "_"), "3x4", dtype)
            yield case("inplace", inplace(op.name + "_"), "row", dtype)
        yield case("out", into_out(function), "3x4", dtype)
        yield case("out", into_out(function), "outer", dtype)
        for tag, kwargs in op.variants:
            yield case("method_" + tag, partial(method(op.name), **kwargs), "row", dtype)
            yield case("inplace_" + tag, partial(inplace(op.name + "_"), **kwargs), "3x4", dtype)
            yield case("out_" + tag, into_out(partial(function, **kwargs)), "3x4", dtype)
        if op.scalar_other:
            for tag, scalar in SCALARS:
                yield scalar_case("scalar_" + tag, lambda a, s=scalar: function(a, s), dtype)
        if op.operator:
            yield case("operator", op.operator, "3x4", dtype)
            yield case("operator", op.operator, "0d_rhs", dtype)
            for tag, scalar in SCALARS:
                yield scalar_case("rscalar_" + tag, lambda a, s=scalar: op.operator(s, a), dtype)
        if op.ioperator:
            yield case("ioperator", _augmented(op.ioperator), "row", dtype)

    for lhs, rhs, pair in PROMOTIONS:
        if lhs in op.dtypes and rhs in op.dtypes:
            yield case("fn", function, pair, lhs, dtypes=(lhs, rhs))
    for dtype in FLOATS:
        if dtype in op.dtypes:
            yield case("fn_special", function, "3x4", dtype, domains=("special", "special"))


def _augmented(ioperator):
    """``a op= b``: returns a and whether the statement kept the same object."""
    def call(a, b):
        result = ioperator(a, b)
        return result, result is a
    return call


class Unary:
    def __init__(self, name, dtypes, domain="real", has_inplace=True, has_out=True, variants=()):
        self.name = name
        self.dtypes = dtypes
        self.domain = domain
        self.has_inplace = has_inplace
        self.has_out = has_out
        self.variants = variants


UNARY_OPS = (
    Unary("exp", FLOAT_OUT, "small"), Unary("exp2", FLOAT_OUT, "small"), Unary("expm1", FLOAT_OUT, "small"),
    Unary("log", FLOAT_OUT, "pos"), Unary("log2", FLOAT_OUT, "pos"), Unary("log10", FLOAT_OUT, "pos"),
    Unary("log1p", FLOAT_OUT, "pos"), Unary("sqrt", FLOAT_OUT), Unary("rsqrt", FLOAT_OUT, "pos"),
    Unary("sin", FLOAT_OUT), Unary("cos", FLOAT_OUT), Unary("tan", FLOAT_OUT),
    Unary("asin", FLOAT_OUT, "unit"), Unary("acos", FLOAT_OUT, "unit"), Unary("atan", FLOAT_OUT),
    Unary("sinh", FLOAT_OUT, "small"), Unary("cosh", FLOAT_OUT, "small"), Unary("tanh", FLOAT_OUT),
    Unary("asinh", FLOAT_OUT), Unary("acosh", FLOAT_OUT, "pos"), Unary("atanh", FLOAT_OUT, "unit"),
    Unary("sigmoid", FLOAT_OUT), Unary("erf", FLOAT_OUT), Unary("erfc", FLOAT_OUT),
    Unary("erfinv", FLOAT_OUT, "unit"), Unary("lgamma", FLOAT_OUT, "pos"),
    Unary("digamma", FLOAT_OUT, "pos"), Unary("i0", FLOAT_OUT), Unary("sinc", FLOAT_OUT),
    Unary("logit", FLOAT_OUT, "prob"), Unary("deg2rad", FLOAT_OUT), Unary("rad2deg", FLOAT_OUT),
    Unary("reciprocal", FLOAT_OUT, "nonzero"),
    Unary("abs", ALL), Unary("neg", ALL), Unary("sign", ALL), Unary("sgn", ALL),
    Unary("floor", NUMERIC), Unary("ceil", NUMERIC), Unary("trunc", NUMERIC), Unary("frac", FLOATS),
    Unary("round", NUMERIC, variants=(("decimals", {"decimals": 2}),)),
    Unary("square", ALL), Unary("relu", NUMERIC, has_out=False), Unary("angle", FLOAT_OUT, has_inplace=False),
    Unary("nan_to_num", NUMERIC, variants=(("values", {"nan": 0.5, "posinf": 2.0, "neginf": -3.0}),)),
    Unary("bitwise_not", INTS + ("bool", "float32")),
    Unary("logical_not", ALL),
    Unary("isnan", ALL, has_inplace=False, has_out=False),
    Unary("isinf", ALL, has_inplace=False, has_out=False),
    Unary("isfinite", ALL, has_inplace=False, has_out=False),
    Unary("isposinf", ALL, has_inplace=False), Unary("isneginf", ALL, has_inplace=False),
    Unary("signbit", ALL, has_inplace=False),
    Unary("positive", NUMERIC, has_inplace=False, has_out=False),
)

UNARY_SHAPES = (
    ("0d", (), CONTIGUOUS), ("empty", (0,), CONTIGUOUS), ("empty2x0", (2, 0), CONTIGUOUS),
    ("7", (7,), CONTIGUOUS), ("2x3x4", (2, 3, 4), CONTIGUOUS), ("transposed", (3, 4), TRANSPOSED),
    ("stepped", (3, 4), STEPPED), ("offset", (3, 4), OFFSET),
)


def _unary_cases(op):
    function = getattr(torch, op.name)

    def case(form, call, dtype, tag="3x4", shape=(3, 4), layout=CONTIGUOUS, domain=None):
        args = (Arg(shape, domain or op.domain, None, layout),)
        return Case("%s/%s/%s/%s" % (op.name, dtype, tag, form), call, args, dtype)

    for dtype in op.dtypes:
        yield case("fn", function, dtype)
        for tag, kwargs in op.variants:
            yield case("fn_" + tag, partial(function, **kwargs), dtype)
    main = main_dtype(op.dtypes)
    for tag, shape, layout in UNARY_SHAPES:
        yield case("fn", function, main, tag, shape, layout)
    yield case("method", method(op.name), main)
    yield case("kw", lambda a: function(input=a), main)
    if op.has_out:
        yield case("out", into_out(function), main)
    if op.has_inplace:
        for dtype in dict.fromkeys((main, second_dtype(op.dtypes))):
            yield case("inplace", inplace(op.name + "_"), dtype)
        yield case("inplace", inplace(op.name + "_"), main, "transposed", (3, 4), TRANSPOSED)
    for dtype in FLOATS:
        if dtype in op.dtypes:
            yield case("fn", function, dtype, "special", (4, 4), domain="special")


def _ternary_cases():
    """where, lerp, addcmul, addcdiv and the clamp family."""
    def case(name, call, dtype, args):
        return Case(name, call, args, dtype)

    mask = Arg((3, 4), "mask", "bool")
    for dtype in ALL:
        yield case("where/%s/3x4/fn" % dtype, torch.where, dtype, (mask, Arg((3, 4)), Arg((3, 4))))
    yield case("where/float32/bcast/fn", torch.where, "float32",
               (Arg((3, 1), "mask", "bool"), Arg((4,)), Arg(())))
    yield case("where/float32/3x4/method", lambda c, a, b: a.where(c, b), "float32",
               (mask, Arg((3, 4)), Arg((3, 4))))
    yield case("where/float32/3x4/scalar_other", lambda c, a: torch.where(c, a, 0.5), "float32",
               (mask, Arg((3, 4))))
    yield case("where/int32+float32/3x4/fn", torch.where, "int32",
               (mask, Arg((3, 4), dtype="int32"), Arg((3, 4), dtype="float32")))
    yield case("where/bool/3x4/condition_only", lambda c: torch.where(c), "bool", (mask,))
    yield case("where/float32/3x4/int_condition", torch.where, "float32",
               (Arg((3, 4), dtype="int64"), Arg((3, 4)), Arg((3, 4))))
    yield case("where/float32/3x4/out", into_out(torch.where), "float32", (mask, Arg((3, 4)), Arg((3, 4))))

    for dtype in FLOATS + ("int64",):
        yield case("lerp/%s/3x4/scalar_weight" % dtype, lambda a, b: torch.lerp(a, b, 0.3), dtype,
                   (Arg((3, 4)), Arg((3, 4))))
        yield case("lerp/%s/3x4/tensor_weight" % dtype, torch.lerp, dtype,
                   (Arg((3, 4)), Arg((3, 4)), Arg((3, 4), "prob")))
    yield case("lerp/float32/bcast/tensor_weight", torch.lerp, "float32",
               (Arg((3, 4)), Arg((4,)), Arg((3, 1), "prob")))
    yield case("lerp/float32/3x4/method", lambda a, b: a.lerp(b, 0.75), "float32", (Arg((3, 4)), Arg((3, 4))))
    yield case("lerp/float32/3x4/inplace", lambda a, b: inplace("lerp_")(a, b, 0.75), "float32",
               (Arg((3, 4)), Arg((3, 4))))
    yield case("lerp/float32/3x4/out", into_out(lambda a, b, **kw: torch.lerp(a, b, 0.25, **kw)),
               "float32", (Arg((3, 4)), Arg((3, 4))))

    for name, domain in (("addcmul", "real"), ("addcdiv", "nonzero")):
        function = getattr(torch, name)
        args = (Arg((3, 4)), Arg((3, 4)), Arg((3, 4), domain))
        for dtype in NUMERIC:
            yield case("%s/%s/3x4/fn" % (name, dtype), function, dtype, args)
        for dtype in ("float32", "int64"):
            yield case("%s/%s/3x4/value" % (name, dtype), partial(function, value=2), dtype, args)
        yield case("%s/float32/3x4/value_float" % name, partial(function, value=0.5), "float32", args)
        yield case("%s/float32/bcast/fn" % name, function, "float32",
                   (Arg((3, 4)), Arg((4,)), Arg((3, 1), domain)))
        yield case("%s/float32/3x4/method" % name, method(name), "float32", args)
        yield case("%s/float32/3x4/inplace" % name, inplace(name + "_"), "float32", args)
        yield case("%s/float32/3x4/out" % name, into_out(function), "float32", args)

    bounds = (("both", {"min": -1.0, "max": 1.5}), ("min", {"min": -0.5}), ("max", {"max": 0.25}),
              ("int_bounds", {"min": -2, "max": 3}), ("inverted", {"min": 1.0, "max": -1.0}))
    for dtype in NUMERIC:
        yield case("clamp/%s/3x4/fn" % dtype, partial(torch.clamp, min=-2, max=2), dtype, (Arg((3, 4)),))
    for tag, kwargs in bounds:
        for dtype in ("float32", "int64"):
            yield case("clamp/%s/3x4/%s" % (dtype, tag), partial(torch.clamp, **kwargs), dtype, (Arg((3, 4)),))
    one = (Arg((3, 4), "special"),)
    yield case("clamp/float32/special/fn", partial(torch.clamp, min=-1.0, max=1.0), "float32", one)
    yield case("clamp/float32/3x4/positional", lambda a: torch.clamp(a, -1, 1), "float32", (Arg((3, 4)),))
    yield case("clamp/float32/3x4/tensor_bounds", lambda a, lo, hi: torch.clamp(a, lo, hi), "float32",
               (Arg((3, 4)), Arg((4,), "small"), Arg((3, 1), "pos")))
    yield case("clamp/float32/3x4/method", lambda a: a.clamp(max=0.5), "float32", (Arg((3, 4)),))
    yield case("clamp/float32/3x4/inplace", lambda a: inplace("clamp_")(a, -0.5, 0.5), "float32",
               (Arg((3, 4)),))
    yield case("clamp/float32/3x4/out", into_out(partial(torch.clamp, min=0.0)), "float32", (Arg((3, 4)),))
    yield case("clamp/float32/3x4/no_bounds", torch.clamp, "float32", (Arg((3, 4)),))  # error
    yield case("clip/float32/3x4/fn", partial(torch.clip, min=-1, max=1), "float32", (Arg((3, 4)),))
    yield case("clamp_min/float32/3x4/fn", lambda a: torch.clamp_min(a, 0.5), "float32", (Arg((3, 4)),))
    yield case("clamp_max/int64/3x4/fn", lambda a: torch.clamp_max(a, 2), "int64", (Arg((3, 4)),))


# Layouts that decide which elements upstream's cpu_kernel_vec gives its vectorized
# (SLEEF) lambda and which its scalar (libm) one: whole blocks of 2 vectors along the
# innermost coalesced dimension go vectorized, the rest of each row scalar.
VECTOR_TAIL_PAIRS = {
    "37": (((37,), CONTIGUOUS), ((37,), CONTIGUOUS)),            # 32 vectorized + 5 scalar
    "5x13": (((5, 13), CONTIGUOUS), ((5, 13), CONTIGUOUS)),      # coalesced to 65: 64 + 1
    "5x13_row": (((5, 13), CONTIGUOUS), ((13,), CONTIGUOUS)),    # rows of 13: 8 + 5 (float64)
    "37_0d": (((37,), CONTIGUOUS), ((), CONTIGUOUS)),            # broadcast scalar operand
    "17x3_col": (((17, 3), TRANSPOSED), ((17, 1), CONTIGUOUS)),  # inner dim the first one
    "5x13_transposed": (((5, 13), TRANSPOSED), ((5, 13), CONTIGUOUS)),  # no common order: scalar
}


def _vector_tail_cases():
    for pair, ((lshape, llayout), (rshape, rlayout)) in VECTOR_TAIL_PAIRS.items():
        for dtype in ("float32", "float64"):
            args = (Arg(lshape, layout=llayout), Arg(rshape, layout=rlayout))
            yield Case("logaddexp/%s/%s/fn" % (dtype, pair), torch.logaddexp, args, dtype)
    for dtype in ("float32", "float64"):
        yield Case("logaddexp/%s/37_special/fn" % dtype, torch.logaddexp,
                   (Arg((37,), "special"), Arg((37,), "special")), dtype)
    yield Case("logaddexp/float32+float64/37/fn", torch.logaddexp,
               (Arg((37,), dtype="float32"), Arg((37,), dtype="float64")), "float64")


def _integer_pow_overflow_cases():
    """Integer powers past the type's range wrap (modulo 2**bits) as upstream's do."""
    bases = [3, -3, 7, 100, 127, 2, -2, 0, 1, -1]
    for dtype, exponent in (("int8", 31), ("int16", 31), ("int32", 31), ("int64", 63), ("uint8", 31)):
        values = [b % 256 for b in bases] if dtype == "uint8" else bases
        base = lambda dtype=dtype, values=values: torch.tensor(values, dtype=getattr(torch, dtype))
        yield Case("pow/%s/overflow_wraps/scalar" % dtype, lambda base=base, e=exponent: base() ** e, (), dtype)
        yield Case("pow/%s/overflow_wraps/tensor" % dtype,
                   lambda base=base, e=exponent: base() ** torch.full_like(base(), e), (), dtype)


# Results' layouts (compared through their strides): upstream's TensorIterator allocates
# an output in its inputs' layout. Inputs: tag -> ((shape, layout, dtype or None), ...).
LAYOUT_UNARY = {
    "transposed": ((3, 4), TRANSPOSED), "channels_last": ((2, 3, 4, 5), CHANNELS_LAST),
    "expanded": ((3, 4), EXPANDED), "stepped": ((3, 4), STEPPED),
    "channels_last_1x1": ((2, 3, 1, 1), CHANNELS_LAST), "empty_transposed": ((0, 3), TRANSPOSED),
    "empty_channels_last": ((2, 3, 0, 4), CHANNELS_LAST),
}
LAYOUT_PAIRS = {
    "transposed_both": (((3, 4), TRANSPOSED), ((3, 4), TRANSPOSED)),
    "transposed+contiguous": (((3, 4), TRANSPOSED), ((3, 4), CONTIGUOUS)),
    "contiguous+transposed": (((3, 4), CONTIGUOUS), ((3, 4), TRANSPOSED)),
    "channels_last_both": (((2, 3, 4, 5), CHANNELS_LAST), ((2, 3, 4, 5), CHANNELS_LAST)),
    "channels_last+contiguous": (((2, 3, 4, 5), CHANNELS_LAST), ((2, 3, 4, 5), CONTIGUOUS)),
    "contiguous+channels_last": (((2, 3, 4, 5), CONTIGUOUS), ((2, 3, 4, 5), CHANNELS_LAST)),
    "channels_last+bias": (((2, 3, 4, 5), CHANNELS_LAST), ((3, 1, 1), CONTIGUOUS)),
    "bias+channels_last": (((3, 1, 1), CONTIGUOUS), ((2, 3, 4, 5), CHANNELS_LAST)),
    "channels_last+0d": (((2, 3, 4, 5), CHANNELS_LAST), ((), CONTIGUOUS)),
    "expanded+transposed": (((3, 4), EXPANDED), ((3, 4), TRANSPOSED)),
    "column+transposed": (((3, 1), CONTIGUOUS), ((3, 4), TRANSPOSED)),
    "stepped+transposed": (((4, 3), STEPPED), ((4, 3), TRANSPOSED)),
    "empty_transposed+contiguous": (((3, 0), TRANSPOSED), ((3, 0), CONTIGUOUS)),
    "empty_channels_last+0d": (((2, 3, 0, 4), CHANNELS_LAST), ((), CONTIGUOUS)),
    "int64_transposed+float32": (((3, 4), TRANSPOSED, "int64"), ((3, 4), CONTIGUOUS, "float32")),
    "int64_stepped+float32_transposed": (((4, 3), STEPPED, "int64"), ((4, 3), TRANSPOSED, "float32")),
}
LAYOUT_UNARY_OPS = (
    ("exp", torch.exp), ("sigmoid", torch.sigmoid), ("abs", torch.abs), ("neg", torch.neg),
    ("sqrt", torch.sqrt), ("isnan", torch.isnan), ("sin", torch.sin), ("relu", torch.relu),
    ("mul_scalar", lambda a: a * 1.25), ("add_int_scalar", lambda a: a + 2), ("gt_scalar", lambda a: a > 0),
    ("to_float64", lambda a: a.to(torch.float64)), ("double", lambda a: a.double()),
    ("to_int32", lambda a: a.to(torch.int32)),
    ("type_as_int64", lambda a: a.type_as(torch.zeros(1, dtype=torch.int64))),
    ("clone", torch.clone), ("clamp", lambda a: a.clamp(-1, 1)), ("pow_scalar", lambda a: a ** 2),
)
LAYOUT_BINARY_OPS = (
    ("add", torch.add), ("mul", torch.mul), ("div", torch.div), ("eq", torch.eq), ("lt", torch.lt),
    ("atan2", torch.atan2), ("logaddexp", torch.logaddexp), ("maximum", torch.maximum),
    ("where", lambda a, b: torch.where(a > 0, a, b)), ("where_mask_second", lambda a, b: torch.where(b > 0, b, a)),
    ("addcmul", lambda a, b: torch.addcmul(a, b, b)), ("lerp", lambda a, b: torch.lerp(a, b.to(a.dtype), 0.25)),
    ("nextafter", lambda a, b: torch.nextafter(a, b.to(a.dtype))),
)


def _layout_cases():
    def arg(shape, layout, dtype=None):
        return Arg(shape, "pos", dtype, layout)

    for op, call in LAYOUT_UNARY_OPS:
        for tag, (shape, layout) in LAYOUT_UNARY.items():
            yield Case("%s/float32/layout_%s/fn" % (op, tag), call, (arg(shape, layout),), "float32")
    for op, call in LAYOUT_BINARY_OPS:
        for tag, (lhs, rhs) in LAYOUT_PAIRS.items():
            if op in ("lerp", "nextafter") and "int64" in tag:
                continue  # integer inputs are refused; their layout says nothing
            yield Case("%s/float32/layout_%s/fn" % (op, tag), call, (arg(*lhs), arg(*rhs)), "float32")


def _comparing_strides(cases):
    for case in cases:
        case.strides = True
        yield case


def cases():
    yield from _comparing_strides(_all_cases())


def _all_cases():
    yield from _vector_tail_cases()
    yield from _integer_pow_overflow_cases()
    for op in BINARY_OPS:
        yield from _binary_cases(op)
    for op in UNARY_OPS:
        yield from _unary_cases(op)
    yield from _ternary_cases()
    yield from _layout_cases()
