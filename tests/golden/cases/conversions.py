"""dtype conversions, Python scalar extraction, tensor metadata and printing."""

import operator

import torch

from cases.common import ALL, FLOATS, INTS
from spec import TRANSPOSED, Arg, Case

CONVERSION_METHODS = ("float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte", "bool")

# (variant, call) on one 0-dim or 3x4 input, swept over every dtype.
SCALAR_SWEEP = (
    ("item/0d", lambda a: a.item(), ()),
    ("item/element", lambda a: a[1, 2].item(), (3, 4)),
    ("tolist/3x4", lambda a: a.tolist(), (3, 4)),
    ("tolist/0d", lambda a: a.tolist(), ()),
    ("int/0d", int, ()),
    ("float/0d", float, ()),
    ("bool/0d", bool, ()),
    ("repr/3x4", repr, (3, 4)),
    ("repr/0d", repr, ()),
    ("metadata/3x4", lambda a: (a.dim(), a.ndim, a.numel(), a.nelement(), len(a), a.size(), a.size(1),
                                a.shape, a.dtype, a.is_floating_point(), a.element_size(), a.stride()), (3, 4)),
    ("metadata/tensor_dim", lambda a: (a.size(torch.tensor(1)), a.stride(torch.tensor(-1))), (3, 4)),
)

VARIANTS = (
    ("index/int64_0d", operator.index, (Arg((), dtype="int64"),)),
    ("index/float32_0d", operator.index, (Arg(()),)),
    ("int/float32_truncates", lambda a: int(a * 0 + 2.75), (Arg(()),)),
    ("item/multi_element", lambda a: a.item(), (Arg((3, 4)),)),
    ("bool/multi_element", bool, (Arg((3, 4)),)),
    ("float/multi_element", float, (Arg((3, 4)),)),
    ("len/0d", len, (Arg(()),)),
    ("iter/0d", list, (Arg(()),)),
    ("iter/rows", list, (Arg((3, 4)),)),
    ("tolist/transposed", lambda a: a.tolist(), (Arg((3, 4), layout=TRANSPOSED),)),
    ("tolist/special", lambda a: a.tolist(), (Arg((4, 4), "special"),)),
    ("repr/special", repr, (Arg((4, 4), "special"),)),
    ("repr/empty", repr, (Arg((0, 3)),)),
    ("repr/large", repr, (Arg((40, 30)),)),
    ("repr/float64", repr, (Arg((2, 3), dtype="float64"),)),
    ("str/int64", str, (Arg((2, 3), dtype="int64"),)),
    ("metadata/device", lambda a: (str(a.device), a.requires_grad, a.is_leaf, torch.is_tensor(a)), (Arg((2,)),)),
    ("metadata/numel_fn", torch.numel, (Arg((2, 3, 4)),)),
    ("metadata/is_floating_point_fn", torch.is_floating_point, (Arg((2,), dtype="int32"),)),
    ("type/dtype", lambda a: a.type(torch.float64), (Arg((2, 3)),)),
    ("type/string", lambda a: a.type("torch.IntTensor"), (Arg((2, 3)),)),
    ("type/query", lambda a: a.type(), (Arg((2, 3)),)),
    ("type_as/int64", lambda a, b: a.type_as(b), (Arg((2, 3)), Arg((1,), dtype="int64"))),
    ("to/other_tensor", lambda a, b: a.to(b), (Arg((2, 3)), Arg((1,), dtype="float64"))),
    ("to/device", lambda a: a.to("cpu") is a, (Arg((2, 3)),)),
    ("to/same_dtype_is_self", lambda a: a.to(torch.float32) is a, (Arg((2, 3)),)),
    ("to/copy", lambda a: (a.to(dtype=torch.float32, copy=True) is a), (Arg((2, 3)),)),
    ("result_type/tensor_tensor", torch.result_type, (Arg((2,), dtype="int32"), Arg((2,), dtype="float16"))),
    ("result_type/tensor_scalar", lambda a: torch.result_type(a, 2.5), (Arg((2,), dtype="int64"),)),
    ("promote_types/int32_float16", lambda: torch.promote_types(torch.int32, torch.float16), ()),
    ("promote_types/uint8_int8", lambda: torch.promote_types(torch.uint8, torch.int8), ()),
    ("can_cast/float_to_int", lambda: (torch.can_cast(torch.float32, torch.int32),
                                       torch.can_cast(torch.int32, torch.float32)), ()),
    ("equal/same", lambda a: torch.equal(a, a.clone()), (Arg((3, 4)),)),
    ("equal/different", torch.equal, (Arg((3, 4)), Arg((3, 4)))),
    ("allclose/3x4", lambda a: torch.allclose(a, a + 1e-9), (Arg((3, 4)),)),
    ("isclose/3x4", lambda a, b: torch.isclose(a, b, atol=0.5), (Arg((3, 4)), Arg((3, 4)))),
    ("isclose/nan_equal", lambda a: torch.isclose(a, a, equal_nan=True), (Arg((4, 4), "special"),)),
)


def cases():
    for case in _all_cases():
        # dtype conversions lay their results out as their inputs (memory_format=preserve)
        case.strides = case.name.split("/")[0] in ("to", "type", "type_as") + CONVERSION_METHODS
        yield case


def _all_cases():
    for source in ALL:
        for target in ALL:
            # Negative or fractional values are valid only for some targets:
            # float -> unsigned of a negative value is undefined behaviour in C++.
            domain = "real" if target in FLOATS + ("int64", "int32", "int16") else "cast"
            yield Case("to/%s/%s" % (source, target), lambda a, t=target: a.to(getattr(torch, t)),
                       (Arg((3, 4), domain),), source)
    for name in CONVERSION_METHODS:
        for source in ("float32", "int64"):
            yield Case("%s/%s/method" % (name, source), lambda a, m=name: getattr(a, m)(),
                       (Arg((3, 4), "cast"),), source)
    for source in FLOATS:
        for target in FLOATS + INTS[:2]:
            if target != source:
                domain = "special" if target in FLOATS else "real"
                yield Case("to/%s/%s_special" % (source, target), lambda a, t=target: a.to(getattr(torch, t)),
                           (Arg((4, 4), domain),), source)
    for name, call, shape in SCALAR_SWEEP:
        op, variant = name.split("/", 1)
        for dtype in ALL:
            yield Case("%s/%s/%s" % (op, dtype, variant), call, (Arg(shape),), dtype)
    for name, call, args in VARIANTS:
        op, variant = name.split("/", 1)
        yield Case("%s/float32/%s" % (op, variant), call, args, "float32")
