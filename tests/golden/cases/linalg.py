"""Matrix products, einsum, F.linear and a few LAPACK-backed functions."""

from functools import partial

import torch
import torch.nn.functional as F

from cases.common import inplace, into_out, method
from spec import STEPPED, TRANSPOSED, Arg, Case

PRODUCT_DTYPES = ("float32", "float64", "int64", "int32", "bfloat16", "float16")


def _products():
    """(name, call, input args) for matrix products; swept over PRODUCT_DTYPES."""
    return (
        ("mm/3x4@4x5", torch.mm, (Arg((3, 4)), Arg((4, 5)))),
        ("bmm/2x3x4@2x4x5", torch.bmm, (Arg((2, 3, 4)), Arg((2, 4, 5)))),
        ("matmul/2d@2d", torch.matmul, (Arg((3, 4)), Arg((4, 2)))),
        ("matmul/1d@1d", torch.matmul, (Arg((4,)), Arg((4,)))),
        ("matmul/2d@1d", torch.matmul, (Arg((3, 4)), Arg((4,)))),
        ("matmul/1d@2d", torch.matmul, (Arg((3,)), Arg((3, 4)))),
        ("matmul/3d@2d", torch.matmul, (Arg((2, 3, 4)), Arg((4, 2)))),
        # Upstream folds a batch against a vector or matrix into one mm or mv (the batched side
        # transposed when it is the second), and goes to bmm for a transposed 3-D left side.
        ("matmul/2d@3d", torch.matmul, (Arg((3, 6)), Arg((2, 6, 3)))),
        ("matmul/1d@3d", torch.matmul, (Arg((5,)), Arg((2, 5, 3)))),
        ("matmul/3d@1d", torch.matmul, (Arg((2, 3, 4)), Arg((4,)))),
        ("matmul/4d@2d", torch.matmul, (Arg((2, 2, 3, 5)), Arg((5, 4)))),
        ("matmul/transposed3d@2d", lambda a, b: torch.matmul(a.permute(0, 2, 1), b), (Arg((2, 5, 3)), Arg((5, 4)))),
        ("matmul/bcast_batch", torch.matmul, (Arg((2, 1, 3, 4)), Arg((5, 4, 2)))),
        ("matmul/operator", lambda a, b: a @ b, (Arg((3, 4)), Arg((4, 2)))),
        ("mv/3x4@4", torch.mv, (Arg((3, 4)), Arg((4,)))),
        ("dot/4.4", torch.dot, (Arg((4,)), Arg((4,)))),
        ("vdot/4.4", torch.vdot, (Arg((4,)), Arg((4,)))),
        ("inner/3x4.2x4", torch.inner, (Arg((3, 4)), Arg((2, 4)))),
        ("outer/3x4", torch.outer, (Arg((3,)), Arg((4,)))),
        ("addmm/default", torch.addmm, (Arg((3, 5)), Arg((3, 4)), Arg((4, 5)))),
        ("addmm/bcast_bias", torch.addmm, (Arg((5,)), Arg((3, 4)), Arg((4, 5)))),
        ("addmm/beta_alpha", partial(torch.addmm, beta=2, alpha=3), (Arg((3, 5)), Arg((3, 4)), Arg((4, 5)))),
        ("addmv/default", torch.addmv, (Arg((3,)), Arg((3, 4)), Arg((4,)))),
        ("addr/default", torch.addr, (Arg((3, 4)), Arg((3,)), Arg((4,)))),
        ("baddbmm/default", torch.baddbmm, (Arg((2, 3, 5)), Arg((2, 3, 4)), Arg((2, 4, 5)))),
        ("baddbmm/beta_alpha", partial(torch.baddbmm, beta=0.5, alpha=2),
         (Arg((2, 3, 5)), Arg((2, 3, 4)), Arg((2, 4, 5)))),
        # inexact beta and alpha tell (alpha * a) * b, upstream's small-batch order, from alpha * (a * b)
        ("baddbmm/inexact_beta_alpha", partial(torch.baddbmm, beta=0.7, alpha=0.3),
         (Arg((3, 4, 6)), Arg((3, 4, 5)), Arg((3, 5, 6)))),
        ("addbmm/default", torch.addbmm, (Arg((3, 5)), Arg((2, 3, 4)), Arg((2, 4, 5)))),
        ("tensordot/dims1", partial(torch.tensordot, dims=1), (Arg((3, 4)), Arg((4, 2)))),
        ("tensordot/dims_lists", partial(torch.tensordot, dims=([0, 2], [1, 0])),
         (Arg((3, 2, 4)), Arg((4, 3, 5)))),
        ("kron/2x2.3x2", torch.kron, (Arg((2, 2)), Arg((3, 2)))),
        ("trace/3x4", torch.trace, (Arg((3, 4)),)),
        ("linear/no_bias", F.linear, (Arg((3, 4)), Arg((5, 4)))),
        ("linear/bias", F.linear, (Arg((3, 4)), Arg((5, 4)), Arg((5,)))),
        ("linear/3d_input", F.linear, (Arg((2, 3, 4)), Arg((5, 4)), Arg((5,)))),
        ("linear/1d_input", F.linear, (Arg((4,)), Arg((5, 4)), Arg((5,)))),
    )


