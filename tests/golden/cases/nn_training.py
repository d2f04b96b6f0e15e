"""Training-path layers over the shapes a small model feeds them (issue 18): batch_norm over
(N, C) and (N, C, L) with small L, in training (several steps of running statistics) and
evaluation, with and without affine parameters and running statistics, contiguous and as
views; the pointwise losses' reductions over sizes whose tails upstream's kernels take
element by element. The @grad twins compare the gradients of inputs, weight and bias."""

from functools import partial

import torch
import torch.nn.functional as F

from spec import CONTIGUOUS, STEPPED, TRANSPOSED, Arg, Case

DTYPES = ("float32", "float64")

# (tag, shape, layout): no spatial extent, L = 1 (upstream's rows kernel), small odd and even L
# (its plane loops' scalar tails), and views that take its non-contiguous path.
BATCH_NORM_SHAPES = (
    ("8x4", (8, 4), CONTIGUOUS), ("16x13", (16, 13), CONTIGUOUS), ("8x4x1", (8, 4, 1), CONTIGUOUS),
    ("8x4x3", (8, 4, 3), CONTIGUOUS), ("5x9x2", (5, 9, 2), CONTIGUOUS), ("3x17x5", (3, 17, 5), CONTIGUOUS),
    ("8x4x9", (8, 4, 9), CONTIGUOUS), ("8x4_transposed", (8, 4), TRANSPOSED),
    ("6x5x7_transposed", (6, 5, 7), TRANSPOSED), ("8x4x3_stepped", (8, 4, 3), STEPPED),
)


def _running_statistics(channels, dtype):
    """Running mean and variance with values of their own, so the momentum update shows."""
    mean = torch.tensor([0.25 * (c % 5) - 0.5 for c in range(channels)], dtype=dtype)
    var = torch.tensor([0.75 + 0.125 * (c % 4) for c in range(channels)], dtype=dtype)
    return mean, var


def _train_steps(batches, weight=None, bias=None, momentum=0.3):
    """A training step on each batch (each a layout of its own: an operation on a view would
    choose one), the running statistics shared: every output, then the running statistics."""
    mean, var = _running_statistics(batches[0].shape[1], batches[0].dtype)
    outputs = [F.batch_norm(x, mean, var, weight, bias, training=True, momentum=momentum) for x in batches]
    return tuple(outputs) + (mean, var)


def _eval(x, weight=None, bias=None):
    mean, var = _running_statistics(x.shape[1], x.dtype)
    return F.batch_norm(x, mean, var, weight, bias, training=False)


def _batch_norm_cases():
    for tag, shape, layout in BATCH_NORM_SHAPES:
        x = Arg(shape, layout=layout)
        channel = Arg((shape[1],))
        batches = (x, x, x)  # three draws: a case's arguments get values of their own
        entries = (
            ("train_affine", lambda a, b, c, w, v: _train_steps((a, b, c), w, v), batches + (channel, channel)),
            ("train_plain", lambda a, b, c: _train_steps((a, b, c)), batches),
            ("train_weight_only", lambda a, b, c, w: _train_steps((a, b, c), w), batches + (channel,)),
            ("train_no_running", lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True),
             (x, channel, channel)),
            ("eval_affine", _eval, (x, channel, channel)),
            ("eval_plain", _eval, (x,)),
            ("module_train", _module_step, (x, x)),
        )
        for variant, call, args in entries:
            for dtype in DTYPES:
                yield Case("batch_norm/%s/%s/%s" % (dtype, tag, variant), call, args, dtype)
    for dtype in DTYPES:
        # Upstream's functional form checks only a single value per channel; an empty batch
        # reaches the kernel.
        yield Case("batch_norm/%s/1x4/train_refused" % dtype,
                   lambda a: F.batch_norm(a, None, None, training=True), (Arg((1, 4)),), dtype)
        yield Case("batch_norm/%s/0x4/train" % dtype,
                   lambda a: F.batch_norm(a, None, None, training=True), (Arg((0, 4)),), dtype)
        yield Case("batch_norm/%s/0x4/module_train" % dtype, _module_step, (Arg((0, 4)), Arg((0, 4))), dtype)


def _module_step(x, y):
    """torch.nn.BatchNorm1d as a model holds it: default momentum, two steps, its buffers."""
    module = torch.nn.BatchNorm1d(x.shape[1]).to(x.dtype)
    first = module(x)
    second = module(y)
    return first, second, module.running_mean, module.running_var, module.num_batches_tracked


# (tag, shape, layout): sizes below, at and past the vector block (16 floats, 8 doubles), and
# a view whose gradient upstream computes element by element. (A transposed input's reduced
# loss is not yet summed in upstream's order: a forward matter of kernels/loss.cpp.)
LOSS_SHAPES = (
    ("7", (7,), CONTIGUOUS), ("33", (33,), CONTIGUOUS), ("8x4", (8, 4), CONTIGUOUS),
    ("3x5x7", (3, 5, 7), CONTIGUOUS), ("4x9_stepped", (4, 9), STEPPED),
)

LOSSES = (
    ("mse_loss", F.mse_loss), ("l1_loss", F.l1_loss), ("smooth_l1_loss", partial(F.smooth_l1_loss, beta=0.7)),
    ("smooth_l1_loss_beta0", partial(F.smooth_l1_loss, beta=0.0)), ("huber_loss", partial(F.huber_loss, delta=1.3)),
)


def _loss_cases():
    for tag, shape, layout in LOSS_SHAPES:
        pair = (Arg(shape, layout=layout), Arg(shape))
        for name, loss in LOSSES:
            for reduction in ("mean", "sum", "none"):
                for dtype in DTYPES:
                    yield Case("%s/%s/%s/%s" % (name, dtype, tag, reduction),
                               partial(loss, reduction=reduction), pair, dtype)


def cases():
    yield from _batch_norm_cases()
    yield from _loss_cases()
