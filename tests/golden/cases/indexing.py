"""Indexing through the subscript operator: basic, advanced, boolean masks,
assignment, and out-of-range errors."""

import torch

from cases.common import ALL
from spec import TRANSPOSED, Arg, Case

A34 = Arg((3, 4))
A234 = Arg((2, 3, 4))


def assign(key, value):
    """``a[key] = value`` with a constant value; returns a."""
    def call(a):
        a[key] = value
        return a
    return call


def assign_input(key):
    """``a[key] = v`` where v is the second input; returns a."""
    def call(a, v):
        a[key] = v
        return a
    return call


def assign_indexed(key_of):
    """``a[key] = v`` where the key is computed from the other inputs; returns a."""
    def call(a, *rest):
        key, value = key_of(*rest)
        a[key] = value
        return a
    return call


# (variant, call, inputs) swept over every dtype.
GETITEM_SWEEP = (
    ("int", lambda a: a[1], (A34,)),
    ("slice", lambda a: a[1:3], (A34,)),
    ("element", lambda a: a[2, -1], (A34,)),
    ("tensor_index", lambda a, i: a[i], (A34, Arg((2, 2), ("index", 3), "int64"))),
    ("bool_mask", lambda a, m: a[m], (A34, Arg((3, 4), "mask", "bool"))),
)

GETITEM_VARIANTS = (
    # A short list holding a sequence, slice, None or Ellipsis is a tuple of indices (legacy NumPy).
    ("list_as_tuple_lists", lambda a: a[[[0, 2, 1], [1, 3, 3]]], (A34,)),
    ("list_as_tuple_slice", lambda a: a[[[0, 2], slice(None)]], (A34,)),
    ("list_as_tuple_none", lambda a: a[[None, 1]], (A34,)),
    ("list_as_tuple_ellipsis", lambda a: a[[Ellipsis, 2]], (A234,)),
    ("list_of_ints", lambda a: a[[0, 2]], (A34,)),
    ("list_of_32_lists", lambda a: a[[[0]] * 32], (A34,)),
    # Python data as an index becomes int64 (floats truncated) unless it is a mask.
    ("list_of_floats", lambda a: a[[0.2, 2.9]], (A34,)),
    ("list_of_bools", lambda a: a[[True, False, True]], (A34,)),
    ("string", lambda a: a["a"], (A34,)),
    ("list_of_strings", lambda a: a[["a"]], (A34,)),
    ("negative", lambda a: a[-1], (A34,)),
    ("column", lambda a: a[:, 1], (A34,)),
    ("step", lambda a: a[::2, 1::2], (A34,)),
    ("negative_slice", lambda a: a[-2:, :-1], (A34,)),
    ("ellipsis", lambda a: a[..., 0], (A234,)),
    ("ellipsis_step", lambda a: a[..., ::3], (A234,)),
    ("none", lambda a: a[None, 1, :, None], (A34,)),
    ("empty_slice", lambda a: a[2:1], (A34,)),
    ("clamped_slice", lambda a: a[-10:10], (A34,)),
    ("list", lambda a: a[[0, 2]], (A34,)),
    ("two_lists", lambda a: a[[0, 1, 2], [3, 0, 1]], (A34,)),
    ("list_column", lambda a: a[:, [0, 3, 3]], (A34,)),
    ("tensor_pair", lambda a, i, j: a[i, j], (A34, Arg((2,), ("index", 3), "int64"), Arg((2,), ("index", 4), "int64"))),
    ("tensor_broadcast", lambda a, i, j: a[i, j], (A34, Arg((2, 1), ("index", 3), "int64"),
                                                   Arg((3,), ("index", 4), "int64"))),
    ("split_advanced", lambda a, i: a[i, :, i], (A234, Arg((2,), ("index", 2), "int64"))),
    ("0d_tensor_index", lambda a: a[torch.tensor(1)], (A34,)),
    ("negative_tensor_index", lambda a: a[torch.tensor([-1, 0])], (A34,)),
    ("row_mask", lambda a, m: a[m], (A34, Arg((3,), "mask", "bool"))),
    ("mask_and_slice", lambda a, m: a[m, 1:], (A34, Arg((3,), "mask", "bool"))),
    ("true", lambda a: a[True], (A34,)),
    ("0d_ellipsis", lambda a: a[...], (Arg(()),)),
    ("0d_none", lambda a: a[None], (Arg(()),)),
    ("transposed_slice", lambda a: a[1:, ::2], (Arg((3, 4), layout=TRANSPOSED),)),
    ("out_of_range", lambda a: a[5], (A34,)),
    ("column_out_of_range", lambda a: a[:, 9], (A34,)),
    ("tensor_out_of_range", lambda a: a[torch.tensor([0, 7])], (A34,)),
    ("mask_wrong_shape", lambda a, m: a[m], (A34, Arg((4,), "mask", "bool"))),
    ("too_many", lambda a: a[0, 0, 0], (A34,)),
    ("0d_int", lambda a: a[0], (Arg(()),)),
    ("float_index", lambda a: a[1.0], (A34,)),
)