EINSUM = (
    ("ij,jk->ik", ((3, 4), (4, 5))), ("ij,jk", ((3, 4), (4, 2))), ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
    ("ii->i", ((3, 3),)), ("ii", ((3, 3),)), ("ij->ji", ((3, 4),)), ("i,i->", ((4,), (4,))),
    ("i,j->ij", ((3,), (4,))), ("ij->", ((3, 4),)), ("bi,bi->b", ((2, 5), (2, 5))),
    ("...ij,...jk->...ik", ((2, 3, 4), (4, 2))), ("ijk->kji", ((2, 3, 4),)),
    ("ij,ij->ij", ((3, 4), (3, 4))), ("ij,kj->ik", ((3, 4), (2, 4))),
)


def cases():
    for name, call, args in _products():
        op, variant = name.split("/", 1)
        for dtype in PRODUCT_DTYPES:
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    for equation, shapes in EINSUM:
        args = tuple(Arg(shape) for shape in shapes)
        for dtype in ("float32", "float64", "int64"):
            yield Case("einsum/%s/%s" % (dtype, equation),
                       lambda *tensors, e=equation: torch.einsum(e, *tensors), args, dtype)
    yield Case("einsum/float32/list_operands", lambda a, b: torch.einsum("ij,jk->ik", [a, b]),
               (Arg((3, 4)), Arg((4, 5))), "float32")
    yield Case("einsum/float32/bad_equation", lambda a: torch.einsum("ij->ijk", a), (Arg((3, 4)),), "float32")

    f32 = "float32"
    two = (Arg((3, 4)), Arg((4, 5)))
    yield Case("mm/float32/transposed_lhs", torch.mm, (Arg((3, 4), layout=TRANSPOSED), Arg((4, 5))), f32)
    yield Case("mm/float32/stepped_rhs", torch.mm, (Arg((3, 4)), Arg((4, 5), layout=STEPPED)), f32)
    yield Case("mm/float32/empty_k", torch.mm, (Arg((3, 0)), Arg((0, 5))), f32)
    yield Case("mm/float32/method", method("mm"), two, f32)
    yield Case("mm/float32/out", into_out(torch.mm), two, f32)
    yield Case("mm/float32/mismatch", torch.mm, (Arg((3, 4)), Arg((3, 4))), f32)
    yield Case("mm/int64+float32/3x4@4x5", torch.mm, (Arg((3, 4), dtype="int64"), Arg((4, 5))), f32)
    yield Case("bmm/float32/out", into_out(torch.bmm), (Arg((2, 3, 4)), Arg((2, 4, 5))), f32)
    yield Case("bmm/float32/mismatch", torch.bmm, (Arg((2, 3, 4)), Arg((3, 4, 5))), f32)
    yield Case("matmul/float32/mismatch_1d", torch.matmul, (Arg((3,)), Arg((4,))), f32)
    yield Case("matmul/float32/0d", torch.matmul, (Arg(()), Arg((3,))), f32)
    yield Case("matmul/float32/out", into_out(torch.matmul), two, f32)
    yield Case("matmul/float32/method", method("matmul"), two, f32)
    yield Case("addmm/float32/inplace", inplace("addmm_"), (Arg((3, 5)), Arg((3, 4)), Arg((4, 5))), f32)
    yield Case("addmm/float32/out", into_out(torch.addmm), (Arg((3, 5)), Arg((3, 4)), Arg((4, 5))), f32)
    yield Case("addmm/float32/method", method("addmm"), (Arg((3, 5)), Arg((3, 4)), Arg((4, 5))), f32)
    yield Case("baddbmm/float32/inplace", inplace("baddbmm_"),
               (Arg((2, 3, 5)), Arg((2, 3, 4)), Arg((2, 4, 5))), f32)
    yield Case("linear/float32/mismatch", F.linear, (Arg((3, 4)), Arg((5, 3))), f32)

    # LAPACK-backed: the matrix is made diagonally dominant so it is well conditioned.
    def dominant(a):
        return a + 8 * torch.eye(a.shape[-1], dtype=a.dtype)

    lapack = (
        ("det", lambda a: torch.det(dominant(a)), (Arg((3, 3)),)),
        ("inverse", lambda a: torch.inverse(dominant(a)), (Arg((3, 3)),)),
        ("linalg_inv", lambda a: torch.linalg.inv(dominant(a)), (Arg((2, 3, 3)),)),
        ("linalg_solve", lambda a, b: torch.linalg.solve(dominant(a), b), (Arg((3, 3)), Arg((3, 2)))),
        ("cholesky", lambda a: torch.linalg.cholesky(dominant(a @ a.mT)), (Arg((3, 3)),)),
        ("cholesky_upper_batched", lambda a: torch.linalg.cholesky(dominant(a @ a.mT), upper=True),
         (Arg((2, 4, 4)),)),
        ("slogdet", lambda a: torch.linalg.slogdet(dominant(a)), (Arg((3, 3)),)),
        ("matrix_power", lambda a: torch.linalg.matrix_power(a, 3), (Arg((3, 3)),)),
        ("cross", lambda a, b: torch.linalg.cross(a, b), (Arg((2, 3)), Arg((2, 3)))),
    )
    for name, call, args in lapack:
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/3x3" % (name, dtype), call, args, dtype)
    # linalg.solve factors a contiguous A as A^T and solves transposed; a non-contiguous A
    # directly. LAPACK must not overwrite inputs that are already column-major, and the
    # batch dims of A and B broadcast.
    solves = (
        ("5x5_transposed", lambda a, b: torch.linalg.solve(dominant(a).mT, b), (Arg((5, 5)), Arg((5, 3)))),
        ("vector", lambda a, b: (torch.linalg.solve(dominant(a), b), b), (Arg((5, 5)), Arg((5,)))),
        ("column_rhs_kept", lambda a, b: (torch.linalg.solve(dominant(a), b.mT), b),
         (Arg((4, 4)), Arg((2, 4)))),
        ("batched_A", lambda a, b: torch.linalg.solve(dominant(a), b), (Arg((2, 4, 4)), Arg((4, 3)))),
        ("batched_vectors", lambda a, b: torch.linalg.solve(dominant(a), b), (Arg((2, 4, 4)), Arg((2, 4)))),
    )
    for name, call, args in solves:
        for dtype in ("float32", "float64"):
            yield Case("linalg_solve/%s/%s" % (dtype, name), call, args, dtype)
    for dtype in ("float32", "float64"):
        yield Case("linalg_inv/%s/5x5_transposed" % dtype, lambda a: torch.linalg.inv(dominant(a).mT),
                   (Arg((5, 5)),), dtype)
    # Empty matrices and empty batches: the batch size cannot be inferred from a size of 0.
    empties = (
        ("det", torch.linalg.det), ("slogdet", torch.linalg.slogdet), ("logdet", torch.logdet),
        ("inv", torch.linalg.inv), ("cholesky", torch.linalg.cholesky),
        ("solve", lambda a: torch.linalg.solve(a, a)),
    )
    for name, call in empties:
        for shape in ((0, 0), (2, 0, 0), (0, 3, 3), (3, 0, 0, 0)):
            for dtype in ("float32", "float64"):
                yield Case("linalg_%s/%s/empty_%s" % (name, dtype, "x".join(map(str, shape))), call,
                           (Arg(shape),), dtype)
    # linalg.norm / matrix_norm: which dims and orders are matrix norms, vector norms or refused,
    # and in which order upstream checks them. (Singular-value norms only where they are refused
    # before the SVD: the shim has no SVD.)
    inf = float("inf")
    for shape in ((2, 3, 4), (3, 4), (4,)):
        for ord_ in ("fro", 1, inf, -1, -inf, 3, 0.5, None, "nuc", 2):
            for dims in ((0,), (0, 1, 2), (0, 1), None):
                reaches_svd = ord_ in ("nuc", 2) and (dims == (0, 1) or (dims is None and len(shape) == 2))
                if reaches_svd:
                    continue
                label = "x".join(map(str, shape)), str(ord_), "none" if dims is None else "_".join(map(str, dims))
                yield Case("linalg_norm/float32/%s_ord_%s_dim_%s" % label,
                           lambda a, o=ord_, d=dims: torch.linalg.norm(a, o, dim=d), (Arg(shape),), "float32")
                if ord_ is not None and dims is not None:
                    yield Case("linalg_matrix_norm/float32/%s_ord_%s_dim_%s" % label,
                               lambda a, o=ord_, d=dims: torch.linalg.matrix_norm(a, o, dim=d), (Arg(shape),),
                               "float32")
