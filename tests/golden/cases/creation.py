"""Factory functions, *_like and new_* methods, and torch.tensor dtype inference."""

import torch

from cases.common import ALL, into_out
from spec import DT, TRANSPOSED, Arg, Case


def layout_only(tensor):
    """Uninitialized memory has no golden value: only shape and dtype are compared."""
    return tensor.shape, tensor.dtype


# (variant, call taking the working dtype) swept over every dtype.
DTYPE_SWEEP = (
    ("zeros/2x3", lambda d: torch.zeros(2, 3, dtype=d)),
    ("ones/2x3", lambda d: torch.ones((2, 3), dtype=d)),
    ("full/2x3", lambda d: torch.full((2, 3), 1, dtype=d)),
    ("empty/2x3", lambda d: layout_only(torch.empty(2, 3, dtype=d))),
    ("arange/5", lambda d: torch.arange(5, dtype=d)),
    ("arange/1_9_2", lambda d: torch.arange(1, 9, 2, dtype=d)),
    ("linspace/0_10_5", lambda d: torch.linspace(0, 10, 5, dtype=d)),
    ("linspace/-1_1_9", lambda d: torch.linspace(-1, 1, 9, dtype=d)),
    ("linspace/-1_1_4", lambda d: torch.linspace(-1, 1, 4, dtype=d)),
    ("linspace/0_1_7", lambda d: torch.linspace(0, 1, 7, dtype=d)),
    # Past one block of two vectors (32 bytes each): vector bases, lanes and the tail element by element.
    ("linspace/-2_2_40", lambda d: torch.linspace(-2, 2, 40, dtype=d)),
    ("linspace/7.1_-3.3_65", lambda d: torch.linspace(7.1, -3.3, 65, dtype=d)),
    ("linspace/0_100_129", lambda d: torch.linspace(0, 100, 129, dtype=d)),
    ("eye/3", lambda d: torch.eye(3, dtype=d)),
    ("tensor/list", lambda d: torch.tensor([[1, 0], [3, 4]], dtype=d)),
    ("scalar_tensor/2", lambda d: torch.scalar_tensor(2, dtype=d)),
)

# (variant, call taking a 2x3 input of the working dtype) swept over every dtype.
LIKE_SWEEP = (
    ("zeros_like/2x3", torch.zeros_like),
    ("ones_like/2x3", torch.ones_like),
    ("full_like/2x3", lambda a: torch.full_like(a, 1)),
    ("empty_like/2x3", lambda a: layout_only(torch.empty_like(a))),
    ("new_zeros/2x3", lambda a: a.new_zeros((2,))),
    ("new_ones/2x3", lambda a: a.new_ones(3, 1)),
    ("new_full/2x3", lambda a: a.new_full((2, 2), 1)),
    ("new_empty/2x3", lambda a: layout_only(a.new_empty((4,)))),
    ("new_tensor/2x3", lambda a: a.new_tensor([1, 0, 1])),
)

