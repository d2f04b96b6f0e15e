"""Calls that upstream rejects: the shim must raise the same exception type.

Shape and dim errors of individual ops live next to those ops; these are the
cross-cutting ones: argument parsing, dtype rules, conversions.
"""

import torch
import torch.nn.functional as F

from spec import Arg, Case

A34 = Arg((3, 4))
A0 = Arg(())
X4 = Arg((1, 2, 4, 4))
W3 = Arg((2, 2, 3, 3))

ERRORS = (
    ("add/unknown_keyword", lambda a: torch.add(a, a, foo=1), (A34,), "float32"),
    ("add/too_many_args", lambda a: torch.add(a, a, a, a), (A34,), "float32"),
    ("add/int_tensor_float_alpha", lambda a: torch.add(a, a, alpha=0.5), (A34,), "int64"),
    ("add_/int_self_float_other", lambda a, b: a.add_(b), (A34, Arg((3, 4), dtype="float32")), "int64"),
    ("add/string_operand", lambda a: torch.add(a, "x"), (A34,), "float32"),
    ("sum/string_dim", lambda a: torch.sum(a, dim="x"), (A34,), "float32"),
    ("sum/duplicate_dims", lambda a: torch.sum(a, (1, 1)), (A34,), "float32"),
    ("zeros/string_size", lambda: torch.zeros("a"), (), "float32"),
    ("zeros/float_size", lambda: torch.zeros(2.5), (), "float32"),
    ("view/string_size", lambda a: a.view("x"), (A34,), "float32"),
    ("cat/tensor_not_list", lambda a: torch.cat(a), (A34,), "float32"),
    ("stack/empty_list", lambda: torch.stack([]), (), "float32"),
    ("reshape/wrong_numel", lambda a: a.reshape(5), (A34,), "float32"),
    ("sub/bool_bool", lambda a, b: a - b, (A34, A34), "bool"),
    ("neg/bool", lambda a: -a, (A34,), "bool"),
    ("invert/float", lambda a: ~a, (A34,), "float32"),
    ("pow/int_negative_exponent", lambda a: torch.pow(a, -2), (A34,), "int64"),
    ("remainder/int_by_zero", lambda a: torch.remainder(a, 0), (A34,), "int64"),
    ("div/int_floor_by_zero", lambda a: torch.div(a, 0, rounding_mode="floor"), (A34,), "int32"),
    ("div/bad_rounding_mode", lambda a: torch.div(a, 2, rounding_mode="up"), (A34,), "float32"),
    ("gather/index_rank_mismatch", lambda a: torch.gather(a, 1, torch.tensor([0, 1])), (A34,), "float32"),
    ("gather/float_index", lambda a: torch.gather(a, 1, a), (A34,), "float32"),
    ("index_select/2d_index", lambda a: a.index_select(0, torch.tensor([[0]])), (A34,), "float32"),
    ("mm/1d", lambda a: torch.mm(a[0], a[0]), (A34,), "float32"),
    ("mm/dtype_mismatch", lambda a, b: torch.mm(a, b), (A34, Arg((4, 2), dtype="float64")), "float32"),
    ("expand/fewer_dims", lambda a: a.expand(4), (A34,), "float32"),
    ("masked_fill/float_mask", lambda a: a.masked_fill(a, 0.0), (A34,), "float32"),
    ("masked_fill/nonscalar_value", lambda a: a.masked_fill(a > 0, a), (A34,), "float32"),
    ("where/float_condition", lambda a: torch.where(a, a, a), (A34,), "float32"),
    ("softmax/no_dim_kw", lambda a: torch.softmax(a), (A34,), "float32"),
    ("tensor/string", lambda: torch.tensor(["a"]), (), "float32"),
    ("tensor/none", lambda: torch.tensor(None), (), "float32"),
    ("item/empty", lambda a: a.item(), (Arg((0,)),), "float32"),
    ("int/float_nan", lambda: int(torch.tensor(float("nan"))), (), "float32"),
    ("index/float_tensor_index", lambda a: a[a[0, :2]], (A34,), "float32"),
    ("setitem/bad_value", lambda a: a.__setitem__(0, "x"), (A34,), "float32"),
    ("to/string_dtype", lambda a: a.to("float32"), (A34,), "float32"),
    ("type/unknown_string", lambda a: a.type("torch.NoSuchTensor"), (A34,), "float32"),
    ("unsqueeze/bad_dim", lambda a: a.unsqueeze(4), (A34,), "float32"),
    ("permute/repeated_dim", lambda a: a.permute(0, 0), (A34,), "float32"),
    ("bernoulli_/bad_p", lambda a: a.bernoulli_(1.5), (A34,), "float32"),
    ("randint/low_above_high", lambda: torch.randint(5, 2, (3,)), (), "float32"),
    ("size/bool_dim", lambda a: a.size(True), (A34,), "float32"),
    ("size/string_dim", lambda a: a.size("x"), (A34,), "float32"),
    ("stride/float_dim", lambda a: a.stride(1.5), (A34,), "float32"),
    ("stride/none_dim", lambda a: a.stride(None), (A34,), "float32"),
    ("stride/tensor_dim", lambda a: a.stride(a), (A34,), "float32"),
    # Python ints beyond int64 wherever an int is read: upstream's RuntimeError, never a value
    # returned with an exception pending.
    ("size/dim_overflow", lambda a: a.size(10**30), (A34,), "float32"),
    ("stride/dim_overflow", lambda a: a.stride(10**30), (A34,), "float32"),
    ("index/int_overflow", lambda a: a[10**30], (A34,), "float32"),
    ("add/int_overflow", lambda a: torch.add(a, 10**30), (A34,), "int64"),
    ("device/index_overflow", lambda: torch.device("cpu", 10**30), (), "float32"),
    ("Size/numel_overflow", lambda: torch.Size([10**30]).numel(), (), "float32"),
    # Parameters that would divide by zero or read a dim a scalar does not have.
    ("avg_pool2d/divisor_zero", lambda a: F.avg_pool2d(a, 2, divisor_override=0), (X4,), "float32"),
    ("avg_pool2d/stride_zero", lambda a: F.avg_pool2d(a, 2, stride=0), (X4,), "float32"),
    ("max_pool2d/stride_zero", lambda a: F.max_pool2d(a, 2, stride=0), (X4,), "float32"),
    ("max_pool2d/kernel_zero", lambda a: F.max_pool2d(a, 0), (X4,), "float32"),
    ("conv2d/stride_zero", lambda a, w: F.conv2d(a, w, stride=0), (X4, W3), "float32"),
    ("conv2d/dilation_zero", lambda a, w: F.conv2d(a, w, dilation=0), (X4, W3), "float32"),
    ("conv2d/groups_zero", lambda a, w: F.conv2d(a, w, groups=0), (X4, W3), "float32"),
    ("conv_transpose2d/stride_zero", lambda a, w: F.conv_transpose2d(a, w, stride=0), (X4, W3), "float32"),
    ("conv_transpose2d/groups_zero", lambda a, w: F.conv_transpose2d(a, w, groups=0), (X4, W3), "float32"),
    ("unfold/kernel_zero", lambda a: F.unfold(a, 0), (X4,), "float32"),
    ("group_norm/zero_groups", lambda a: torch.group_norm(a, 0), (X4,), "float32"),
    ("flip/0d_bad_dim", lambda a: torch.flip(a, [1]), (A0,), "float32"),
    ("movedim/0d_bad_dim", lambda a: torch.movedim(a, 1, 0), (A0,), "float32"),
    ("take_along_dim/rank_mismatch", lambda a: torch.take_along_dim(a, torch.tensor([0]), 0), (A34,), "float32"),
    ("take_along_dim/0d", lambda a: torch.take_along_dim(a, torch.tensor(0), 0), (A0,), "float32"),
    ("linalg.cross/rank_mismatch", lambda a, b: torch.linalg.cross(a, b), (Arg((2, 3)), Arg((3,))), "float32"),
    ("linalg.cross/0d", lambda a: torch.linalg.cross(a, a), (A0,), "float32"),
    ("size/0d", lambda a: a.size(0), (A0,), "float32"),
    ("stride/0d", lambda a: a.stride(-1), (A0,), "float32"),
    ("multinomial/negative", lambda a: torch.multinomial(a - 10, 1), (Arg((4,), "pos"),), "float32"),
)


def cases():
    for name, call, args, dtype in ERRORS:
        op, variant = name.split("/", 1)
        yield Case("%s/%s/error_%s" % (op, dtype, variant), call, args, dtype)