SETITEM_SWEEP = (
    ("int_scalar", assign(1, 1), (A34,)),
    ("slice_tensor", assign_input(slice(0, 2)), (A34, Arg((2, 4)))),
    ("mask_scalar", assign_indexed(lambda m: (m, 0)), (A34, Arg((3, 4), "mask", "bool"))),
    ("index_tensor", assign_indexed(lambda i, v: (i, v)), (A34, Arg((2,), ("index", 3), "int64"), Arg((4,)))),
)


def _augmented_item(a):
    """Augmented assignment on an item and on an advanced index (a read-modify-write)."""
    a[1] += 2
    a[[0, 2]] *= 3
    return a


SETITEM_VARIANTS = (
    ("list_as_tuple_lists", assign([[0, 2], [1, 3]], -1.0), (A34,)),
    ("list_of_floats", assign([0.2, 2.9], -1.0), (A34,)),
    ("element", assign((1, 2), 7.5), (A34,)),
    ("column_bcast", assign_input((slice(None), 1)), (A34, Arg((3,)))),
    ("ellipsis_row", assign_input((Ellipsis, slice(1, None))), (A234, Arg((3,)))),
    ("float_into_int", assign(0, 2.75), (Arg((3, 4), dtype="int64"),)),
    ("0d_tensor_value", assign_input(1), (A34, Arg(()))),
    ("mask_tensor", assign_indexed(lambda m, v: (m, v)), (A34, Arg((3, 4), "mask", "bool"), Arg(()))),
    ("row_mask", assign_indexed(lambda m: (m, -1.0)), (A34, Arg((3,), "mask", "bool"))),
    ("two_lists", assign(([0, 2], [1, 3]), 9.0), (A34,)),
    ("list_duplicates", assign(([0, 0], [1, 1]), 4.0), (A34,)),
    ("step", assign((slice(None), slice(None, None, 2)), 0.0), (A34,)),
    ("transposed", assign((0,), 3.0), (Arg((3, 4), layout=TRANSPOSED),)),
    ("0d", assign((), 5.0), (Arg(()),)),
    ("shape_mismatch", assign_input(0), (A34, Arg((3,)))),
    ("out_of_range", assign(3, 0.0), (A34,)),
    ("augmented", _augmented_item, (A34,)),
)


# Which index dtypes each operator takes (upstream: int64, int32 too for index_add; gather and
# scatter check only a non-empty index), empty and not.
INDEX_DTYPE_OPS = (
    ("gather", lambda a, i: torch.gather(a, 0, i)),
    ("scatter_", lambda a, i: a.clone().scatter_(0, i, 2.0)),
    ("scatter_add_", lambda a, i: a.clone().scatter_add_(0, i, torch.ones(i.shape))),
    ("take", lambda a, i: torch.take(a, i)),
    ("index_fill_", lambda a, i: a.clone().index_fill_(0, i, 2.0)),
    ("index_fill", lambda a, i: a.index_fill(0, i, 2.0)),
    ("index_copy_", lambda a, i: a.clone().index_copy_(0, i, torch.ones(i.shape))),
    ("index_copy", lambda a, i: a.index_copy(0, i, torch.ones(i.shape))),
    ("index_add_", lambda a, i: a.clone().index_add_(0, i, torch.ones(i.shape))),
    ("index_add", lambda a, i: a.index_add(0, i, torch.ones(i.shape))),
    ("index_select", lambda a, i: a.index_select(0, i)),
)


def _index_dtype_cases():
    for name, call in INDEX_DTYPE_OPS:
        for dtype in ("int64", "int32", "int16", "uint8", "bool"):
            for n in (0, 2):
                yield Case("%s/float32/index_%s_%d" % (name, dtype, n),
                           lambda a, call=call, dtype=dtype, n=n: call(a, torch.ones(n, dtype=getattr(torch, dtype))),
                           (Arg((5,)),), "float32")
    for mask in (True, False):
        yield Case("masked_select/float32/0d_mask_%s" % mask,
                   lambda a, mask=mask: torch.masked_select(a, torch.tensor(mask)), (Arg(()),), "float32")


def cases():
    yield from _index_dtype_cases()
    for variant, call, args in GETITEM_SWEEP:
        for dtype in ALL:
            yield Case("getitem/%s/%s" % (dtype, variant), call, args, dtype)
    for variant, call, args in GETITEM_VARIANTS:
        yield Case("getitem/float32/%s" % variant, call, args, "float32")
    for variant, call, args in SETITEM_SWEEP:
        for dtype in ALL:
            yield Case("setitem/%s/%s" % (dtype, variant), call, args, dtype)
    for variant, call, args in SETITEM_VARIANTS:
        yield Case("setitem/float32/%s" % variant, call, args, "float32")
    yield Case("index_put/float32/accumulate_duplicates",
               lambda a, v: a.index_put_((torch.tensor([0, 0, 2]),), v, accumulate=True),
               (A34, Arg((3, 4))), "float32")
