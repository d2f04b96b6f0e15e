"""Views, joins and splits, gather/scatter/index ops, sorting, and other
shape-manipulating ops.

Most of these move values without arithmetic, so one canonical form of each
op is swept over every dtype and the variants run on float32 (or the dtype
named in the entry).
"""

import torch
import torch.nn.functional as F

from cases.common import ALL, NUMERIC, inplace, into_out
from spec import EXPANDED, OFFSET, STEPPED, TRANSPOSED, Arg, Case


def index(shape, bound):
    """An int64 index input with values in [0, bound)."""
    return Arg(shape, ("index", bound), "int64")


def mask(shape):
    return Arg(shape, "mask", "bool")


A34 = Arg((3, 4))
A234 = Arg((2, 3, 4))

# Row-wise permutations for scatter, so no two sources write the same place.
PERMUTATION_ROWS = [[2, 0, 3, 1], [1, 3, 0, 2], [3, 2, 1, 0]]


def _scatter_index():
    return torch.tensor(PERMUTATION_ROWS)[:, :2]


# (name "op/variant", call, inputs) swept over every dtype.
DTYPE_SWEEP = (
    ("view/3x4_as_4x3", lambda a: a.view(4, 3), (A34,)),
    ("reshape/3x4_as_2x6", lambda a: a.reshape(2, -1), (A34,)),
    ("permute/2x3x4", lambda a: a.permute(2, 0, 1), (A234,)),
    ("transpose/3x4", lambda a: torch.transpose(a, 0, 1), (A34,)),
    ("t/3x4", torch.t, (A34,)),
    ("mT/0d_is_itself", lambda a: (a.mT, a.mT is a), (Arg(()),)),
    ("mH/0d_is_itself", lambda a: (a.mH, a.mH is a), (Arg(()),)),
    ("mT/1d_refused", lambda a: a.mT, (Arg((3,)),)),
    ("mH/1d_refused", lambda a: a.mH, (Arg((3,)),)),
    ("expand/3x1", lambda a: a.expand(3, 4), (Arg((3, 1)),)),
    ("narrow/3x4", lambda a: torch.narrow(a, 1, 1, 2), (A34,)),
    ("select/3x4", lambda a: torch.select(a, 0, 1), (A34,)),
    ("as_strided/3x4", lambda a: torch.as_strided(a, (2, 2), (1, 2), 1), (A34,)),
    ("as_strided/overlapping_output_of_transposed", lambda a: a.t().as_strided((3, 3), (0, 1), 1), (A34,)),
    ("as_strided/of_a_slice", lambda a: a[1:].as_strided((2, 2), (2, 3)), (A34,)),
    ("unsqueeze/3x4", lambda a: torch.unsqueeze(a, 1), (A34,)),
    ("squeeze/3x1x4", torch.squeeze, (Arg((3, 1, 4)),)),
    ("unfold/3x4", lambda a: a.unfold(1, 2, 1), (A34,)),
    ("contiguous/transposed", lambda a: (a.contiguous(), a.contiguous().stride()),
     (Arg((3, 4), layout=TRANSPOSED),)),
    ("flatten/2x3x4", torch.flatten, (A234,)),
    ("clone/transposed", torch.clone, (Arg((3, 4), layout=TRANSPOSED),)),
    ("movedim/2x3x4", lambda a: torch.movedim(a, 0, -1), (A234,)),
    ("cat/3x4", lambda a, b: torch.cat([a, b], 1), (A34, Arg((3, 2)))),
    ("stack/3x4", lambda a, b: torch.stack([a, b]), (A34, A34)),
    ("split/5x4", lambda a: torch.split(a, 2), (Arg((5, 4)),)),
    ("chunk/5x4", lambda a: torch.chunk(a, 2), (Arg((5, 4)),)),
    ("unbind/3x4", torch.unbind, (A34,)),
    ("gather/3x4", lambda a, i: torch.gather(a, 1, i), (A34, index((3, 5), 4))),
    ("scatter/3x4", lambda a, b: a.scatter(1, _scatter_index(), b), (A34, Arg((3, 2)))),
    ("index_select/3x4", lambda a, i: torch.index_select(a, 0, i), (A34, index((5,), 3))),
    ("masked_fill/3x4", lambda a, m: a.masked_fill(m, 1), (A34, mask((3, 4)))),
    ("masked_select/3x4", torch.masked_select, (A34, mask((3, 4)))),
    ("take/3x4", torch.take, (A34, index((2, 3), 12))),
    ("flip/3x4", lambda a: torch.flip(a, (0,)), (A34,)),
    ("roll/3x4", lambda a: torch.roll(a, 1, 1), (A34,)),
    ("repeat/3x4", lambda a: a.repeat(2, 1), (A34,)),
    ("tile/3x4", lambda a: torch.tile(a, (2,)), (A34,)),
    ("repeat_interleave/3x4", lambda a: torch.repeat_interleave(a, 2, dim=0), (A34,)),
    ("tril/3x4", torch.tril, (A34,)),
    ("triu/3x4", torch.triu, (A34,)),
    ("sort/3x4", torch.sort, (A34,)),
    ("argsort/3x4", torch.argsort, (A34,)),
    ("topk/3x4", lambda a: torch.topk(a, 2), (A34,)),
    ("unique/3x4", torch.unique, (A34,)),
    ("nonzero/3x4", torch.nonzero, (A34,)),
    ("diag/3x4", torch.diag, (A34,)),
    ("diagonal/3x4", torch.diagonal, (A34,)),
    ("broadcast_to/4", lambda a: torch.broadcast_to(a, (3, 4)), (Arg((4,)),)),
    ("rot90/3x4", torch.rot90, (A34,)),
    ("index_put/3x4", lambda a, i, v: a.index_put((i,), v), (A34, index((2,), 3), Arg((4,)))),
    ("masked_scatter/3x4", lambda a, m, s: a.masked_scatter(m, s), (A34, mask((3, 4)), Arg((12,)))),
    # overwrites: nothing of self's old value reaches the result (swin_v2's zero_ of a bias)
    ("zero_/3x4", inplace("zero_"), (A34,)),
    ("zero_/transposed", inplace("zero_"), (Arg((3, 4), layout=TRANSPOSED),)),
    ("fill_/scalar", lambda a: inplace("fill_")(a, 2), (A34,)),
    ("fill_/tensor_value", lambda a, v: inplace("fill_")(a, v), (A34, Arg(()))),
)