# (variant, call) with no inputs: defaults, inference and argument forms.
VARIANTS = (
    ("zeros/default_dtype", lambda: torch.zeros(2, 3)),
    ("zeros/list_size", lambda: torch.zeros([2, 1])),
    ("zeros/size_object", lambda: torch.zeros(torch.Size([3]))),
    ("zeros/0d", lambda: torch.zeros(())),
    ("zeros/empty", lambda: torch.zeros(0, 3)),
    ("zeros/negative", lambda: torch.zeros(-1)),
    ("zeros/out", lambda: into_out(lambda **kw: torch.zeros(2, 2, **kw))()),
    ("ones/size_kw", lambda: torch.ones(size=(2,), dtype=torch.int32)),
    ("full/int_fill", lambda: torch.full((2,), 7)),
    ("full/float_fill", lambda: torch.full((2, 2), 2.5)),
    ("full/bool_fill", lambda: torch.full((3,), True)),
    ("full/float_into_int", lambda: torch.full((2,), 2.5, dtype=torch.int64)),
    ("full/nan", lambda: torch.full((2,), float("nan"))),
    ("empty/0", lambda: layout_only(torch.empty(0))),
    ("empty_strided/2x3", lambda: (torch.empty_strided((2, 3), (1, 2)).stride(),)),
    ("arange/float_step", lambda: torch.arange(0, 1, 0.1)),
    ("arange/negative_step", lambda: torch.arange(10, 0, -2)),
    ("arange/float_start", lambda: torch.arange(0.5, 3)),
    ("arange/float_end", lambda: torch.arange(2.5)),
    ("arange/empty", lambda: torch.arange(0)),
    ("arange/equal_ends", lambda: torch.arange(1, 1)),
    ("arange/float32_steps", lambda: torch.arange(-3, 3, 0.7, dtype=torch.float32)),
    ("arange/float64_steps", lambda: torch.arange(0, 1, 0.1, dtype=torch.float64)),
    ("arange/zero_step", lambda: torch.arange(0, 5, 0)),
    ("arange/wrong_sign", lambda: torch.arange(0, 5, -1)),
    ("arange/out", lambda: into_out(lambda **kw: torch.arange(4, **kw))()),
    ("arange/float32_blocks", lambda: torch.arange(0, 10, 0.3)),
    ("arange/float32_descending", lambda: torch.arange(1.5, -2.5, -0.1)),
    ("arange/float64_blocks", lambda: torch.arange(-1, 100, 0.37, dtype=torch.float64)),
    ("arange/float16_blocks", lambda: torch.arange(0, 10, 0.3, dtype=torch.float16)),
    ("arange/bfloat16_blocks", lambda: torch.arange(-7, 7, 0.013, dtype=torch.bfloat16)),
    ("arange/int64_fraction_step", lambda: torch.arange(0, 1, 0.1, dtype=torch.int64)),
    ("arange/int64_step_truncated", lambda: torch.arange(0, 20, 1.1, dtype=torch.int64)),
    ("arange/int32_float_ends", lambda: torch.arange(-2.5, 7.9, 1.2, dtype=torch.int32)),
    ("arange/int8_wraps", lambda: torch.arange(0, 300, 7, dtype=torch.int8)),
    ("linspace/one_step", lambda: torch.linspace(-2, 2, steps=1)),
    ("linspace/zero_steps", lambda: torch.linspace(0, 1, 0)),
    ("linspace/descending", lambda: torch.linspace(1, 0, 5)),
    ("linspace/many", lambda: torch.linspace(-3.3, 7.1, 50)),
    ("linspace/negative_steps", lambda: torch.linspace(0, 1, -1)),
    ("linspace/1000_float64", lambda: torch.linspace(-10, 1000, 1000, dtype=torch.float64)),
    ("linspace/1000_float32", lambda: torch.linspace(0.1, 0.7, 1000)),
    ("linspace/out_strided", lambda: torch.linspace(-2, 2, 40, out=torch.empty(80)[::2])),
    ("linspace/end_overflow", lambda: torch.linspace(0, 1000, 5, dtype=torch.int8)),
    ("linspace/one_step_end_unchecked", lambda: torch.linspace(0, 1000, 1, dtype=torch.int8)),
    ("linspace/negative_float_into_uint8", lambda: torch.linspace(-3.3, 7.1, 5, dtype=torch.uint8)),
    ("linspace/negative_int_wraps_uint8", lambda: torch.linspace(3, -250, 17, dtype=torch.uint8)),
    ("linspace/half_overflow", lambda: torch.linspace(1.5, 1e5, 5, dtype=torch.float16)),
    ("logspace/0_2_5", lambda: torch.logspace(0, 2, 5)),
    ("logspace/base2", lambda: torch.logspace(-1, 3, 5, base=2)),
    ("logspace/float64_middle_zero", lambda: torch.logspace(-0.04, 0.04, 3, dtype=torch.float64)),
    ("logspace/1000_float32", lambda: torch.logspace(0, 1, 1000)),
    ("logspace/1000_float64", lambda: torch.logspace(-2, 2, 1000, dtype=torch.float64)),
    ("logspace/bfloat16", lambda: torch.logspace(-3.3, 7.1, 33, dtype=torch.bfloat16)),
    ("logspace/uint8_wrapped_end", lambda: torch.logspace(5, -5, 17, base=1.1, dtype=torch.uint8)),
    ("logspace/int8_past_int32", lambda: torch.logspace(20, 38, 19, base=3, dtype=torch.int8)),
    ("logspace/int64_past_int64", lambda: torch.logspace(-20, 20, 15, dtype=torch.int64)),
    ("logspace/int8_one_step_overflow", lambda: torch.logspace(5, -5, 1, dtype=torch.int8)),
    ("logspace/float16_one_step", lambda: torch.logspace(1, 2, 1, dtype=torch.float16)),
    ("logspace/float16_steps", lambda: torch.logspace(1, 2, 3, dtype=torch.float16)),
    ("eye/2x4", lambda: torch.eye(2, 4)),
    ("eye/0", lambda: torch.eye(0)),
    ("eye/m_kw", lambda: torch.eye(3, m=1, dtype=torch.int64)),
    ("tensor/int_inference", lambda: torch.tensor([[1, 2], [3, 4]])),
    ("tensor/float_inference", lambda: torch.tensor([1.5, 2])),
    ("tensor/bool_inference", lambda: torch.tensor([True, False])),
    ("tensor/mixed_inference", lambda: torch.tensor([1, 2.5, True])),
    ("tensor/empty_list", lambda: torch.tensor([])),
    ("tensor/int_scalar", lambda: torch.tensor(3)),
    ("tensor/float_scalar", lambda: torch.tensor(2.5)),
    ("tensor/bool_scalar", lambda: torch.tensor(True)),
    ("tensor/nan_inf", lambda: torch.tensor([float("nan"), float("inf"), -0.0])),
    ("tensor/float32_overflow", lambda: torch.tensor([1e40, -1e40, 1e-50], dtype=torch.float32)),
    ("tensor/float16_rounding", lambda: torch.tensor([0.1, 65519.0, 65520.0, 1e-8], dtype=torch.float16)),
    ("tensor/bfloat16_rounding", lambda: torch.tensor([0.1, 1.00390625, 3e38], dtype=torch.bfloat16)),
    ("tensor/uint8_wrap", lambda: torch.tensor([-1, 256], dtype=torch.uint8)),
    ("tensor/int_overflow", lambda: torch.tensor(2 ** 64)),
    ("tensor/ragged", lambda: torch.tensor([[1], [2, 3]])),
    ("tensor/tuple", lambda: torch.tensor(((1, 2), (3, 4)), dtype=torch.int16)),
    ("tensor/of_0d_tensors", lambda: torch.tensor([torch.tensor(1.5), torch.tensor(2.5)])),
    ("tensor/nested_empty", lambda: torch.tensor([[], []])),
    ("as_tensor/list", lambda: torch.as_tensor([1, 2, 3], dtype=torch.float64)),
    ("scalar_tensor/default", lambda: torch.scalar_tensor(3.5)),
    ("tril_indices/3x3", lambda: torch.tril_indices(3, 3, -1)),
    ("get_default_dtype/default", torch.get_default_dtype),
)


