"""Calls that upstream rejects: the shim must raise the same exception type.

Shape and dim errors of individual ops live next to those ops; these are the
cross-cutting ones: argument parsing, dtype rules, conversions.
"""

import torch

from spec import Arg, Case

A34 = Arg((3, 4))

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
    ("multinomial/negative", lambda a: torch.multinomial(a - 10, 1), (Arg((4,), "pos"),), "float32"),
)


def cases():
    for name, call, args, dtype in ERRORS:
        op, variant = name.split("/", 1)
        yield Case("%s/%s/error_%s" % (op, dtype, variant), call, args, dtype)