# (name, call, inputs, dtype): variants on one dtype.
VARIANTS = (
    # views
    ("view/minus_one", lambda a: a.view(-1), (A34,), "float32"),
    ("view/3d", lambda a: a.view(2, -1, 2), (A34,), "float32"),
    ("view/transposed_incompatible", lambda a: a.view(12), (Arg((3, 4), layout=TRANSPOSED),), "float32"),
    ("view/bad_size", lambda a: a.view(5, -1), (A34,), "float32"),
    ("view/0d", lambda a: a.view(1, 1), (Arg(()),), "float32"),
    ("view/empty", lambda a: a.view(3, 0), (Arg((0, 3)),), "int64"),
    ("view/size_object", lambda a: a.view(torch.Size([6, 2])), (A34,), "float32"),
    ("view_as/3x4", lambda a, b: a.view_as(b), (A34, Arg((2, 6))), "float32"),
    ("reshape/transposed_copies", lambda a: a.reshape(12), (Arg((3, 4), layout=TRANSPOSED),), "float32"),
    ("reshape/0d", lambda a: torch.reshape(a, (1, 1)), (Arg(()),), "int64"),
    ("reshape/two_minus_one", lambda a: a.reshape(-1, -1), (A34,), "float32"),
    ("reshape_as/3x4", lambda a, b: a.reshape_as(b), (A34, Arg((6, 2))), "float32"),
    ("permute/negative_dims", lambda a: torch.permute(a, (-1, 0, -2)), (A234,), "float32"),
    ("permute/wrong_count", lambda a: a.permute(1, 0), (A234,), "float32"),
    ("transpose/negative_dims", lambda a: a.transpose(-1, -3), (A234,), "float32"),
    ("transpose/bad_dim", lambda a: a.transpose(0, 5), (A34,), "float32"),
    ("transpose/inplace", inplace("transpose_"), (A34, 0, 1), "float32"),
    ("swapaxes/2x3x4", lambda a: torch.swapaxes(a, 0, 2), (A234,), "float32"),
    ("swapdims/2x3x4", lambda a: a.swapdims(1, 2), (A234,), "int64"),
    ("T/3x4", lambda a: a.T, (A34,), "float32"),
    ("mT/2x3x4", lambda a: a.mT, (A234,), "float32"),
    ("mH/2x3x4", lambda a: a.mH, (A234,), "float32"),
    ("t/1d", torch.t, (Arg((4,)),), "float32"),
    ("t/0d", torch.t, (Arg(()),), "float32"),
    ("t/3d", torch.t, (A234,), "float32"),
    ("t/inplace", inplace("t_"), (A34,), "float32"),
    ("expand/minus_one", lambda a: a.expand(-1, 4), (Arg((3, 1)),), "float32"),
    ("expand/new_dims", lambda a: a.expand(2, 3, 4), (Arg((3, 1)),), "float32"),
    ("expand/incompatible", lambda a: a.expand(2, 4), (A34,), "float32"),
    ("expand_as/3x1", lambda a, b: a.expand_as(b), (Arg((3, 1)), A34), "float32"),
    ("narrow/negative_start", lambda a: a.narrow(0, -2, 2), (A34,), "float32"),
    ("narrow/length0", lambda a: a.narrow(1, 4, 0), (A34,), "float32"),
    ("narrow/out_of_range", lambda a: a.narrow(1, 3, 2), (A34,), "float32"),
    ("select/negative", lambda a: a.select(1, -1), (A34,), "float32"),
    ("select/out_of_range", lambda a: a.select(0, 3), (A34,), "float32"),
    ("as_strided/method_offset", lambda a: a.as_strided((2, 3), (3, 1), 2), (Arg((3, 4), layout=OFFSET),),
     "float32"),
    ("unsqueeze/negative", lambda a: a.unsqueeze(-1), (A34,), "float32"),
    ("unsqueeze/0d", lambda a: a.unsqueeze(0), (Arg(()),), "float32"),
    ("unsqueeze/inplace", inplace("unsqueeze_"), (A34, 0), "float32"),
    ("squeeze/dim", lambda a: a.squeeze(1), (Arg((3, 1, 4)),), "float32"),
    ("squeeze/non_unit_dim", lambda a: a.squeeze(0), (Arg((3, 1, 4)),), "float32"),
    ("squeeze/inplace", inplace("squeeze_"), (Arg((3, 1, 4)),), "float32"),
    ("squeeze/0d", torch.squeeze, (Arg(()),), "float32"),
    ("squeeze/bad_dim", lambda a: a.squeeze(3), (Arg((3, 1, 4)),), "float32"),
    ("unfold/step2", lambda a: a.unfold(0, 2, 2), (Arg((5, 3)),), "float32"),
    ("unfold/1d", lambda a: a.unfold(0, 3, 2), (Arg((8,)),), "int64"),
    ("unfold/too_large", lambda a: a.unfold(1, 5, 1), (A34,), "float32"),
    ("flatten/start1", lambda a: torch.flatten(a, 1), (A234,), "float32"),
    ("flatten/range01", lambda a: a.flatten(0, 1), (A234,), "float32"),
    ("flatten/0d", torch.flatten, (Arg(()),), "float32"),
    ("flatten/bad_range", lambda a: a.flatten(2, 1), (A234,), "float32"),
    ("unflatten/3x4", lambda a: a.unflatten(1, (2, 2)), (A34,), "float32"),
    ("moveaxis/2x3x4", lambda a: torch.moveaxis(a, (0, 1), (2, 0)), (A234,), "float32"),
    ("detach/3x4", torch.detach, (A34,), "float32"),
    ("metadata/transposed_strides", lambda a: (a.t().stride(), a.t().is_contiguous(), a.is_contiguous()),
     (A34,), "float32"),
    ("metadata/slice_offset", lambda a: (a[1:, 2:].storage_offset(), a[:, ::2].stride()), (A34,), "float32"),
    ("metadata/expanded_strides", lambda a: (a.stride(), a.is_contiguous()), (Arg((3, 4), layout=EXPANDED),),
     "float32"),
    ("metadata/permuted_contiguous", lambda a: a.permute(2, 0, 1).contiguous().stride(), (A234,), "float32"),
    # joins and splits
    ("cat/dim0", lambda a, b: torch.cat([a, b]), (A34, Arg((2, 4))), "float32"),
    ("cat/dim_neg", lambda a, b, c: torch.cat((a, b, c), dim=-1), (A34, Arg((3, 1)), A34), "float32"),
    ("cat/promotion", lambda a, b: torch.cat([a, b]), (Arg((2, 3), dtype="int32"), Arg((1, 3))), "float32"),
    ("cat/legacy_empty", lambda a, b: torch.cat([a, b]), (A34, Arg((0,))), "float32"),
    ("cat/noncontiguous", lambda a, b: torch.cat([a, b], 1),
     (Arg((3, 4), layout=TRANSPOSED), Arg((3, 4), layout=STEPPED)), "float32"),
    ("cat/out", into_out(lambda a, b, **kw: torch.cat([a, b], **kw)), (A34, A34), "float32"),
    ("cat/concat_alias", lambda a, b: torch.concat([a, b], 1), (A34, A34), "int64"),
    ("cat/mismatch", lambda a, b: torch.cat([a, b]), (A34, Arg((2, 3))), "float32"),
    ("cat/empty_list", lambda: torch.cat([]), (), "float32"),
    ("stack/dim1", lambda a, b: torch.stack([a, b], 1), (A34, A34), "float32"),
    ("stack/dim_neg", lambda a, b: torch.stack((a, b), dim=-1), (A34, A34), "float32"),
    ("stack/out", into_out(lambda a, b, **kw: torch.stack([a, b], **kw)), (A34, A34), "float32"),
    ("stack/mismatch", lambda a, b: torch.stack([a, b]), (A34, Arg((4, 3))), "float32"),
    ("hstack/3x4", lambda a, b: torch.hstack([a, b]), (A34, A34), "float32"),
    ("vstack/1d", lambda a, b: torch.vstack([a, b]), (Arg((4,)), Arg((4,))), "float32"),
    ("dstack/3x4", lambda a, b: torch.dstack([a, b]), (A34, A34), "float32"),
    ("atleast_1d/0d_and_2d", lambda a, b: (torch.atleast_1d(a), torch.atleast_1d(b)), (Arg(()), A34), "float32"),
    ("atleast_2d/0d_1d_3d", lambda a, b, c: torch.atleast_2d(a, b, c), (Arg(()), Arg((4,)), A234), "float32"),
    ("atleast_3d/0d_1d_2d_3d", lambda a, b, c, d: torch.atleast_3d([a, b, c, d]),
     (Arg(()), Arg((4,)), A34, A234), "int64"),
    ("column_stack/1d", lambda a, b: torch.column_stack([a, b]), (Arg((4,)), Arg((4, 2))), "float32"),
    ("split/sizes", lambda a: torch.split(a, [1, 3], dim=1), (A34,), "float32"),
    ("split/method_dim1", lambda a: a.split(3, 1), (A34,), "float32"),
    ("split/bad_sizes", lambda a: a.split([1, 1], 0), (A34,), "float32"),
    ("split_with_sizes/3x4", lambda a: a.split_with_sizes([2, 1]), (A34,), "float32"),
    ("tensor_split/sections", lambda a: torch.tensor_split(a, 3, dim=1), (A34,), "float32"),
    ("tensor_split/indices", lambda a: torch.tensor_split(a, [1, 2]), (A34,), "int64"),
    ("chunk/uneven_dim1", lambda a: a.chunk(3, dim=1), (A34,), "float32"),
    ("chunk/zero", lambda a: a.chunk(0), (A34,), "float32"),
    ("unbind/dim1", lambda a: torch.unbind(a, 1), (A34,), "float32"),
    # gather / scatter / index ops
    ("gather/dim0", lambda a, i: torch.gather(a, 0, i), (A34, index((2, 4), 3)), "float32"),
    ("gather/method_neg_dim", lambda a, i: a.gather(-1, i), (A34, index((3, 2), 4)), "float32"),
    ("gather/out", into_out(lambda a, i, **kw: torch.gather(a, 1, i, **kw)), (A34, index((3, 2), 4)), "float32"),
    ("gather/out_of_range", lambda a, i: torch.gather(a, 1, i), (A34, index((3, 2), 9)), "float32"),
    ("scatter/value", lambda a: a.scatter(1, _scatter_index(), 0.5), (A34,), "float32"),
    ("scatter/fn_dim0", lambda a, b: torch.scatter(a, 0, torch.tensor([[2, 0, 1, 1]]), b),
     (A34, Arg((1, 4))), "float32"),
    ("scatter/inplace", lambda a, b: inplace("scatter_")(a, 1, _scatter_index(), b), (A34, Arg((3, 2))),
     "float32"),
    ("scatter/reduce_add", lambda a, b: a.scatter(1, _scatter_index(), b, reduce="add"), (A34, Arg((3, 2))),
     "float32"),
    ("scatter/reduce_multiply", lambda a, b: a.scatter(1, _scatter_index(), b, reduce="multiply"),
     (A34, Arg((3, 2))), "float32"),
    ("scatter_add/duplicates", lambda a, i, b: torch.scatter_add(a, 1, i, b), (A34, index((3, 5), 4),
                                                                              Arg((3, 5))), "float32"),
    ("scatter_add/int64", lambda a, i, b: a.scatter_add(0, i, b), (A34, index((4, 4), 3), Arg((4, 4))), "int64"),
    ("scatter_add/inplace", lambda a, i, b: inplace("scatter_add_")(a, 1, i, b),
     (A34, index((3, 2), 4), Arg((3, 2))), "float32"),
    ("index_select/dim1", lambda a, i: a.index_select(1, i), (A34, index((3,), 4)), "float32"),
    ("index_select/out", into_out(lambda a, i, **kw: torch.index_select(a, 0, i, **kw)),
     (A34, index((2,), 3)), "float32"),
    ("index_select/int32_index", lambda a, i: a.index_select(0, i), (A34, Arg((2,), ("index", 3), "int32")),
     "float32"),
    ("index_select/out_of_range", lambda a, i: a.index_select(0, i), (A34, index((2,), 7)), "float32"),
    ("index_add/3x4", lambda a, i, s: torch.index_add(a, 0, i, s), (A34, index((4,), 3), Arg((4, 4))),
     "float32"),
    ("index_add/alpha", lambda a, i, s: a.index_add(1, i, s, alpha=2), (A34, index((2,), 4), Arg((3, 2))),
     "int64"),
    ("index_add/inplace", lambda a, i, s: inplace("index_add_")(a, 0, i, s), (A34, index((2,), 3), Arg((2, 4))),
     "float32"),
    ("index_copy/3x4", lambda a, s: a.index_copy(0, torch.tensor([2, 0]), s), (A34, Arg((2, 4))), "float32"),
    ("index_fill/3x4", lambda a: a.index_fill(1, torch.tensor([0, 3]), -1.5), (A34,), "float32"),
    ("index_put/accumulate", lambda a, i, v: a.index_put((i,), v, accumulate=True),
     (A34, index((5,), 3), Arg((4,))), "float32"),
    ("index_put/inplace_2d", lambda a, v: inplace("index_put_")(a, (torch.tensor([0, 2]), torch.tensor([1, 3])), v),
     (A34, Arg((2,))), "float32"),
    ("masked_fill/tensor_value", lambda a, m, v: a.masked_fill(m, v), (A34, mask((3, 4)), Arg(())), "float32"),
    ("masked_fill/bcast_mask", lambda a, m: torch.masked_fill(a, m, -2.0), (A34, mask((4,))), "float32"),
    ("masked_fill/inplace", lambda a, m: inplace("masked_fill_")(a, m, 7), (A34, mask((3, 4))), "int64"),
    ("masked_fill/float_into_int", lambda a, m: a.masked_fill(m, 2.5), (A34, mask((3, 4))), "int64"),
    ("masked_fill/int_mask", lambda a, m: a.masked_fill(m, 0), (A34, Arg((3, 4), dtype="int64")), "float32"),
    ("masked_select/bcast", lambda a, m: a.masked_select(m), (A34, mask((4,))), "float32"),
    ("take_along_dim/3x4", lambda a, i: torch.take_along_dim(a, i, 1), (A34, index((3, 2), 4)), "float32"),
    # sorting and selection
    ("sort/dim0_descending", lambda a: torch.sort(a, 0, descending=True), (A34,), "float32"),
    ("sort/stable", lambda a: torch.sort(a, stable=True), (Arg((3, 8)),), "int64"),
    ("sort/special", torch.sort, (Arg((4, 4), "special"),), "float32"),
    ("sort/method_values", lambda a: a.sort(-1).values, (A34,), "float32"),
    ("sort/indices_attr", lambda a: a.sort(-1).indices, (A34,), "int32"),
    ("sort/0d", torch.sort, (Arg(()),), "float32"),
    ("argsort/descending", lambda a: torch.argsort(a, dim=0, descending=True), (A34,), "float32"),
    ("msort/3x4", torch.msort, (A34,), "float32"),
    ("topk/smallest_dim0", lambda a: torch.topk(a, 2, dim=0, largest=False), (A34,), "float32"),
    ("topk/method", lambda a: a.topk(3, sorted=True), (A34,), "int64"),
    ("topk/k_too_large", lambda a: torch.topk(a, 5), (A34,), "float32"),
    ("topk/special", lambda a: torch.topk(a, 3), (Arg((4, 4), "special"),), "float32"),
    ("tril/diagonal_pos", lambda a: torch.tril(a, 1), (A34,), "float32"),
    ("tril/batched", lambda a: a.tril(-1), (A234,), "float32"),
    ("tril/inplace", inplace("tril_"), (A34,), "float32"),
    ("triu/diagonal_neg", lambda a: torch.triu(a, diagonal=-1), (A34,), "float32"),
    ("triu/1d", torch.triu, (Arg((4,)),), "float32"),
    ("flip/both", lambda a: a.flip(0, 1), (A34,), "float32"),
    ("fliplr/3x4", torch.fliplr, (A34,), "float32"),
    ("flipud/3x4", torch.flipud, (A34,), "float32"),
    ("roll/flattened", lambda a: torch.roll(a, 5), (A34,), "float32"),
    ("roll/multi", lambda a: torch.roll(a, (1, -2), (0, 1)), (A34,), "float32"),
    ("rot90/k2", lambda a: torch.rot90(a, 2, (0, 1)), (A34,), "float32"),
    ("rot90/neg", lambda a: torch.rot90(a, -1, (1, 2)), (A234,), "float32"),
    ("repeat/new_dims", lambda a: a.repeat(2, 1, 1), (A34,), "float32"),
    ("repeat/too_few", lambda a: a.repeat(2), (A34,), "float32"),
    ("tile/2d", lambda a: a.tile((2, 3)), (Arg((2, 2)),), "float32"),
    ("repeat_interleave/flat", lambda a: a.repeat_interleave(2), (A34,), "float32"),
    ("repeat_interleave/tensor_repeats", lambda a: a.repeat_interleave(torch.tensor([1, 0, 2]), dim=0),
     (A34,), "float32"),
    ("repeat_interleave/counts_only", torch.repeat_interleave, (Arg((4,), ("index", 3), "int64"),), "int64"),
    ("nonzero/as_tuple", lambda a: torch.nonzero(a, as_tuple=True), (A34,), "float32"),
    ("nonzero/empty", torch.nonzero, (Arg((0, 3)),), "float32"),
    ("nonzero/0d", torch.nonzero, (Arg(()),), "int64"),
    ("argwhere/3x4", torch.argwhere, (A34,), "int64"),
    ("unique/inverse_counts", lambda a: torch.unique(a, return_inverse=True, return_counts=True),
     (Arg((3, 4), "small"),), "int64"),
    ("unique/dim0", lambda a: torch.unique(torch.cat([a, a[:1]]), dim=0), (A34,), "float32"),
    ("unique/unsorted_method", lambda a: a.unique(sorted=False).sort().values, (Arg((10,), "small"),), "int64"),
    ("unique_consecutive/counts", lambda a: torch.unique_consecutive(a.repeat_interleave(2), return_counts=True),
     (Arg((6,), "small"),), "int64"),
    ("diag/1d", torch.diag, (Arg((3,)),), "float32"),
    ("diag/offset", lambda a: torch.diag(a, 1), (A34,), "float32"),
    ("diagonal/offset_dims", lambda a: torch.diagonal(a, -1, 1, 2), (A234,), "float32"),
    ("diag_embed/2x3", torch.diag_embed, (Arg((2, 3)),), "float32"),
    ("diagflat/2x2", torch.diagflat, (Arg((2, 2)),), "float32"),
    ("searchsorted/3x4", lambda s, v: torch.searchsorted(torch.sort(s).values, v), (A34, Arg((3, 2))), "float32"),
    ("searchsorted/right", lambda s, v: torch.searchsorted(torch.sort(s).values, v, right=True),
     (Arg((8,), "small"), Arg((5,), "small")), "int64"),
    ("bucketize/1d", lambda v, b: torch.bucketize(v, torch.sort(b).values), (A34, Arg((5,))), "float32"),
    ("histc/3x4", lambda a: torch.histc(a, bins=4, min=-4, max=4), (A34,), "float32"),
    ("bincount/plain", torch.bincount, (Arg((10,), ("index", 5), "int64"),), "int64"),
    ("bincount/weights", lambda i, w: torch.bincount(i, w, 6), (Arg((10,), ("index", 5), "int64"), Arg((10,))),
     "float32"),
    ("broadcast_tensors/3", lambda a, b: torch.broadcast_tensors(a, b), (Arg((3, 1)), Arg((4,))), "float32"),
    ("meshgrid/ij", lambda a, b: torch.meshgrid(a, b, indexing="ij"), (Arg((3,)), Arg((2,))), "float32"),
    ("meshgrid/xy", lambda a, b: torch.meshgrid(a, b, indexing="xy"), (Arg((3,)), Arg((2,))), "int64"),
    ("cartesian_prod/2", torch.cartesian_prod, (Arg((3,)), Arg((2,))), "int64"),
    ("combinations/4", torch.combinations, (Arg((4,)),), "float32"),
    ("atleast_2d/1d", torch.atleast_2d, (Arg((4,)),), "float32"),
    ("one_hot/index", lambda i: F.one_hot(i, 5), (Arg((4,), ("index", 5), "int64"),), "int64"),
    ("pad/constant", lambda a: F.pad(a, (1, 2), value=0.5), (A34,), "float32"),
    ("pad/2d_int", lambda a: F.pad(a, (1, 1, 2, 0)), (A34,), "int64"),
    ("pad/reflect", lambda a: F.pad(a, (2, 1), mode="reflect"), (Arg((1, 2, 5)),), "float32"),
    ("pad/replicate", lambda a: F.pad(a, (1, 2), mode="replicate"), (Arg((1, 2, 5)),), "float32"),
    ("embedding/3x4", lambda i, w: F.embedding(i, w), (index((2, 3), 5), Arg((5, 4))), "float32"),
    ("embedding/3x4", lambda i, w: F.embedding(i, w), (index((2, 3), 5), Arg((5, 4))), "float64"),
    ("embedding/padding_idx", lambda i, w: F.embedding(i, w, padding_idx=1), (index((3, 4), 5), Arg((5, 4))),
     "float32"),
    ("embedding/padding_idx", lambda i, w: F.embedding(i, w, padding_idx=1), (index((3, 4), 5), Arg((5, 4))),
     "float64"),
)