def cases():
    for name, call in DTYPE_SWEEP:
        op, variant = name.split("/", 1)
        for dtype in ALL:
            yield Case("%s/%s/%s" % (op, dtype, variant), call, (DT,), dtype)
    for name, call in LIKE_SWEEP:
        op, variant = name.split("/", 1)
        for dtype in ALL:
            yield Case("%s/%s/%s" % (op, dtype, variant), call, (Arg((2, 3)),), dtype)
    for name, call in VARIANTS:
        op, variant = name.split("/", 1)
        yield Case("%s/default/%s" % (op, variant), call, (), "float32")
    float_input = (Arg((2, 3)),)
    yield Case("ones_like/float32/dtype_kw", lambda a: torch.ones_like(a, dtype=torch.float64), float_input, "float32")
    yield Case("full_like/int64/float_fill", lambda a: torch.full_like(a, 2.5), float_input, "int64")
    yield Case("zeros_like/float32/transposed", lambda a: (torch.zeros_like(a), torch.zeros_like(a).stride()),
               (Arg((2, 3), layout=TRANSPOSED),), "float32")
    yield Case("as_tensor/int64/same_dtype_shares", lambda a: torch.as_tensor(a) is a, float_input, "int64")
    yield Case("as_tensor/int64/converts", lambda a: torch.as_tensor(a, dtype=torch.float32), float_input, "int64")