# Tensor.view(dtype) between element sizes: the same bytes, so compared bit-exactly (a float64
# reference would reinterpret other bytes).
VIEW_DTYPE = (
    ("dtype_wider", lambda a: a.view(torch.float64), (A34,)),
    ("dtype_narrower", lambda a: a.view(torch.uint8), (A34,)),
    ("dtype_narrower_offset", lambda a: a[1:, 1:].view(torch.int16), (A34,)),
    ("dtype_0d", lambda a: a.view(torch.int16), (Arg(()),)),
    ("dtype_transposed", lambda a: a.view(torch.float64), (Arg((3, 4), layout=TRANSPOSED),)),
    ("dtype_odd_last", lambda a: a[:, :3].view(torch.float64), (A34,)),
    ("dtype_odd_offset", lambda a: a[:, 1:3].view(torch.float64), (A34,)),
    ("dtype_odd_row_stride", lambda a: a[:, :2].view(torch.float64), (Arg((3, 5)),)),
    ("dtype_even_row_stride", lambda a: a[:, :2].view(torch.float64), (A34,)),
    ("dtype_empty", lambda a: a.view(torch.float64), (Arg((0, 4)),)),
)


def cases():
    for name, call, args in VIEW_DTYPE:
        yield Case("view/float32/" + name, call, args, "float32", exact=True)
    for name, call, args in DTYPE_SWEEP:
        op, variant = name.split("/", 1)
        dtypes = NUMERIC if op in ("topk", "sort", "argsort") else ALL
        for dtype in dtypes:
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    for name, call, args, dtype in VARIANTS:
        op, variant = name.split("/", 1)
        yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    yield from _tril_indices()


def _tril_indices():
    for name in ("tril_indices", "triu_indices"):
        function = getattr(torch, name)
        yield Case("%s/int64/3x4" % name, lambda f=function: f(3, 4), (), "int64")
        yield Case("%s/int64/offset" % name, lambda f=function: f(4, 3, 1), (), "int64")
