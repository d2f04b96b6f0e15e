"""softmax / log_softmax and torch.nn.functional: activations, normalization,
losses, convolution and pooling."""

from functools import partial

import torch
import torch.nn.functional as F

from cases.common import method
from cases.rng import seeded
from spec import CHANNELS_LAST, CONTIGUOUS, STEPPED, TRANSPOSED, Arg, Case

ACTIVATION_DTYPES = ("float32", "float64", "bfloat16")

ACTIVATIONS = (
    ("relu", F.relu), ("relu_inplace", lambda a: (F.relu(a, inplace=True), a)), ("relu6", F.relu6),
    ("leaky_relu", partial(F.leaky_relu, negative_slope=0.1)), ("elu", F.elu), ("selu", F.selu),
    ("celu", partial(F.celu, alpha=0.5)), ("gelu", F.gelu), ("gelu_tanh", partial(F.gelu, approximate="tanh")),
    ("silu", F.silu), ("mish", F.mish), ("softplus", F.softplus),
    ("softplus_beta", partial(F.softplus, beta=2, threshold=3)), ("hardtanh", F.hardtanh),
    ("hardsigmoid", F.hardsigmoid), ("hardswish", F.hardswish), ("softsign", F.softsign),
    ("logsigmoid", F.logsigmoid), ("tanhshrink", F.tanhshrink), ("softshrink", F.softshrink),
    ("hardshrink", F.hardshrink), ("threshold", partial(F.threshold, threshold=0.5, value=-1.0)),
    ("glu", F.glu), ("prelu", lambda a: F.prelu(a, torch.tensor([0.25], dtype=a.dtype))),
    ("rrelu_eval", partial(F.rrelu, training=False)), ("dropout_eval", partial(F.dropout, training=False)),
    ("sigmoid", torch.sigmoid), ("tanh", F.tanh),
)

SOFTMAX_VARIANTS = (
    ("dim0", lambda f: lambda a: f(a, 0), (2, 3, 4)),
    ("dim1", lambda f: lambda a: f(a, 1), (2, 3, 4)),
    ("dim_neg", lambda f: lambda a: f(a, dim=-1), (2, 3, 4)),
    ("dtype_kw", lambda f: lambda a: f(a, 1, dtype=torch.float64), (3, 4)),
    ("0d", lambda f: lambda a: f(a, 0), ()),
    ("empty", lambda f: lambda a: f(a, 1), (0, 3)),
    ("bad_dim", lambda f: lambda a: f(a, 3), (3, 4)),
)


def _softmax_cases():
    for name in ("softmax", "log_softmax"):
        function = getattr(torch, name)
        forms = (("torch", function), ("F", getattr(F, name)), ("method", method(name)))
        for dtype in ("float32", "float64", "bfloat16", "float16", "int64"):
            yield Case("%s/%s/3x4/dim1" % (name, dtype), lambda a, f=function: f(a, 1), (Arg((3, 4)),), dtype)
        for form, call in forms:
            for tag, make, shape in SOFTMAX_VARIANTS:
                yield Case("%s/float32/%s/%s" % (name, tag, form), make(call), (Arg(shape),), "float32")
        yield Case("%s/float32/special/dim1" % name, lambda a, f=function: f(a, 1),
                   (Arg((4, 4), "special"),), "float32")
        yield Case("%s/float32/large/dim1" % name, lambda a, f=function: f(a * 30, 1),
                   (Arg((3, 40)),), "float32")
    yield Case("softmin/float32/3x4/dim0", partial(F.softmin, dim=0), (Arg((3, 4)),), "float32")


# Upstream's kernels along a dim that is not last run the columns on vectors of 8 floats (4
# doubles), its last inner % 8 columns one by one (libm's exp, contracted products); along the
# last dim a row sums on vector lanes. Shapes that take each path, forward and (twins) backward.
SOFTMAX_ORDER_SHAPES = (
    ("2x9x11/dim1", (2, 9, 11), 1, CONTIGUOUS), ("3x20x8/dim1", (3, 20, 8), 1, CONTIGUOUS),
    ("13x4/dim0", (13, 4), 0, CONTIGUOUS), ("4x37/dim0_transposed", (4, 37), 0, TRANSPOSED),
    ("5x37/dim1_transposed", (5, 37), 1, TRANSPOSED), ("3x7x6/dim2_stepped", (3, 7, 6), 2, STEPPED),
    ("6x5/dim1", (6, 5), 1, CONTIGUOUS), ("0x3/dim0", (0, 3), 0, CONTIGUOUS),
)


def _softmax_order_cases():
    for name in ("softmax", "log_softmax"):
        function = getattr(torch, name)
        backward = getattr(torch, "_%s_backward_data" % name)
        for dtype in ("float32", "float64"):
            for tag, shape, dim, layout in SOFTMAX_ORDER_SHAPES:
                yield Case("%s/%s/%s" % (name, dtype, tag), partial(function, dim=dim),
                           (Arg(shape, layout=layout),), dtype)
            # The backward kernel called itself: its twin differentiates it (upstream's formulas).
            for tag, shape, dim in (("2x9x11/dim1", (2, 9, 11), 1), ("5x37/dim1", (5, 37), 1)):
                yield Case("_%s_backward_data/%s/%s" % (name, dtype, tag),
                           lambda g, x, f=function, b=backward, d=dim: b(g, f(x, d), d, x.dtype),
                           (Arg(shape), Arg(shape)), dtype)


def _normalization_cases():
    x = Arg((2, 4, 3))
    entries = (
        ("normalize/dim1", lambda a: F.normalize(a, dim=1), (x,)),
        ("normalize/p1", lambda a: F.normalize(a, p=1.0, dim=-1), (x,)),
        ("layer_norm/plain", lambda a: F.layer_norm(a, (3,)), (x,)),
        ("layer_norm/affine", lambda a, w, b: F.layer_norm(a, (4, 3), w, b), (x, Arg((4, 3)), Arg((4, 3)))),
        ("group_norm/2groups", lambda a: F.group_norm(a, 2), (x,)),
        ("batch_norm/eval", lambda a, m, v, w, b: F.batch_norm(a, m, v, w, b, training=False),
         (x, Arg((4,)), Arg((4,), "pos"), Arg((4,)), Arg((4,)))),
        ("batch_norm/train", lambda a: F.batch_norm(a, None, None, training=True), (x,)),
        ("instance_norm/plain", F.instance_norm, (x,)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _class_weights(like):
    return torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=like.dtype)


def _loss_cases():
    pair = (Arg((3, 4)), Arg((3, 4)))
    probabilities = (Arg((3, 4), "prob"), Arg((3, 4), "prob"))
    logits_target = (Arg((3, 4)), Arg((3,), ("index", 4), "int64"))
    long_target = (Arg((40, 4)), Arg((40,), ("index", 4), "int64"))
    spatial_target = (Arg((3, 4, 5)), Arg((3, 5), ("index", 4), "int64"))
    entries = [
        ("cosine_similarity/dim1", F.cosine_similarity, pair),
        ("pairwise_distance/default", F.pairwise_distance, pair),
        ("cdist/p2", torch.cdist, (Arg((3, 4)), Arg((2, 4)))),
        ("cdist/p1", partial(torch.cdist, p=1.0), (Arg((3, 4)), Arg((2, 4)))),
        ("cdist/p3_batched", partial(torch.cdist, p=3.0), (Arg((2, 3, 4)), Arg((2, 5, 4)))),
        ("cdist/p0.5", partial(torch.cdist, p=0.5), (Arg((3, 4)), Arg((2, 4)))),
        ("cdist/inf", partial(torch.cdist, p=float("inf")), (Arg((3, 4)), Arg((2, 4)))),
        ("cdist/p2_same_points", lambda x: torch.cdist(x, x), (Arg((3, 4)),)),
        ("nll_loss/mean", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), logits_target),
        ("nll_loss/weight_sum", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t,
                                                        _class_weights(x),
                                                        reduction="sum"), logits_target),
        ("cross_entropy/mean", F.cross_entropy, logits_target),
        ("cross_entropy/label_smoothing", partial(F.cross_entropy, label_smoothing=0.1), logits_target),
        ("cross_entropy/probabilities", lambda x, p: F.cross_entropy(x, F.softmax(p, 1)), pair),
        ("nll_loss/ignore_index", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, ignore_index=1), logits_target),
        ("cross_entropy/weight", lambda x, t: F.cross_entropy(x, t, _class_weights(x)), logits_target),
        ("cross_entropy/ignore_index", partial(F.cross_entropy, ignore_index=2), logits_target),
        ("cross_entropy/everything", lambda x, t: F.cross_entropy(x, t, _class_weights(x), ignore_index=2,
                                                                  label_smoothing=0.2), logits_target),
        ("cross_entropy/sum", partial(F.cross_entropy, reduction="sum"), logits_target),
        ("cross_entropy/none_smoothing", partial(F.cross_entropy, reduction="none", label_smoothing=0.3),
         logits_target),
        # Upstream sums a reduced loss and its total weight in the dtype through 8 cascading partial
        # sums (blocks of 16 samples): more samples than a block, inputs of 1, 3 and 4 dims.
        ("nll_loss/40_weight_mean", lambda x, t: F.nll_loss(x, t, _class_weights(x), ignore_index=1), long_target),
        ("nll_loss/40_weight_sum", lambda x, t: F.nll_loss(x, t, _class_weights(x), reduction="sum"), long_target),
        ("nll_loss/40_mean", F.nll_loss, long_target),
        ("nll_loss/1d_weight", lambda x: F.nll_loss(x, torch.tensor(2), _class_weights(x)), (Arg((4,)),)),
        ("nll_loss/3d_weight_mean", lambda x, t: F.nll_loss(x, t, _class_weights(x), ignore_index=0), spatial_target),
        ("nll_loss/3d_none", lambda x, t: F.nll_loss(x, t, _class_weights(x), reduction="none"), spatial_target),
        ("nll_loss/4d_sum", lambda x, t: F.nll_loss(x, t, reduction="sum"),
         (Arg((2, 4, 3, 5)), Arg((2, 3, 5), ("index", 4), "int64"))),
        ("nll_loss/empty_mean", F.nll_loss, (Arg((0, 4)), Arg((0,), ("index", 4), "int64"))),
        ("cross_entropy/3d_transposed", F.cross_entropy,
         (Arg((3, 4, 5), layout=TRANSPOSED), Arg((3, 5), ("index", 4), "int64"))),
        ("binary_cross_entropy/mean", F.binary_cross_entropy, probabilities),
        ("binary_cross_entropy/weight_sum", lambda p, q: F.binary_cross_entropy(p, q, _class_weights(p),
                                                                                reduction="sum"), probabilities),
        ("binary_cross_entropy_with_logits/mean", F.binary_cross_entropy_with_logits,
         (Arg((3, 4)), Arg((3, 4), "prob"))),
        ("binary_cross_entropy_with_logits/pos_weight",
         lambda x, p: F.binary_cross_entropy_with_logits(x, p, pos_weight=_class_weights(x)),
         (Arg((3, 4)), Arg((3, 4), "prob"))),
        ("kl_div/batchmean", lambda x, p: F.kl_div(F.log_softmax(x, 1), F.softmax(p, 1), reduction="batchmean"),
         pair),
    ]
    for loss in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss"):
        for reduction in ("mean", "sum", "none"):
            entries.append(("%s/%s" % (loss, reduction), partial(getattr(F, loss), reduction=reduction), pair))
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _conv_pool_cases():
    image = Arg((1, 2, 5, 5))
    entries = (
        ("conv1d/plain", F.conv1d, (Arg((1, 2, 6)), Arg((3, 2, 2)))),
        ("conv1d/bias_padding", lambda x, w, b: F.conv1d(x, w, b, padding=1, stride=2),
         (Arg((2, 2, 6)), Arg((3, 2, 3)), Arg((3,)))),
        ("conv2d/plain", F.conv2d, (image, Arg((3, 2, 3, 3)))),
        ("conv2d/stride_padding_bias", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
         (image, Arg((3, 2, 3, 3)), Arg((3,)))),
        ("conv2d/groups_dilation", lambda x, w: F.conv2d(x, w, groups=2, dilation=2), (image, Arg((2, 1, 2, 2)))),
        ("conv2d/depthwise_same", lambda x, w, b: F.conv2d(x, w, b, padding="same", groups=2),
         (image, Arg((4, 1, 3, 3)), Arg((4,)))),
        ("conv2d/asymmetric", lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
         (image, Arg((3, 2, 2, 3)))),
        ("conv1d/groups_dilation", lambda x, w: F.conv1d(x, w, groups=2, dilation=2, padding=1),
         (Arg((2, 4, 7)), Arg((4, 2, 3)))),
        ("conv_transpose2d/stride2", lambda x, w: F.conv_transpose2d(x, w, stride=2), (Arg((1, 2, 3, 3)),
                                                                                    Arg((2, 3, 2, 2)))),
        # padding='same': an odd total dilation * (kernel - 1) pads the input at the end first.
        ("conv1d/same_odd_kernel", lambda x, w, b: F.conv1d(x, w, b, padding="same"),
         (Arg((2, 2, 7)), Arg((3, 2, 3)), Arg((3,)))),
        ("conv1d/same_even_kernel", lambda x, w, b: F.conv1d(x, w, b, padding="same"),
         (Arg((2, 2, 7)), Arg((3, 2, 4)), Arg((3,)))),
        ("conv1d/same_groups_dilation", lambda x, w: F.conv1d(x, w, padding="same", dilation=3, groups=2),
         (Arg((1, 4, 6)), Arg((4, 2, 2)))),
        ("conv1d/same_unbatched", lambda x, w: F.conv1d(x, w, padding="same"), (Arg((2, 7)), Arg((3, 2, 4)))),
        ("conv1d/same_transposed", lambda x, w: F.conv1d(x, w, padding="same"),
         (Arg((2, 2, 7), layout=TRANSPOSED), Arg((3, 2, 2)))),
        ("conv1d/same_empty_batch", lambda x, w, b: F.conv1d(x, w, b, padding="same"),
         (Arg((0, 2, 7)), Arg((3, 2, 4)), Arg((3,)))),
        ("conv1d/valid_stride", lambda x, w: F.conv1d(x, w, padding="valid", stride=2),
         (Arg((2, 2, 7)), Arg((3, 2, 3)))),
        ("conv1d/same_strided", lambda x, w: F.conv1d(x, w, padding="same", stride=2),
         (Arg((1, 2, 7)), Arg((3, 2, 3)))),
        ("conv1d/padding_string_unknown", lambda x, w: F.conv1d(x, w, padding="full"),
         (Arg((1, 2, 7)), Arg((3, 2, 3)))),
        ("conv1d/unbatched_1d_input", lambda x, w: F.conv1d(x, w, padding="same"), (Arg((7,)), Arg((3, 2, 3)))),
        ("conv2d/same_even_kernel", lambda x, w, b: F.conv2d(x, w, b, padding="same"),
         (Arg((2, 2, 5, 6)), Arg((3, 2, 4, 2)), Arg((3,)))),
        ("conv2d/same_even_groups_dilation", lambda x, w: F.conv2d(x, w, padding="same", groups=2, dilation=(1, 2)),
         (Arg((1, 2, 5, 5)), Arg((4, 1, 2, 3)))),
        ("conv2d/same_even_stepped", lambda x, w: F.conv2d(x, w, padding="same"),
         (Arg((1, 2, 5, 6), layout=STEPPED), Arg((3, 2, 2, 2)))),
        ("conv2d/same_even_unbatched", lambda x, w: F.conv2d(x, w, padding="same"),
         (Arg((2, 5, 5)), Arg((3, 2, 2, 3)))),
        ("conv2d/same_strided", lambda x, w: F.conv2d(x, w, padding="same", stride=(1, 2)),
         (image, Arg((3, 2, 3, 3)))),
        ("conv2d/padding_string_unknown", lambda x, w: F.conv2d(x, w, padding="Same"), (image, Arg((3, 2, 3, 3)))),
        ("conv2d/empty_batch", lambda x, w, b: F.conv2d(x, w, b, padding=1),
         (Arg((0, 2, 5, 5)), Arg((3, 2, 3, 3)), Arg((3,)))),
        ("conv_transpose1d/plain", F.conv_transpose1d, (Arg((2, 2, 5)), Arg((2, 3, 3)))),
        ("conv_transpose1d/stride_padding_bias", lambda x, w, b: F.conv_transpose1d(
            x, w, b, stride=2, padding=1, output_padding=1), (Arg((2, 2, 5)), Arg((2, 3, 3)), Arg((3,)))),
        ("conv_transpose1d/groups_dilation", lambda x, w: F.conv_transpose1d(x, w, groups=2, dilation=2),
         (Arg((1, 4, 5)), Arg((4, 2, 3)))),
        ("conv_transpose1d/unbatched", F.conv_transpose1d, (Arg((2, 5)), Arg((2, 3, 2)))),
        ("conv_transpose1d/transposed", lambda x, w: F.conv_transpose1d(x, w, stride=3),
         (Arg((2, 2, 5), layout=TRANSPOSED), Arg((2, 3, 2)))),
        ("conv_transpose1d/empty_batch", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2),
         (Arg((0, 2, 5)), Arg((2, 3, 3)), Arg((3,)))),
        ("conv_transpose1d/output_padding_too_large", lambda x, w: F.conv_transpose1d(
            x, w, stride=2, output_padding=2), (Arg((1, 2, 5)), Arg((2, 3, 3)))),
        # float32 conv3d takes oneDNN where upstream's use_mkldnn says (a batch of more than one,
        # groups), else upstream's slow_conv3d / slow_conv_dilated3d: both paths in each dtype.
        ("conv3d/plain", F.conv3d, (Arg((1, 2, 4, 4, 4)), Arg((3, 2, 2, 2, 2)))),
        ("conv3d/batched_bias", lambda x, w, b: F.conv3d(x, w, b),
         (Arg((2, 2, 4, 5, 4)), Arg((3, 2, 3, 3, 3)), Arg((3,)))),
        ("conv3d/stride_padding", lambda x, w, b: F.conv3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 1)),
         (Arg((2, 2, 5, 4, 5)), Arg((4, 2, 3, 2, 3)), Arg((4,)))),
        ("conv3d/groups_dilation", lambda x, w, b: F.conv3d(x, w, b, groups=2, dilation=2),
         (Arg((1, 4, 5, 5, 5)), Arg((4, 2, 2, 2, 2)), Arg((4,)))),
        ("conv3d/dilation_bias", lambda x, w, b: F.conv3d(x, w, b, dilation=(1, 2, 1), padding=1),
         (Arg((1, 2, 4, 5, 4)), Arg((2, 2, 2, 2, 2)), Arg((2,)))),
        ("conv3d/depthwise", lambda x, w: F.conv3d(x, w, padding=1, groups=4),
         (Arg((2, 4, 4, 4, 4)), Arg((8, 1, 3, 3, 3)))),
        ("conv3d/deep_bias", lambda x, w, b: F.conv3d(x, w, b),
         (Arg((1, 16, 4, 4, 4)), Arg((2, 16, 3, 3, 3)), Arg((2,)))),
        ("conv3d/pointwise", F.conv3d, (Arg((1, 4, 3, 3, 3)), Arg((2, 4, 1, 1, 1)))),
        ("conv3d/unbatched", lambda x, w, b: F.conv3d(x, w, b, padding=1),
         (Arg((2, 4, 4, 4)), Arg((3, 2, 2, 2, 2)), Arg((3,)))),
        ("conv3d/transposed", F.conv3d, (Arg((2, 2, 4, 4, 5), layout=TRANSPOSED), Arg((2, 2, 2, 2, 2)))),
        ("conv3d/stepped", lambda x, w: F.conv3d(x, w, stride=2),
         (Arg((1, 2, 4, 4, 4), layout=STEPPED), Arg((2, 2, 2, 2, 2)))),
        ("conv3d/empty_batch", lambda x, w, b: F.conv3d(x, w, b),
         (Arg((0, 2, 4, 4, 4)), Arg((3, 2, 2, 2, 2)), Arg((3,)))),
        ("conv3d/same_even_kernel", lambda x, w, b: F.conv3d(x, w, b, padding="same"),
         (Arg((1, 2, 4, 4, 4)), Arg((3, 2, 2, 3, 2)), Arg((3,)))),
        ("conv3d/same_even_batched", lambda x, w: F.conv3d(x, w, padding="same"),
         (Arg((2, 2, 3, 4, 4)), Arg((2, 2, 2, 2, 3)))),
        ("conv3d/channel_mismatch", F.conv3d, (Arg((1, 3, 4, 4, 4)), Arg((3, 2, 2, 2, 2)))),
        ("conv3d/kernel_too_large", F.conv3d, (Arg((1, 2, 2, 4, 4)), Arg((3, 2, 3, 3, 3)))),
        ("conv3d/input_3d", F.conv3d, (Arg((2, 4, 4)), Arg((3, 2, 2, 2, 2)))),
        # An in-place activation on a convolution's result (ReLU(inplace=True) after a layer):
        # the result is no view, so the write keeps the convolution's gradient.
        ("conv1d/relu_inplace_after", lambda x, w, b: F.relu(F.conv1d(x, w, b), inplace=True),
         (Arg((2, 2, 6)), Arg((3, 2, 2)), Arg((3,)))),
        ("conv2d/relu_inplace_after", lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1), inplace=True),
         (image, Arg((3, 2, 3, 3)), Arg((3,)))),
        ("conv3d/relu_inplace_after", lambda x, w, b: F.relu(F.conv3d(x, w, b), inplace=True),
         (Arg((1, 2, 3, 3, 3)), Arg((2, 2, 2, 2, 2)), Arg((2,)))),
        ("conv_transpose1d/relu_inplace_after", lambda x, w: F.relu(F.conv_transpose1d(x, w), inplace=True),
         (Arg((1, 2, 5)), Arg((2, 3, 3)))),
        ("max_pool1d/k2", lambda x: F.max_pool1d(x, 2), (Arg((1, 2, 6)),)),
        ("max_pool2d/k2", lambda x: F.max_pool2d(x, 2), (image,)),
        ("max_pool2d/indices", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True), (image,)),
        ("avg_pool2d/k2", lambda x: F.avg_pool2d(x, 2), (image,)),
        ("avg_pool2d/padding", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), (image,)),
        ("adaptive_avg_pool2d/2x3", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (image,)),
        ("adaptive_max_pool2d/2", lambda x: F.adaptive_max_pool2d(x, 2), (image,)),
        ("interpolate/nearest", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (Arg((1, 2, 3, 3)),)),
        ("interpolate/bilinear", lambda x: F.interpolate(x, size=(4, 5), mode="bilinear", align_corners=False),
         (Arg((1, 2, 3, 3)),)),
        ("interpolate/nearest_size", lambda x: F.interpolate(x, size=(5, 7), mode="nearest"), (Arg((1, 2, 3, 3)),)),
        ("interpolate/nearest_1.5", lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"),
         (Arg((2, 1, 4, 3)),)),
        ("interpolate/nearest_down", lambda x: F.interpolate(x, size=(2, 3), mode="nearest"), (Arg((1, 2, 5, 7)),)),
        ("interpolate/bilinear_align_corners", lambda x: F.interpolate(x, size=(5, 4), mode="bilinear",
                                                                       align_corners=True), (Arg((1, 2, 3, 3)),)),
        ("interpolate/bilinear_scale2", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
         (Arg((2, 1, 3, 4)),)),
        ("interpolate/bilinear_down", lambda x: F.interpolate(x, size=(3, 2), mode="bilinear"), (Arg((1, 2, 5, 7)),)),
        ("unfold/im2col", lambda x: F.unfold(x, 2, stride=2), (Arg((1, 2, 4, 4)),)),
        ("unfold/overlap_dilation_padding", lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=1),
         (Arg((2, 1, 4, 5)),)),
        ("fold/stride2", lambda x: F.fold(x, (4, 4), 2, stride=2), (Arg((1, 8, 4)),)),
        ("fold/overlap", lambda x: F.fold(x, (3, 4), 2), (Arg((2, 8, 6)),)),
        ("fold/unbatched_padding", lambda x: F.fold(x, (3, 3), 2, padding=1), (Arg((4, 16)),)),
        ("fold/wrong_block_count", lambda x: F.fold(x, (4, 4), 2, stride=2), (Arg((1, 8, 5)),)),
        ("fold/kernel_does_not_divide", lambda x: F.fold(x, (4, 4), 2, stride=2), (Arg((1, 6, 4)),)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _attention(x, w, b, ow, ob, *mask, heads=2, need_weights=True, average=True, mask_type=None):
    return torch._native_multi_head_attention(x, x, x, x.shape[-1], heads, w, b, ow, ob, *mask, need_weights,
                                              average, mask_type)


def _encoder_layer(x, *parameters, mask=None, norm_first=False, use_gelu=False):
    w, b, ow, ob, n1w, n1b, n2w, n2b, f1w, f1b, f2w, f2b = parameters
    return torch._transformer_encoder_layer_fwd(x, 8, 2, w, b, ow, ob, use_gelu, norm_first, 1e-5, n1w, n1b, n2w,
                                                n2b, f1w, f1b, f2w, f2b, mask, None if mask is None else 1)


def _dropout_cases():
    """Dropout in training: seeded inside the call, so that gradcheck's repeated calls draw the
    same mask (upstream's draws are compared bit-exactly in cases/rng.py)."""
    entries = (
        ("dropout/train", seeded(7, partial(F.dropout, p=0.4, training=True))),
        ("dropout/train_inplace", seeded(7, lambda a: (F.dropout(a, 0.4, training=True, inplace=True), a))),
    )
    for name, call in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, (Arg((4, 5)),), dtype)


_KEY_PADDING = ((False, False, True), (False, True, True))


def _training_attention(q, k, w, b, ow, ob, *, heads=2, bias_kv=None, **options):
    """nn.MultiheadAttention's training path (F.multi_head_attention_forward, no fast path):
    sequence-first, 3 queries of batch 2 over keys k, embedding 8."""
    bias_k, bias_v = bias_kv if bias_kv else (None, None)
    return F.multi_head_attention_forward(q, k, k, 8, heads, w, b, bias_k, bias_v, options.pop("zero_attn", False),
                                          options.pop("dropout_p", 0.0), ow, ob, training=True, **options)


def _training_attention_cases():
    self_attention = (Arg((3, 2, 8)), Arg((24, 8), "unit"), Arg((24,)), Arg((8, 8), "unit"), Arg((8,)))
    cross = (Arg((3, 2, 8)), Arg((4, 2, 8))) + self_attention[1:]
    causal = torch.triu(torch.full((3, 3), float("-inf")), diagonal=1)
    entries = (
        ("mha_train/self", lambda x, *p: _training_attention(x, x, *p), self_attention),
        ("mha_train/cross", _training_attention, cross),
        ("mha_train/no_weights", lambda x, *p: _training_attention(x, x, *p, need_weights=False), self_attention),
        ("mha_train/per_head_weights", lambda x, *p: _training_attention(x, x, *p, average_attn_weights=False),
         self_attention),
        ("mha_train/key_padding_mask", lambda x, *p: _training_attention(
            x, x, *p, key_padding_mask=torch.tensor(_KEY_PADDING)), self_attention),
        ("mha_train/causal_float_mask", lambda x, *p: _training_attention(
            x, x, *p, attn_mask=causal.to(x.dtype)), self_attention),
        ("mha_train/bias_kv_zero_attn", lambda x, bk, bv, *p: _training_attention(
            x, x, *p, bias_kv=(bk, bv), zero_attn=True), (self_attention[0], Arg((1, 1, 8)), Arg((1, 1, 8))) +
         self_attention[1:]),
        ("mha_train/dropout", seeded(5, lambda x, *p: _training_attention(x, x, *p, dropout_p=0.3)),
         self_attention),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _transformer_cases():
    """The eval fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer (batch 2,
    3 tokens, embedding 8, 2 heads); a fully masked row comes out NaN as upstream's."""
    projections = (Arg((2, 3, 8)), Arg((24, 8), "unit"), Arg((24,)), Arg((8, 8), "unit"), Arg((8,)))
    padding = Arg((2, 3), "mask")
    entries = (
        ("mha/plain", _attention, projections),
        ("mha/no_weights", partial(_attention, need_weights=False), projections),
        ("mha/per_head_weights", partial(_attention, average=False), projections),
        ("mha/padding_mask", partial(_attention, mask_type=1), projections + (padding,)),
        ("mha/padding_mask_float", lambda *a: _attention(*a[:5], a[5].float(), mask_type=1), projections +
         (padding,)),
        ("mha/full_mask", partial(_attention, mask_type=2), projections + (Arg((2, 2, 3, 3), "mask"),)),
        ("mha/src_mask_refused", partial(_attention, mask_type=0), projections + (padding,)),
        ("mha/no_mask_type", _attention, projections + (padding,)),
        ("mha/heads_do_not_divide", partial(_attention, heads=3), projections),
        ("mha/empty", lambda x, *p: _attention(x[:, :0], *p), projections),
        ("masked_softmax/padding", lambda a, m: torch._masked_softmax(a, m, 1, 1), (Arg((4, 5)), Arg((4, 5), "mask"))),
        ("masked_softmax/dim0", lambda a, m: torch._masked_softmax(a, m, 0, 2), (Arg((4, 5)), Arg((4, 5), "mask"))),
        ("masked_softmax/no_type", lambda a, m: torch._masked_softmax(a, m), (Arg((4, 5)), Arg((4, 5), "mask"))),
        ("masked_softmax/shape", lambda a, m: torch._masked_softmax(a, m, 1, 1), (Arg((4, 5)), Arg((5,), "mask"))),
    )
    layer = projections + (Arg((8,), "pos"), Arg((8,)), Arg((8,), "pos"), Arg((8,)), Arg((16, 8), "unit"),
                           Arg((16,)), Arg((8, 16), "unit"), Arg((8,)))
    entries += (
        ("encoder_layer/post_norm", _encoder_layer, layer),
        ("encoder_layer/pre_norm_gelu", partial(_encoder_layer, norm_first=True, use_gelu=True), layer),
        ("encoder_layer/padding_mask", lambda *a: _encoder_layer(*a[:-1], mask=a[-1]), layer + (padding,)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def cases():
    for name, call in ACTIVATIONS:
        for dtype in ACTIVATION_DTYPES:
            yield Case("F.%s/%s/3x4" % (name, dtype), call, (Arg((3, 4)),), dtype)
        yield Case("F.%s/float32/special" % name, call, (Arg((4, 4), "special"),), "float32")
    # elu, selu and celu share upstream's cpu_kernel_vec kernel: SLEEF on whole blocks of
    # 2 vectors along the innermost dimension, libm on the rest of each row.
    for name, call in (("elu", F.elu), ("selu", F.selu), ("celu", partial(F.celu, alpha=0.5))):
        for dtype in ("float32", "float64"):
            yield Case("F.%s/%s/37" % (name, dtype), call, (Arg((37,)),), dtype)
            yield Case("F.%s/%s/5x13_transposed" % (name, dtype), call, (Arg((5, 13), layout=TRANSPOSED),), dtype)
            yield Case("F.%s/%s/5x13_stepped" % (name, dtype), call, (Arg((5, 13), layout=STEPPED),), dtype)
    yield from _softmax_cases()
    yield from _softmax_order_cases()
    yield from _normalization_cases()
    yield from _loss_cases()
    yield from _conv_pool_cases()
    yield from _dropout_cases()
    yield from _training_attention_cases()
    yield from _transformer_cases()
    yield from _pool1d_cases()
    yield from _pool3d_cases()
    yield from _pool2d_edge_cases()
    yield from _pool2d_backward_cases()
    yield from _max_unpool_cases()
    yield from _pixel_shuffle_cases()
    yield from _bilinear_cases()
    yield from _feature_dropout_cases()
    yield from _embedding_max_norm_cases()
    yield from _embedding_bag_cases()
    yield from _bicubic_cases()
    yield from _fractional_max_pool_cases()


def _pool1d_cases():
    """The 1-D poolings (upstream's 2-D kernels over height 1): batched, unbatched, transposed
    (non-contiguous), an empty batch, and what upstream refuses."""
    signal = Arg((2, 3, 7))
    entries = (
        ("max_pool1d/indices_ceil", lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True, ceil_mode=True),
         (signal,)),
        ("max_pool1d/indices_unbatched", lambda x: F.max_pool1d(x, 2, return_indices=True), (Arg((3, 7)),)),
        ("max_pool1d/indices_dilation_transposed",
         lambda x: F.max_pool1d(x, 2, 1, dilation=2, return_indices=True), (Arg((2, 3, 7), layout=TRANSPOSED),)),
        ("max_pool1d/indices_empty_batch", lambda x: F.max_pool1d(x, 2, return_indices=True), (Arg((0, 3, 7)),)),
        ("max_pool1d/indices_4d", lambda x: F.max_pool1d(x, 2, return_indices=True), (Arg((1, 2, 3, 7)),)),
        ("max_pool1d/indices_pad_too_big", lambda x: F.max_pool1d(x, 2, padding=2, return_indices=True),
         (signal,)),
        ("avg_pool1d/k3", lambda x: F.avg_pool1d(x, 3), (signal,)),
        ("avg_pool1d/ceil_pad_exclude", lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         (signal,)),
        ("avg_pool1d/ceil_pad_include", lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), (signal,)),
        ("avg_pool1d/unbatched", lambda x: F.avg_pool1d(x, 2, 1), (Arg((3, 7)),)),
        ("avg_pool1d/transposed", lambda x: F.avg_pool1d(x, 2), (Arg((2, 3, 7), layout=TRANSPOSED),)),
        ("avg_pool1d/empty_batch", lambda x: F.avg_pool1d(x, 2), (Arg((0, 3, 7)),)),
        ("avg_pool1d/4d", lambda x: F.avg_pool1d(x, 2), (Arg((1, 2, 3, 7)),)),
        ("avg_pool1d/pad_too_big", lambda x: F.avg_pool1d(x, 2, padding=2), (signal,)),
        ("adaptive_avg_pool1d/4", lambda x: F.adaptive_avg_pool1d(x, 4), (signal,)),
        ("adaptive_avg_pool1d/up_9", lambda x: F.adaptive_avg_pool1d(x, 9), (signal,)),
        ("adaptive_avg_pool1d/unbatched", lambda x: F.adaptive_avg_pool1d(x, 3), (Arg((3, 7)),)),
        ("adaptive_avg_pool1d/transposed", lambda x: F.adaptive_avg_pool1d(x, 5), (Arg((2, 3, 7), layout=TRANSPOSED),)),
        ("adaptive_avg_pool1d/empty_batch", lambda x: F.adaptive_avg_pool1d(x, 2), (Arg((0, 3, 7)),)),
        ("adaptive_avg_pool1d/4d", lambda x: F.adaptive_avg_pool1d(x, 2), (Arg((1, 2, 3, 7)),)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _max_pool3d_backward(g, x):
    """upstream's backward operator called directly, on the indices of its forward."""
    indices = F.max_pool3d(x.detach(), (2, 3, 2), (1, 2, 2), (1, 1, 0), 1, return_indices=True)[1]
    return torch.ops.aten.max_pool3d_with_indices_backward(g, x, [2, 3, 2], [1, 2, 2], [1, 1, 0], [1, 1, 1], False,
                                                           indices)


def _adaptive_max_pool3d_backward(g, x):
    indices = F.adaptive_max_pool3d(x.detach(), (2, 3, 2), return_indices=True)[1]
    return torch.ops.aten.adaptive_max_pool3d_backward(g, x, indices)


def _pool3d_cases():
    """The 3-D poolings (depth, height, width): batched 5-D and unbatched 4-D inputs, kernel,
    stride, padding, dilation and ceil_mode per dim, count_include_pad and divisor_override,
    transposed, stepped and permuted (non-contiguous) inputs, an empty batch, NaN and inf
    values, the backward operators called directly, and what upstream refuses."""
    volume = Arg((2, 3, 4, 5, 6))
    entries = (
        ("max_pool3d/k2", lambda x: F.max_pool3d(x, 2), (volume,)),
        ("max_pool3d/indices_stride_padding", lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True),
         (Arg((1, 2, 5, 5, 5)),)),
        ("max_pool3d/indices_ceil_dilation", lambda x: F.max_pool3d(
            x, (2, 3, 2), (1, 2, 2), (1, 1, 0), dilation=(2, 1, 2), ceil_mode=True, return_indices=True),
         (Arg((2, 2, 6, 7, 6)),)),
        ("max_pool3d/ceil_overhang", lambda x: F.max_pool3d(x, 2, 2, ceil_mode=True, return_indices=True),
         (Arg((1, 2, 5, 5, 3)),)),
        ("max_pool3d/unbatched", lambda x: F.max_pool3d(x, 2, 1, return_indices=True), (Arg((3, 4, 5, 6)),)),
        ("max_pool3d/transposed", lambda x: F.max_pool3d(x, (1, 2, 2), return_indices=True),
         (Arg((2, 3, 4, 5, 6), layout=TRANSPOSED),)),
        ("max_pool3d/stepped", lambda x: F.max_pool3d(x, 2, (2, 1, 2)), (Arg((1, 2, 4, 5, 6), layout=STEPPED),)),
        ("max_pool3d/permuted_unbatched", lambda x: F.max_pool3d(x, 2, return_indices=True),
         (Arg((3, 4, 5, 6), layout=CHANNELS_LAST),)),
        ("max_pool3d/nan_inf", lambda x: F.max_pool3d(x, (1, 2, 3), 1, (0, 1, 1), return_indices=True),
         (Arg((1, 2, 3, 4, 5), "special"),)),
        ("max_pool3d/empty_batch", lambda x: F.max_pool3d(x, 2, return_indices=True), (Arg((0, 3, 4, 4, 4)),)),
        ("max_pool3d/empty_channels", lambda x: F.max_pool3d(x, 2), (Arg((2, 0, 4, 4, 4)),)),
        ("max_pool3d/kernel_too_large", lambda x: F.max_pool3d(x, 5), (volume,)),
        ("max_pool3d/kernel_too_large_strided", lambda x: F.max_pool3d(x, (5, 2, 2), 2), (volume,)),
        ("max_pool3d/pad_too_big", lambda x: F.max_pool3d(x, 2, padding=2), (volume,)),
        ("max_pool3d/negative_pad", lambda x: F.max_pool3d(x, 2, padding=-1), (volume,)),
        ("max_pool3d/zero_dilation", lambda x: F.max_pool3d(x, 2, dilation=0), (volume,)),
        ("max_pool3d/two_ints", lambda x: F.max_pool3d(x, (2, 2)), (volume,)),
        ("max_pool3d/input_3d", lambda x: F.max_pool3d(x, 2), (Arg((3, 4, 5)),)),
        ("max_pool3d/backward_op", _max_pool3d_backward, (Arg((2, 2, 5, 3, 2)), Arg((2, 2, 4, 5, 4)))),
        ("avg_pool3d/k2", lambda x: F.avg_pool3d(x, 2), (volume,)),
        ("avg_pool3d/stride_padding_exclude", lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
         (Arg((1, 2, 5, 6, 5)),)),
        ("avg_pool3d/ceil_pad_include", lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 2, 2), (1, 1, 1), ceil_mode=True),
         (Arg((2, 2, 5, 4, 6)),)),
        ("avg_pool3d/ceil_pad_exclude", lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         (Arg((1, 2, 6, 5, 4)),)),
        ("avg_pool3d/divisor_override", lambda x: F.avg_pool3d(x, 2, 1, 1, divisor_override=3),
         (Arg((1, 2, 3, 4, 5)),)),
        ("avg_pool3d/unbatched", lambda x: F.avg_pool3d(x, (2, 1, 3)), (Arg((3, 4, 5, 6)),)),
        ("avg_pool3d/transposed", lambda x: F.avg_pool3d(x, 2, 1), (Arg((2, 3, 4, 5, 6), layout=TRANSPOSED),)),
        ("avg_pool3d/stepped", lambda x: F.avg_pool3d(x, 2), (Arg((1, 2, 4, 5, 6), layout=STEPPED),)),
        ("avg_pool3d/empty_batch", lambda x: F.avg_pool3d(x, 2), (Arg((0, 3, 4, 4, 4)),)),
        ("avg_pool3d/empty_channels", lambda x: F.avg_pool3d(x, 2), (Arg((2, 0, 4, 4, 4)),)),
        # With padding the output has a cell, but upstream's 3-D check wants the kernel inside the input.
        ("avg_pool3d/kernel_larger_than_input_padded", lambda x: F.avg_pool3d(x, 2, padding=1),
         (Arg((1, 2, 1, 4, 4)),)),
        ("avg_pool3d/kernel_too_large", lambda x: F.avg_pool3d(x, 5), (volume,)),
        ("avg_pool3d/pad_too_big", lambda x: F.avg_pool3d(x, 2, padding=2), (volume,)),
        ("avg_pool3d/divisor_zero", lambda x: F.avg_pool3d(x, 2, divisor_override=0), (volume,)),
        ("avg_pool3d/zero_stride", lambda x: F.avg_pool3d(x, 2, stride=0), (volume,)),
        ("avg_pool3d/two_ints", lambda x: F.avg_pool3d(x, (2, 2)), (volume,)),
        ("avg_pool3d/input_6d", lambda x: F.avg_pool3d(x, 2), (Arg((1, 2, 3, 4, 4, 4)),)),
        ("avg_pool3d/backward_op", lambda g, x: torch.ops.aten.avg_pool3d_backward(
            g, x, [3, 2, 3], [2, 2, 2], [1, 1, 1], True, False, None), (Arg((2, 2, 3, 3, 3)), Arg((2, 2, 5, 4, 5)))),
        ("avg_pool3d/backward_op_divisor", lambda g, x: torch.ops.aten.avg_pool3d_backward(
            g, x, [2, 2, 2], [1, 1, 1], [1, 1, 1], False, True, 5), (Arg((1, 2, 4, 5, 6)), Arg((1, 2, 3, 4, 5)))),
        ("adaptive_avg_pool3d/2x3x2", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (volume,)),
        ("adaptive_avg_pool3d/1", lambda x: F.adaptive_avg_pool3d(x, 1), (volume,)),
        ("adaptive_avg_pool3d/up_5x6x7", lambda x: F.adaptive_avg_pool3d(x, (5, 6, 7)), (volume,)),
        ("adaptive_avg_pool3d/none", lambda x: F.adaptive_avg_pool3d(x, (None, 3, 2)), (volume,)),
        ("adaptive_avg_pool3d/unbatched", lambda x: F.adaptive_avg_pool3d(x, 3), (Arg((3, 4, 5, 6)),)),
        ("adaptive_avg_pool3d/transposed", lambda x: F.adaptive_avg_pool3d(x, (3, 2, 4)),
         (Arg((2, 3, 4, 5, 6), layout=TRANSPOSED),)),
        ("adaptive_avg_pool3d/empty_batch", lambda x: F.adaptive_avg_pool3d(x, 2), (Arg((0, 3, 4, 4, 4)),)),
        ("adaptive_avg_pool3d/zero_output", lambda x: F.adaptive_avg_pool3d(x, (0, 2, 2)), (volume,)),
        ("adaptive_avg_pool3d/1_of_3d_input", lambda x: F.adaptive_avg_pool3d(x, 1), (Arg((3, 4, 5)),)),
        ("adaptive_avg_pool3d/input_3d", lambda x: F.adaptive_avg_pool3d(x, 2), (Arg((3, 4, 5)),)),
        ("adaptive_avg_pool3d/empty_channels", lambda x: F.adaptive_avg_pool3d(x, 2), (Arg((2, 0, 4, 4, 4)),)),
        ("adaptive_avg_pool3d/negative", lambda x: F.adaptive_avg_pool3d(x, (-1, 2, 2)), (volume,)),
        ("adaptive_avg_pool3d/two_ints", lambda x: F.adaptive_avg_pool3d(x, (2, 2)), (volume,)),
        ("adaptive_avg_pool3d/backward_op", lambda g, x: torch.ops.aten._adaptive_avg_pool3d_backward(g, x),
         (Arg((2, 2, 3, 2, 4)), Arg((2, 2, 5, 4, 6)))),
        ("adaptive_max_pool3d/2", lambda x: F.adaptive_max_pool3d(x, 2), (volume,)),
        ("adaptive_max_pool3d/indices_2x3x4", lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True),
         (volume,)),
        ("adaptive_max_pool3d/up_5x6x7", lambda x: F.adaptive_max_pool3d(x, (5, 6, 7), return_indices=True),
         (volume,)),
        ("adaptive_max_pool3d/unbatched", lambda x: F.adaptive_max_pool3d(x, 3, return_indices=True),
         (Arg((3, 4, 5, 6)),)),
        ("adaptive_max_pool3d/transposed", lambda x: F.adaptive_max_pool3d(x, (3, 2, 4), return_indices=True),
         (Arg((2, 3, 4, 5, 6), layout=TRANSPOSED),)),
        ("adaptive_max_pool3d/nan_inf", lambda x: F.adaptive_max_pool3d(x, (2, 2, 3), return_indices=True),
         (Arg((1, 2, 3, 4, 5), "special"),)),
        ("adaptive_max_pool3d/empty_batch", lambda x: F.adaptive_max_pool3d(x, 2), (Arg((0, 3, 4, 4, 4)),)),
        ("adaptive_max_pool3d/input_3d", lambda x: F.adaptive_max_pool3d(x, 2), (Arg((3, 4, 5)),)),
        ("adaptive_max_pool3d/empty_channels", lambda x: F.adaptive_max_pool3d(x, 2), (Arg((2, 0, 4, 4, 4)),)),
        ("adaptive_max_pool3d/two_ints", lambda x: F.adaptive_max_pool3d(x, (2, 2)), (volume,)),
        ("adaptive_max_pool3d/backward_op", _adaptive_max_pool3d_backward,
         (Arg((2, 2, 2, 3, 2)), Arg((2, 2, 4, 5, 4)))),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    # The dtypes upstream's CPU kernels take: float and double; avg_pool3d also int64,
    # adaptive_avg_pool3d also half (its (1, 1, 1) output, a mean, also bfloat16).
    dtype_entries = (
        ("max_pool3d", lambda x: F.max_pool3d(x, 2), ("bfloat16", "float16", "int64")),
        ("avg_pool3d", lambda x: F.avg_pool3d(x, 2, 1, 1), ("int64", "int32", "bfloat16", "float16")),
        ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), ("float16", "bfloat16", "int64")),
        ("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, 2), ("bfloat16", "float16", "int64")),
    )
    for op, call, dtypes in dtype_entries:
        for dtype in dtypes:
            yield Case("%s/%s/dtype" % (op, dtype), call, (volume,), dtype)
    yield Case("adaptive_avg_pool3d/bfloat16/1", lambda x: F.adaptive_avg_pool3d(x, 1), (volume,), "bfloat16")
    yield Case("adaptive_avg_pool3d/float16/backward_op", lambda g, x: torch.ops.aten._adaptive_avg_pool3d_backward(
        g, x), (Arg((2, 2, 3, 2, 4)), Arg((2, 2, 5, 4, 6))), "float16")
    # upstream's integer backward divides each output's gradient in integers before adding.
    yield Case("avg_pool3d/int64/backward_op", lambda g, x: torch.ops.aten.avg_pool3d_backward(
        g, x, [2, 2, 2], [1, 1, 1], [1, 0, 1], False, True, None), (Arg((1, 2, 4, 3, 5)), Arg((1, 2, 3, 4, 4))), "int64")
    yield Case("avg_pool3d/int64/backward_op_exclude_pad", lambda g, x: torch.ops.aten.avg_pool3d_backward(
        g, x, 3, 2, 1, True, False, None), (Arg((2, 2, 2, 3, 3)), Arg((2, 2, 3, 4, 5))), "int64")


def _pool2d_edge_cases():
    """2-D and 1-D poolings where the shared N-d code must agree with upstream: NaN (every
    later NaN takes the index), windows that would start past the input (floor division of
    the output size), empty channels, and 5-D inputs."""
    entries = (
        ("max_pool2d/nan_inf", lambda x: F.max_pool2d(x, (2, 3), 1, (1, 1), return_indices=True),
         (Arg((1, 2, 4, 5), "special"),)),
        ("max_pool1d/nan_inf", lambda x: F.max_pool1d(x, 3, 1, 1, return_indices=True), (Arg((2, 2, 7), "special"),)),
        ("adaptive_max_pool2d/nan_inf", lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True),
         (Arg((1, 2, 4, 5), "special"),)),
        ("max_pool2d/kernel_too_large_strided", lambda x: F.max_pool2d(x, 5, 2), (Arg((1, 1, 4, 4)),)),
        ("avg_pool2d/kernel_too_large_strided", lambda x: F.avg_pool2d(x, 5, 2), (Arg((1, 1, 4, 4)),)),
        ("max_pool2d/empty_channels", lambda x: F.max_pool2d(x, 2), (Arg((2, 0, 4, 4)),)),
        ("avg_pool2d/empty_channels", lambda x: F.avg_pool2d(x, 2), (Arg((2, 0, 4, 4)),)),
        ("max_pool2d/input_5d", lambda x: F.max_pool2d(x, 2), (Arg((1, 2, 3, 4, 4)),)),
        ("avg_pool2d/input_5d", lambda x: F.avg_pool2d(x, 2), (Arg((1, 2, 3, 4, 4)),)),
        ("avg_pool2d/divisor_override", lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4), (Arg((2, 2, 5, 6)),)),
        ("avg_pool2d/ceil_pad_exclude", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         (Arg((2, 2, 6, 5)),)),
        ("max_pool2d/ceil_dilation_unbatched", lambda x: F.max_pool2d(
            x, (2, 3), (2, 1), (1, 1), dilation=(2, 1), ceil_mode=True, return_indices=True), (Arg((3, 6, 5)),)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


A = torch.ops.aten


def _other_float(t):
    """A dtype other than t's, for upstream's check that grad_output has the input's."""
    return t.to(torch.float64 if t.dtype != torch.float64 else torch.float32)


def _max_pool2d_backward(*pool):
    """max_pool2d_with_indices_backward called directly with (kernel, stride, padding,
    dilation, ceil_mode), on the indices of its forward."""
    def call(g, x):
        # (Its indices from float64, which holds every dtype's values: the refused dtypes
        # reach the backward operator.)
        indices = F.max_pool2d(x.detach().double(), *pool[:4], ceil_mode=pool[4], return_indices=True)[1]
        return A.max_pool2d_with_indices_backward(g, x, *pool, indices)
    return call


def _adaptive_max_pool2d_backward(size, convert=lambda g, i: (g, i)):
    def call(g, x):
        g, indices = convert(g, F.adaptive_max_pool2d(x.detach().double(), size, return_indices=True)[1])
        return A.adaptive_max_pool2d_backward(g, x, indices)
    return call


def _pool2d_backward_cases():
    """The 2-D backward operators called directly: non-contiguous grads, ceil_mode, padding,
    dilation, divisor_override, unbatched inputs, an empty batch, the dtypes upstream's CPU
    kernels take and refuse, and upstream's checks. Their @grad twins differentiate the
    backward operators themselves (upstream's *BackwardBackward0 nodes)."""
    k23 = ([2, 3], [1, 2], [1, 1], [1, 1], True)
    entries = (
        ("max_pool2d/backward_op_ceil_pad", _max_pool2d_backward(*k23),
         (Arg((2, 3, 6, 4), layout=TRANSPOSED), Arg((2, 3, 5, 6)))),
        ("max_pool2d/backward_op_dilation_unbatched", _max_pool2d_backward([2], [1], [1], [2], False),
         (Arg((3, 7, 6), layout=STEPPED), Arg((3, 7, 6)))),
        ("max_pool2d/backward_op_stride_omitted", _max_pool2d_backward([3, 2], [], [1, 0], [1], False),
         (Arg((1, 2, 2, 3)), Arg((1, 2, 5, 6), layout=TRANSPOSED))),
        ("max_pool2d/backward_op_empty_batch", _max_pool2d_backward([2], [2], [0], [1], False),
         (Arg((0, 2, 2, 2)), Arg((0, 2, 4, 4)))),
        ("max_pool2d/backward_op_grad_size", lambda g, x: A.max_pool2d_with_indices_backward(
            g, x, [2], [2], [0], [1], False, F.max_pool2d(x.detach(), 2, return_indices=True)[1]),
         (Arg((1, 2, 3, 2)), Arg((1, 2, 4, 4)))),
        ("max_pool2d/backward_op_grad_dtype", lambda g, x: A.max_pool2d_with_indices_backward(
            _other_float(g), x, [2], [2], [0], [1], False, F.max_pool2d(x.detach(), 2, return_indices=True)[1]),
         (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("max_pool2d/backward_op_float_indices", lambda g, x: A.max_pool2d_with_indices_backward(
            g, x, [2], [2], [0], [1], False, F.max_pool2d(x.detach(), 2, return_indices=True)[1].to(g.dtype)),
         (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("max_pool2d/backward_op_input_2d", lambda g, x: A.max_pool2d_with_indices_backward(
            g, x, [2], [2], [0], [1], False, torch.zeros(2, 2, dtype=torch.long)), (Arg((2, 2)), Arg((4, 4)))),
        ("max_pool2d/backward_op_kernel_three", lambda g, x: A.max_pool2d_with_indices_backward(
            g, x, [2, 2, 2], [2], [0], [1], False, torch.zeros(1, 2, 2, 2, dtype=torch.long)),
         (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("max_pool2d/backward_op_empty_channels", lambda g, x: A.max_pool2d_with_indices_backward(
            g, x, [2], [2], [0], [1], False, torch.zeros(1, 0, 2, 2, dtype=torch.long)),
         (Arg((1, 0, 2, 2)), Arg((1, 0, 4, 4)))),
        ("avg_pool2d/backward_op_ceil_pad_exclude", lambda g, x: A.avg_pool2d_backward(
            g, x, [3], [2], [1], True, False, None), (Arg((2, 2, 4, 3), layout=TRANSPOSED), Arg((2, 2, 6, 5)))),
        ("avg_pool2d/backward_op_ceil_pad_include", lambda g, x: A.avg_pool2d_backward(
            g, x, [3, 2], [2, 2], [1, 1], True, True, None), (Arg((1, 2, 4, 4)), Arg((1, 2, 6, 6)))),
        ("avg_pool2d/backward_op_divisor", lambda g, x: A.avg_pool2d_backward(
            g, x, [2, 3], [1, 2], [1, 1], False, True, 3), (Arg((1, 2, 5, 3), layout=STEPPED), Arg((1, 2, 4, 5)))),
        ("avg_pool2d/backward_op_unbatched_stride_omitted", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [], [0], False, True, None), (Arg((3, 2, 3), layout=STEPPED), Arg((3, 4, 6)))),
        ("avg_pool2d/backward_op_empty_batch", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0], False, True, None), (Arg((0, 2, 2, 2)), Arg((0, 2, 4, 4)))),
        ("avg_pool2d/backward_op_grad_size", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0], False, True, None), (Arg((1, 2, 2, 3)), Arg((1, 2, 4, 4)))),
        ("avg_pool2d/backward_op_grad_rank", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0], False, True, None), (Arg((2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("avg_pool2d/backward_op_grad_dtype", lambda g, x: A.avg_pool2d_backward(
            _other_float(g), x, [2], [2], [0], False, True, None), (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("avg_pool2d/backward_op_divisor_zero", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0], False, True, 0), (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("avg_pool2d/backward_op_input_2d", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0], False, True, None), (Arg((2, 2)), Arg((4, 4)))),
        ("avg_pool2d/backward_op_input_5d", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0], False, True, None), (Arg((1, 1, 2, 2, 2)), Arg((1, 1, 2, 4, 4)))),
        ("avg_pool2d/backward_op_padding_three", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [0, 0, 0], False, True, None), (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("avg_pool2d/backward_op_pad_too_big", lambda g, x: A.avg_pool2d_backward(
            g, x, [2], [2], [2], False, True, None), (Arg((1, 2, 4, 4)), Arg((1, 2, 4, 4)))),
        ("adaptive_max_pool2d/backward_op", _adaptive_max_pool2d_backward((3, 2)),
         (Arg((2, 3, 3, 2), layout=TRANSPOSED), Arg((2, 3, 5, 7)))),
        ("adaptive_max_pool2d/backward_op_up_unbatched", _adaptive_max_pool2d_backward((6, 4)),
         (Arg((3, 6, 4), layout=STEPPED), Arg((3, 4, 3)))),
        ("adaptive_max_pool2d/backward_op_grad_dtype",
         _adaptive_max_pool2d_backward(2, lambda g, i: (_other_float(g), i)), (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("adaptive_max_pool2d/backward_op_float_indices",
         _adaptive_max_pool2d_backward(2, lambda g, i: (g, i.to(g.dtype))), (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("adaptive_max_pool2d/backward_op_input_2d", lambda g, x: A.adaptive_max_pool2d_backward(
            g, x, torch.zeros(2, 2, dtype=torch.long)), (Arg((2, 2)), Arg((4, 4)))),
        ("adaptive_max_pool2d/backward_op_empty_channels", lambda g, x: A.adaptive_max_pool2d_backward(
            g, x, torch.zeros(1, 0, 2, 2, dtype=torch.long)), (Arg((1, 0, 2, 2)), Arg((1, 0, 4, 4)))),
        ("adaptive_avg_pool2d/backward_op", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((2, 3, 3, 4), layout=STEPPED), Arg((2, 3, 5, 7)))),
        ("adaptive_avg_pool2d/backward_op_up_unbatched", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((2, 7, 6), layout=TRANSPOSED), Arg((2, 5, 4)))),
        ("adaptive_avg_pool2d/backward_op_empty_batch", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((0, 2, 2, 3)), Arg((0, 2, 4, 5)))),
        ("adaptive_avg_pool2d/backward_op_grad_dtype", lambda g, x: A._adaptive_avg_pool2d_backward(
            _other_float(g), x), (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("adaptive_avg_pool2d/backward_op_input_2d", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((2, 2)), Arg((4, 4)))),
        ("adaptive_avg_pool2d/backward_op_input_5d", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((1, 1, 2, 2, 2)), Arg((1, 1, 2, 4, 4)))),
        ("adaptive_avg_pool2d/backward_op_empty_channels", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((1, 0, 2, 2)), Arg((1, 0, 4, 4)))),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    # The dtypes: max and adaptive pooling's backward float, double and bfloat16,
    # avg_pool2d_backward also int64; the others refused by the kernel's name.
    dtype_entries = (
        ("max_pool2d", _max_pool2d_backward(*k23), (Arg((2, 3, 6, 4)), Arg((2, 3, 5, 6))),
         ("bfloat16", "float16", "int64")),
        ("avg_pool2d", lambda g, x: A.avg_pool2d_backward(g, x, [3], [2], [1], True, False, None),
         (Arg((2, 2, 4, 3)), Arg((2, 2, 6, 5))), ("bfloat16", "int64", "float16", "int32")),
        ("adaptive_max_pool2d", _adaptive_max_pool2d_backward((3, 2)), (Arg((2, 3, 3, 2)), Arg((2, 3, 5, 7))),
         ("bfloat16", "float16", "int64")),
        ("adaptive_avg_pool2d", lambda g, x: A._adaptive_avg_pool2d_backward(g, x),
         (Arg((2, 3, 3, 4)), Arg((2, 3, 5, 7))), ("bfloat16", "float16", "int64")),
    )
    for op, call, args, dtypes in dtype_entries:
        for dtype in dtypes:
            yield Case("%s/%s/backward_op_dtype" % (op, dtype), call, args, dtype)


def _unpool(pool, unpool, *pool_args, **unpool_kwargs):
    """max_unpool of an input v (a leaf of its own) at the indices max pooling x chose."""
    def call(v, x):
        indices = pool(x.detach(), *pool_args, return_indices=True)[1]
        return unpool(v, indices, *pool_args, **unpool_kwargs)
    return call


def _unpool_at(indices, unpool, *args):
    """max_unpool at the given indices (repeated, negative or past the output)."""
    return lambda v: unpool(v, torch.tensor(indices).view(v.shape), *args)


def _max_unpool_cases():
    """max_unpool2d/3d (forward and, by the @grad twins, backward): kernels, strides and
    padding through F, output_size, unbatched inputs, non-contiguous values, an index taken
    twice (the later element wins), an empty batch, and upstream's refusals, an index outside
    the output among them."""
    entries = (
        ("max_unpool2d/k2", _unpool(F.max_pool2d, F.max_unpool2d, 2), (Arg((2, 3, 2, 3)), Arg((2, 3, 4, 6)))),
        ("max_unpool2d/k3_s2_p1_output_size", _unpool(F.max_pool2d, F.max_unpool2d, 3, 2, 1, output_size=(6, 5)),
         (Arg((1, 2, 3, 3), layout=TRANSPOSED), Arg((1, 2, 6, 5)))),
        ("max_unpool2d/unbatched", _unpool(F.max_pool2d, F.max_unpool2d, (2, 3), (1, 2)),
         (Arg((3, 4, 2), layout=STEPPED), Arg((3, 5, 6)))),
        ("max_unpool2d/empty_batch", _unpool(F.max_pool2d, F.max_unpool2d, 2), (Arg((0, 2, 2, 2)), Arg((0, 2, 4, 4)))),
        ("max_unpool2d/repeated_index", _unpool_at([3, 0, 3, 3, 8, 8, 1, 0], A.max_unpool2d, [3, 3]),
         (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/index_past_output", _unpool_at([3, 0, 9, 3, 8, 8, 1, 0], A.max_unpool2d, [3, 3]),
         (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/negative_index", _unpool_at([3, 0, 2, 3, -1, 8, 1, 0], A.max_unpool2d, [3, 3]),
         (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/indices_shape", lambda v: A.max_unpool2d(v, torch.zeros(1, 2, 1, 2, dtype=torch.long), [3, 3]),
         (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/int32_indices", lambda v: A.max_unpool2d(v, torch.zeros(1, 2, 2, 2, dtype=torch.int32), [3, 3]),
         (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/input_2d", lambda v: A.max_unpool2d(v, torch.zeros(2, 2, dtype=torch.long), [3, 3]),
         (Arg((2, 2)),)),
        ("max_unpool2d/output_size_three", lambda v: A.max_unpool2d(
            v, torch.zeros(1, 2, 2, 2, dtype=torch.long), [3, 3, 3]), (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/empty_channels", lambda v: A.max_unpool2d(v, torch.zeros(1, 0, 2, 2, dtype=torch.long), [3, 3]),
         (Arg((1, 0, 2, 2)),)),
        ("max_unpool2d/negative_output_size", lambda v: A.max_unpool2d(
            v, torch.zeros(1, 2, 2, 2, dtype=torch.long), [3, -1]), (Arg((1, 2, 2, 2)),)),
        ("max_unpool2d/F_output_size_too_big", _unpool(F.max_pool2d, F.max_unpool2d, 2, output_size=(9, 9)),
         (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4)))),
        ("max_unpool3d/k2", _unpool(F.max_pool3d, F.max_unpool3d, 2), (Arg((2, 2, 2, 2, 3)), Arg((2, 2, 4, 5, 6)))),
        ("max_unpool3d/k3_s2_p1_output_size", _unpool(F.max_pool3d, F.max_unpool3d, 3, 2, 1, output_size=(5, 6, 5)),
         (Arg((1, 2, 3, 3, 3), layout=TRANSPOSED), Arg((1, 2, 5, 6, 5)))),
        ("max_unpool3d/unbatched", _unpool(F.max_pool3d, F.max_unpool3d, (1, 2, 2)),
         (Arg((3, 3, 2, 2), layout=STEPPED), Arg((3, 3, 4, 5)))),
        ("max_unpool3d/empty_batch", _unpool(F.max_pool3d, F.max_unpool3d, 2),
         (Arg((0, 2, 2, 2, 2)), Arg((0, 2, 4, 4, 4)))),
        ("max_unpool3d/repeated_index", _unpool_at([3, 0, 3, 3, 7, 7, 1, 0], A.max_unpool3d, [2, 2, 2], [2, 2, 2],
                                                   [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/index_past_output", _unpool_at([3, 0, 8, 3, 9, 7, 1, 0], A.max_unpool3d, [2, 2, 2],
                                                      [2, 2, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/negative_index", _unpool_at([3, 0, 2, 3, -2, 7, 1, 0], A.max_unpool3d, [2, 2, 2],
                                                   [2, 2, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/indices_shape", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 1, 1, 2, 2, dtype=torch.long), [2, 2, 2], [2, 2, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/float_indices", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 2, 1, 2, 2), [2, 2, 2], [2, 2, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/input_3d", lambda v: A.max_unpool3d(
            v, torch.zeros(2, 2, 2, dtype=torch.long), [2, 2, 2], [2, 2, 2], [0, 0, 0]), (Arg((2, 2, 2)),)),
        ("max_unpool3d/stride_two", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 2, 1, 2, 2, dtype=torch.long), [2, 2, 2], [2, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/padding_two", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 2, 1, 2, 2, dtype=torch.long), [2, 2, 2], [2, 2, 2], [0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/zero_stride", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 2, 1, 2, 2, dtype=torch.long), [2, 2, 2], [2, 0, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/negative_output_size", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 2, 1, 2, 2, dtype=torch.long), [-2, 2, 2], [2, 2, 2], [0, 0, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/negative_padding", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 2, 1, 2, 2, dtype=torch.long), [2, 2, 2], [2, 2, 2], [0, -1, 0]), (Arg((1, 2, 1, 2, 2)),)),
        ("max_unpool3d/empty_channels", lambda v: A.max_unpool3d(
            v, torch.zeros(1, 0, 1, 2, 2, dtype=torch.long), [2, 2, 2], [2, 2, 2], [0, 0, 0]), (Arg((1, 0, 1, 2, 2)),)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    for dtype in ("bfloat16", "float16", "int64"):
        yield Case("max_unpool2d/%s/dtype" % dtype, _unpool(F.max_pool2d, F.max_unpool2d, 2),
                   (Arg((1, 2, 2, 2)), Arg((1, 2, 4, 4), dtype="float32")), dtype)
        yield Case("max_unpool3d/%s/dtype" % dtype, _unpool(F.max_pool3d, F.max_unpool3d, 2),
                   (Arg((1, 2, 2, 2, 2)), Arg((1, 2, 4, 4, 4), dtype="float32")), dtype)


def _pixel_shuffle_cases():
    """pixel_shuffle and pixel_unshuffle: batched, unbatched, extra leading dims, transposed,
    empty, and the shapes upstream refuses."""
    entries = (
        ("pixel_shuffle/r2", lambda x: F.pixel_shuffle(x, 2), (Arg((2, 8, 3, 2)),)),
        ("pixel_shuffle/r3_unbatched", lambda x: F.pixel_shuffle(x, 3), (Arg((9, 2, 3)),)),
        ("pixel_shuffle/two_batch_dims", lambda x: F.pixel_shuffle(x, 2), (Arg((2, 1, 4, 2, 3)),)),
        ("pixel_shuffle/transposed", lambda x: F.pixel_shuffle(x, 2), (Arg((1, 4, 3, 2), layout=TRANSPOSED),)),
        ("pixel_shuffle/empty", lambda x: F.pixel_shuffle(x, 2), (Arg((0, 4, 3, 2)),)),
        ("pixel_shuffle/channels_do_not_divide", lambda x: F.pixel_shuffle(x, 2), (Arg((1, 6, 3, 2)),)),
        ("pixel_shuffle/2d", lambda x: F.pixel_shuffle(x, 2), (Arg((4, 3)),)),
        ("pixel_unshuffle/r2", lambda x: F.pixel_unshuffle(x, 2), (Arg((2, 3, 4, 6)),)),
        ("pixel_unshuffle/r3_unbatched", lambda x: F.pixel_unshuffle(x, 3), (Arg((2, 3, 6)),)),
        ("pixel_unshuffle/transposed", lambda x: F.pixel_unshuffle(x, 2), (Arg((1, 2, 4, 6), layout=TRANSPOSED),)),
        ("pixel_unshuffle/empty", lambda x: F.pixel_unshuffle(x, 2), (Arg((0, 2, 4, 2)),)),
        ("pixel_unshuffle/height_does_not_divide", lambda x: F.pixel_unshuffle(x, 2), (Arg((1, 2, 3, 4)),)),
        ("pixel_unshuffle/zero_factor", lambda x: F.pixel_unshuffle(x, 0), (Arg((1, 2, 4, 4)),)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _bilinear_cases():
    """F.bilinear: batched with and without bias, extra batch dims, unbatched, transposed,
    an empty batch, and what upstream refuses."""
    weight, bias = Arg((6, 4, 5)), Arg((6,))
    entries = (
        ("bilinear/bias", F.bilinear, (Arg((3, 4)), Arg((3, 5)), weight, bias)),
        ("bilinear/no_bias", F.bilinear, (Arg((3, 4)), Arg((3, 5)), weight)),
        ("bilinear/two_batch_dims", F.bilinear, (Arg((2, 3, 4)), Arg((2, 3, 5)), weight, bias)),
        ("bilinear/unbatched", F.bilinear, (Arg((4,)), Arg((5,)), weight, bias)),
        ("bilinear/transposed", F.bilinear, (Arg((3, 4), layout=TRANSPOSED), Arg((3, 5)), weight, bias)),
        ("bilinear/empty", F.bilinear, (Arg((0, 4)), Arg((0, 5)), weight, bias)),
        ("bilinear/batch_mismatch", F.bilinear, (Arg((3, 4)), Arg((2, 5)), weight, bias)),
        ("bilinear/dtype_mismatch", lambda a, b, w: F.bilinear(a, b.to(torch.float16), w),
         (Arg((3, 4)), Arg((3, 5)), weight)),
        ("_trilinear/unroll_summed_dim", lambda a, w, b: torch._trilinear(a, w, b, [1, 3], [0], [1, 2], [2, 3], 2),
         (Arg((3, 4)), weight, Arg((3, 5)))),
        ("_trilinear/unroll_out_of_range", lambda a, w, b: torch._trilinear(a, w, b, [1, 3], [0], [1, 2], [2, 3], 4),
         (Arg((3, 4)), weight, Arg((3, 5)))),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _feature_dropout_cases():
    """dropout2d/3d (feature_dropout), alpha_dropout and feature_alpha_dropout in training, seeded
    inside the call as _dropout_cases: batched, unbatched, transposed, empty, and refusals."""
    entries = (
        ("feature_dropout/2d", seeded(3, partial(F.dropout2d, p=0.4, training=True)), Arg((2, 3, 2, 2))),
        ("feature_dropout/2d_unbatched", seeded(3, partial(F.dropout2d, p=0.4, training=True)), Arg((3, 2, 2))),
        ("feature_dropout/3d", seeded(4, partial(F.dropout3d, p=0.5, training=True)), Arg((2, 3, 1, 2, 2))),
        ("feature_dropout/2d_transposed", seeded(3, partial(F.dropout2d, p=0.4, training=True)),
         Arg((2, 3, 2, 3), layout=TRANSPOSED)),
        ("feature_dropout/2d_inplace", seeded(3, lambda a: (F.dropout2d(a, 0.4, True, inplace=True), a)),
         Arg((2, 3, 2, 2))),
        ("feature_dropout/empty", seeded(3, partial(F.dropout2d, p=0.4, training=True)), Arg((0, 3, 2, 2))),
        ("feature_dropout/p1", seeded(3, partial(F.dropout2d, p=1.0, training=True)), Arg((2, 3, 2, 2))),
        ("feature_dropout/eval", partial(F.dropout2d, p=0.4, training=False), Arg((2, 3, 2, 2))),
        ("feature_dropout/1d_refused", seeded(3, lambda a: torch.feature_dropout(a, 0.4, True)), Arg((5,))),
        ("feature_dropout/p_out_of_range", lambda a: torch.feature_dropout(a, 1.5, True), Arg((2, 3))),
        ("alpha_dropout/train", seeded(5, partial(F.alpha_dropout, p=0.3, training=True)), Arg((4, 5))),
        ("alpha_dropout/unbatched_transposed", seeded(5, partial(F.alpha_dropout, p=0.3, training=True)),
         Arg((4, 5), layout=TRANSPOSED)),
        ("alpha_dropout/inplace", seeded(5, lambda a: (F.alpha_dropout(a, 0.3, True, inplace=True), a)),
         Arg((4, 5))),
        ("alpha_dropout/empty", seeded(5, partial(F.alpha_dropout, p=0.3, training=True)), Arg((0, 5))),
        ("alpha_dropout/p1", seeded(5, partial(F.alpha_dropout, p=1.0, training=True)), Arg((4, 5))),
        ("alpha_dropout/p_out_of_range", lambda a: torch.alpha_dropout(a, -0.5, True), Arg((4, 5))),
        ("feature_alpha_dropout/train", seeded(6, partial(F.feature_alpha_dropout, p=0.3, training=True)),
         Arg((2, 3, 4))),
        ("feature_alpha_dropout/inplace",
         seeded(6, lambda a: (F.feature_alpha_dropout(a, 0.3, True, inplace=True), a)), Arg((2, 3, 4))),
    )
    for name, call, arg in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, (arg,), dtype)


def _embedding_max_norm_cases():
    """F.embedding with max_norm: the looked-up rows renormalised in place (embedding_renorm_,
    under no_grad), then looked up; the result and the renormalised weight both compared."""
    def renormed(**options):
        def call(indices, weight):
            return F.embedding(indices, weight, **options), weight
        return call
    indices = Arg((2, 3), ("index", 5), "int64")
    entries = (
        ("embedding/max_norm", renormed(max_norm=1.0), (indices, Arg((5, 3)))),
        ("embedding/max_norm_p1_padding", renormed(max_norm=2.0, norm_type=1.0, padding_idx=1), (indices, Arg((5, 3)))),
        ("embedding/max_norm_unbatched", renormed(max_norm=1.0), (Arg((4,), ("index", 5), "int64"), Arg((5, 3)))),
        ("embedding/max_norm_transposed", renormed(max_norm=1.5), (indices, Arg((5, 3), layout=TRANSPOSED))),
        ("embedding/max_norm_empty", renormed(max_norm=1.0), (Arg((0,), ("index", 5), "int64"), Arg((5, 3)))),
        ("embedding/max_norm_out_of_range", lambda w: F.embedding(torch.tensor([1, 7]), w, max_norm=1.0),
         (Arg((5, 3)),)),
        ("embedding_renorm_/3d_weight", lambda w: torch.embedding_renorm_(w, torch.tensor([1]), 1.0, 2.0),
         (Arg((5, 3, 1)),)),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _embedding_bag_cases():
    """F.embedding_bag: modes sum/mean/max over 1-D indices with offsets (an empty bag among
    them) and 2-D fixed-length bags, include_last_offset, per_sample_weights, padding_idx, a
    transposed weight, no indices, and refusals."""
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 4])
    offsets = torch.tensor([0, 2, 2, 5])
    weight = Arg((6, 3))

    def bag(**options):
        return lambda w: F.embedding_bag(indices, w, offsets, **options)
    entries = [("embedding_bag/%s" % mode, bag(mode=mode), (weight,)) for mode in ("sum", "mean", "max")]
    entries += [("embedding_bag/%s_padding" % mode, bag(mode=mode, padding_idx=4), (weight,))
                for mode in ("sum", "mean", "max")]
    entries += [
        ("embedding_bag/2d_mean", lambda w: F.embedding_bag(indices[:8].reshape(2, 4), w, mode="mean"), (weight,)),
        ("embedding_bag/include_last_offset", lambda w: F.embedding_bag(
            indices, w, torch.tensor([0, 2, 2, 5, 9]), include_last_offset=True, mode="max"), (weight,)),
        ("embedding_bag/per_sample_weights", lambda w, p: F.embedding_bag(indices, w, offsets, per_sample_weights=p),
         (weight, Arg((9,)))),
        ("embedding_bag/per_sample_weights_padding", lambda w, p: F.embedding_bag(
            indices, w, offsets, per_sample_weights=p, padding_idx=-2), (weight, Arg((9,)))),
        ("embedding_bag/transposed_weight", bag(mode="mean"), (Arg((6, 3), layout=TRANSPOSED),)),
        ("embedding_bag/no_indices", lambda w: F.embedding_bag(indices[:0], w, torch.tensor([0, 0])), (weight,)),
        ("embedding_bag/offsets_not_from_0", lambda w: F.embedding_bag(indices, w, torch.tensor([1, 3])), (weight,)),
        ("embedding_bag/index_out_of_range", lambda w: F.embedding_bag(torch.tensor([1, 9]), w, torch.tensor([0])),
         (weight,)),
        ("embedding_bag/padding_idx_out_of_range", bag(padding_idx=7), (weight,)),
    ]
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _bicubic_cases():
    """F.interpolate(mode="bicubic"): up and down, by size and by scale factor, align_corners
    both ways, transposed, an empty batch, and refusals."""
    def bicubic(**options):
        return lambda x: F.interpolate(x, mode="bicubic", **options)
    image = Arg((2, 2, 3, 4))
    entries = []
    for corners in (False, True):
        tag = "align_corners" if corners else "half_pixel"
        entries += [
            ("interpolate_bicubic/%s_size" % tag, bicubic(size=(5, 7), align_corners=corners), (image,)),
            ("interpolate_bicubic/%s_scale2" % tag, bicubic(scale_factor=2, align_corners=corners), (image,)),
            ("interpolate_bicubic/%s_down" % tag, bicubic(size=(2, 3), align_corners=corners), (Arg((1, 2, 5, 7)),)),
            ("interpolate_bicubic/%s_scale1.7" % tag, bicubic(scale_factor=1.7, align_corners=corners), (image,)),
        ]
    entries += [
        ("interpolate_bicubic/one_row_out", bicubic(size=(1, 5), align_corners=True), (image,)),
        ("interpolate_bicubic/transposed", bicubic(size=(4, 5)), (Arg((1, 2, 4, 3), layout=TRANSPOSED),)),
        ("interpolate_bicubic/empty_batch", bicubic(size=(4, 5)), (Arg((0, 2, 3, 4)),)),
        ("interpolate_bicubic/3d_input", bicubic(size=(4, 5)), (Arg((2, 3, 4)),)),
        ("interpolate_bicubic/zero_output", bicubic(size=(0, 5)), (image,)),
        ("interpolate_bicubic/empty_channels", bicubic(size=(4, 5)), (Arg((1, 0, 3, 4)),)),
    ]
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)


def _fractional_samples(values, shape):
    """random_samples built inside the call (so the @grad twins leave them without grad):
    dyadic values, the same in every dtype, some outside [0, 1), which upstream takes too."""
    return lambda x: torch.tensor(values, dtype=x.dtype).reshape(shape)


def _fractional_direct(spatial, kernel, size, samples):
    pool = A.fractional_max_pool2d if spatial == 2 else A.fractional_max_pool3d
    return lambda x: pool(x, kernel, size, samples(x))


def _fractional_backward(spatial, kernel, size, samples, convert=lambda g, i: (g, i)):
    """The backward operator called directly, on the indices of its forward."""
    pool = A.fractional_max_pool2d if spatial == 2 else A.fractional_max_pool3d
    backward = A.fractional_max_pool2d_backward if spatial == 2 else A.fractional_max_pool3d_backward

    def call(g, x):
        # (Its indices from float64, which holds every dtype's values: the refused dtypes
        # reach the backward operator.)
        g, indices = convert(g, pool(x.detach().double(), kernel, size, samples(x).double())[1])
        return backward(g, x, kernel, size, indices)
    return call


def _fractional_max_pool_cases():
    """fractional_max_pool2d/3d through F with upstream's draws under a seed (output_size,
    output_ratio, with and without indices), then called directly with given samples (outside
    [0, 1) too, or a tensor argument whose @grad twin upstream refuses), batched, unbatched,
    non-contiguous, NaN, an empty batch, a window as large as the input; the backward operators
    called directly (their @grad twins are upstream's *BackwardBackward0); the dtypes and
    upstream's checks."""
    f2, f3 = F.fractional_max_pool2d, F.fractional_max_pool3d
    s2 = _fractional_samples([0.5, 0.25, 0.9375, 0.0, 0.125, 0.75, 0.375, 0.625, 0.0625, 0.8125, 0.5, 0.5],
                             (2, 3, 2))
    s2_outside = _fractional_samples([1.5, -0.5, 0.9375, 3.0, -0.75, 0.25], (1, 3, 2))
    s3 = _fractional_samples([0.5, 0.25, 0.9375, 0.0, 0.125, 0.75, 0.375, 0.625, 0.0625, 0.8125, 0.5, 0.5,
                              0.1875, 0.6875, 0.4375, 0.3125, 0.5625, 0.875], (2, 3, 3))
    image, volume = Arg((2, 3, 7, 8)), Arg((2, 3, 6, 7, 8))
    entries = (
        ("fractional_max_pool2d/output_size", seeded(1, lambda x: f2(x, 2, output_size=(4, 5), return_indices=True)),
         (image,)),
        ("fractional_max_pool2d/output_ratio", seeded(2, lambda x: f2(x, (2, 3), output_ratio=(0.5, 0.7),
                                                                      return_indices=True)), (image,)),
        ("fractional_max_pool2d/no_indices", seeded(3, lambda x: f2(x, 3, output_size=4)), (Arg((1, 2, 9, 9)),)),
        ("fractional_max_pool2d/unbatched", seeded(4, lambda x: f2(x, (3, 2), output_size=(3, 5),
                                                                   return_indices=True)), (Arg((3, 7, 8)),)),
        ("fractional_max_pool2d/transposed", seeded(5, lambda x: f2(x, 2, output_size=(5, 4), return_indices=True)),
         (Arg((2, 3, 7, 8), layout=TRANSPOSED),)),
        ("fractional_max_pool2d/stepped", seeded(6, lambda x: f2(x, 2, output_ratio=0.6, return_indices=True)),
         (Arg((1, 2, 7, 8), layout=STEPPED),)),
        ("fractional_max_pool2d/nan_inf", seeded(7, lambda x: f2(x, 2, output_size=(4, 4), return_indices=True)),
         (Arg((1, 2, 6, 7), "special"),)),
        ("fractional_max_pool2d/empty_batch", seeded(8, lambda x: f2(x, 2, output_size=3, return_indices=True)),
         (Arg((0, 3, 7, 8)),)),
        ("fractional_max_pool2d/whole_input", seeded(9, lambda x: f2(x, (7, 8), output_size=1, return_indices=True)),
         (image,)),
        ("fractional_max_pool2d/output_as_input", seeded(9, lambda x: f2(x, 1, output_size=(7, 8),
                                                                         return_indices=True)), (image,)),
        ("fractional_max_pool2d/samples", _fractional_direct(2, [2, 3], [4, 3], s2), (image,)),
        ("fractional_max_pool2d/samples_outside_unit", _fractional_direct(2, [2, 2], [3, 4], s2_outside),
         (Arg((3, 6, 7)),)),
        ("fractional_max_pool2d/samples_argument", lambda x, u: A.fractional_max_pool2d(x, [2, 2], [3, 4], u),
         (image, Arg((2, 3, 2), "prob"))),
        ("fractional_max_pool2d/output_zero", _fractional_direct(2, [2, 2], [0, 4], s2), (image,)),
        ("fractional_max_pool2d/kernel_zero", _fractional_direct(2, [0, 2], [3, 4], s2), (image,)),
        ("fractional_max_pool2d/none", lambda x: f2(x, 2), (image,)),
        ("fractional_max_pool2d/input_2d", _fractional_direct(2, [2, 2], [3, 4], s2), (Arg((7, 8)),)),
        ("fractional_max_pool2d/input_5d", _fractional_direct(2, [2, 2], [3, 4], s2), (Arg((1, 2, 3, 7, 8)),)),
        ("fractional_max_pool2d/empty_channels", _fractional_direct(2, [2, 2], [3, 4], s2), (Arg((2, 0, 7, 8)),)),
        ("fractional_max_pool2d/empty_channels_unbatched", _fractional_direct(2, [2, 2], [3, 4], s2),
         (Arg((0, 7, 8)),)),
        ("fractional_max_pool2d/pool_too_high", _fractional_direct(2, [4, 2], [5, 4], s2), (image,)),
        ("fractional_max_pool2d/pool_too_wide", _fractional_direct(2, [2, 5], [3, 5], s2), (image,)),
        ("fractional_max_pool2d/kernel_three", _fractional_direct(2, [2, 2, 2], [3, 4], s2), (image,)),
        ("fractional_max_pool2d/output_size_one", _fractional_direct(2, [2, 2], [3], s2), (image,)),
        ("fractional_max_pool2d/negative_output", _fractional_direct(2, [2, 2], [3, -1], s2), (image,)),
        ("fractional_max_pool2d/samples_dtype", lambda x: A.fractional_max_pool2d(
            x, [2, 2], [3, 4], _other_float(s2(x))), (image,)),
        ("fractional_max_pool2d/backward_op", _fractional_backward(2, [2, 3], [4, 3], s2),
         (Arg((2, 3, 4, 3), layout=TRANSPOSED), image)),
        ("fractional_max_pool2d/backward_op_unbatched", _fractional_backward(2, [2, 2], [3, 4], s2),
         (Arg((3, 3, 4), layout=STEPPED), Arg((3, 7, 8)))),
        ("fractional_max_pool2d/backward_op_empty_batch", _fractional_backward(2, [2, 2], [3, 4], s2),
         (Arg((0, 3, 3, 4)), Arg((0, 3, 7, 8)))),
        ("fractional_max_pool2d/backward_op_grad_width", _fractional_backward(2, [2, 2], [3, 4], s2),
         (Arg((2, 3, 3, 5)), image)),
        ("fractional_max_pool2d/backward_op_grad_height", _fractional_backward(2, [2, 2], [3, 4], s2),
         (Arg((2, 3, 2, 4)), image)),
        ("fractional_max_pool2d/backward_op_grad_rank", _fractional_backward(2, [2, 2], [3, 4], s2),
         (Arg((3, 3, 4)), image)),
        ("fractional_max_pool2d/backward_op_grad_dtype", _fractional_backward(
            2, [2, 2], [3, 4], s2, lambda g, i: (_other_float(g), i)), (Arg((2, 3, 3, 4)), image)),
        ("fractional_max_pool2d/backward_op_int_indices", _fractional_backward(
            2, [2, 2], [3, 4], s2, lambda g, i: (g, i.int())), (Arg((2, 3, 3, 4)), image)),
        ("fractional_max_pool2d/backward_op_out_transposed", lambda g, x: A.fractional_max_pool2d_backward(
            g, x, [2, 2], [3, 4], A.fractional_max_pool2d(x.detach(), [2, 2], [3, 4], s2(x))[1],
            grad_input=torch.zeros(2, 3, 8, 7, dtype=x.dtype).transpose(2, 3)), (Arg((2, 3, 3, 4)), image)),
        ("fractional_max_pool2d/backward_op_input_2d", lambda g, x: A.fractional_max_pool2d_backward(
            g, x, [2, 2], [3, 4], torch.zeros(3, 4, dtype=torch.long)), (Arg((3, 4)), Arg((7, 8)))),
        ("fractional_max_pool3d/output_size", seeded(1, lambda x: f3(x, 2, output_size=(4, 5, 6),
                                                                     return_indices=True)), (volume,)),
        ("fractional_max_pool3d/output_ratio", seeded(2, lambda x: f3(x, (2, 3, 2), output_ratio=(0.5, 0.6, 0.7),
                                                                      return_indices=True)), (volume,)),
        ("fractional_max_pool3d/no_indices", seeded(3, lambda x: f3(x, 2, output_size=3)), (Arg((1, 2, 5, 5, 5)),)),
        ("fractional_max_pool3d/unbatched", seeded(4, lambda x: f3(x, (2, 3, 2), output_size=(3, 4, 3),
                                                                   return_indices=True)), (Arg((3, 6, 7, 8)),)),
        ("fractional_max_pool3d/transposed", seeded(5, lambda x: f3(x, 2, output_size=(3, 4, 5),
                                                                    return_indices=True)),
         (Arg((2, 3, 6, 7, 8), layout=TRANSPOSED),)),
        ("fractional_max_pool3d/nan_inf", seeded(7, lambda x: f3(x, 2, output_size=(2, 3, 4), return_indices=True)),
         (Arg((1, 2, 5, 6, 7), "special"),)),
        ("fractional_max_pool3d/empty_batch", seeded(8, lambda x: f3(x, 2, output_size=3, return_indices=True)),
         (Arg((0, 3, 6, 7, 8)),)),
        ("fractional_max_pool3d/samples", _fractional_direct(3, [2, 3, 2], [4, 3, 5], s3), (volume,)),
        ("fractional_max_pool3d/samples_argument", lambda x, u: A.fractional_max_pool3d(x, [2, 2, 2], [3, 4, 5], u),
         (volume, Arg((2, 3, 3), "prob"))),
        ("fractional_max_pool3d/none", lambda x: f3(x, 2), (volume,)),
        ("fractional_max_pool3d/input_3d", _fractional_direct(3, [2, 2, 2], [3, 4, 5], s3), (Arg((6, 7, 8)),)),
        ("fractional_max_pool3d/input_6d", _fractional_direct(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((1, 2, 3, 6, 7, 8)),)),
        ("fractional_max_pool3d/empty_channels", _fractional_direct(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((2, 0, 6, 7, 8)),)),
        ("fractional_max_pool3d/empty_channels_unbatched", _fractional_direct(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((0, 6, 7, 8)),)),
        ("fractional_max_pool3d/pool_fills_time", _fractional_direct(3, [3, 2, 2], [4, 4, 5], s3), (volume,)),
        ("fractional_max_pool3d/pool_too_high_and_wide", _fractional_direct(3, [2, 3, 3], [4, 5, 6], s3), (volume,)),
        ("fractional_max_pool3d/pool_too_high", _fractional_direct(3, [2, 3, 2], [4, 5, 6], s3), (volume,)),
        ("fractional_max_pool3d/kernel_two", _fractional_direct(3, [2, 2], [3, 4, 5], s3), (volume,)),
        ("fractional_max_pool3d/output_size_two", _fractional_direct(3, [2, 2, 2], [3, 4], s3), (volume,)),
        ("fractional_max_pool3d/negative_output", _fractional_direct(3, [2, 2, 2], [3, -2, 5], s3), (volume,)),
        ("fractional_max_pool3d/samples_dtype", lambda x: A.fractional_max_pool3d(
            x, [2, 2, 2], [3, 4, 5], _other_float(s3(x))), (volume,)),
        ("fractional_max_pool3d/backward_op", _fractional_backward(3, [2, 3, 2], [4, 3, 5], s3),
         (Arg((2, 3, 4, 3, 5), layout=TRANSPOSED), volume)),
        ("fractional_max_pool3d/backward_op_unbatched", _fractional_backward(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((3, 3, 4, 5), layout=STEPPED), Arg((3, 6, 7, 8)))),
        ("fractional_max_pool3d/backward_op_empty_batch", _fractional_backward(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((0, 3, 3, 4, 5)), Arg((0, 3, 6, 7, 8)))),
        ("fractional_max_pool3d/backward_op_grad_time", _fractional_backward(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((2, 3, 2, 4, 5)), volume)),
        ("fractional_max_pool3d/backward_op_grad_height", _fractional_backward(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((2, 3, 3, 3, 5)), volume)),
        ("fractional_max_pool3d/backward_op_grad_width", _fractional_backward(3, [2, 2, 2], [3, 4, 5], s3),
         (Arg((2, 3, 3, 4, 4)), volume)),
        ("fractional_max_pool3d/backward_op_grad_dtype", _fractional_backward(
            3, [2, 2, 2], [3, 4, 5], s3, lambda g, i: (_other_float(g), i)), (Arg((2, 3, 3, 4, 5)), volume)),
        ("fractional_max_pool3d/backward_op_int_indices", _fractional_backward(
            3, [2, 2, 2], [3, 4, 5], s3, lambda g, i: (g, i.int())), (Arg((2, 3, 3, 4, 5)), volume)),
        ("fractional_max_pool3d/out_transposed", lambda x: A.fractional_max_pool3d(
            x, [2, 2, 2], [3, 4, 5], s3(x), output=torch.zeros(2, 3, 5, 4, 3, dtype=x.dtype).permute(0, 1, 4, 3, 2),
            indices=torch.zeros(2, 3, 3, 4, 5, dtype=torch.long)), (volume,)),
        ("fractional_max_pool3d/backward_op_out_transposed", lambda g, x: A.fractional_max_pool3d_backward(
            g, x, [2, 2, 2], [3, 4, 5], A.fractional_max_pool3d(x.detach(), [2, 2, 2], [3, 4, 5], s3(x))[1],
            grad_input=torch.zeros(2, 3, 8, 7, 6, dtype=x.dtype).permute(0, 1, 4, 3, 2)), (Arg((2, 3, 3, 4, 5)), volume)),
        ("fractional_max_pool3d/backward_op_input_3d", lambda g, x: A.fractional_max_pool3d_backward(
            g, x, [2, 2, 2], [3, 4, 5], torch.zeros(3, 4, 5, dtype=torch.long)), (Arg((3, 4, 5)), Arg((6, 7, 8)))),
    )
    for name, call, args in entries:
        op, variant = name.split("/", 1)
        for dtype in ("float32", "float64"):
            yield Case("%s/%s/%s" % (op, dtype, variant), call, args, dtype)
    # Upstream's kernels take float and double; the others are refused by their names.
    for dtype in ("float16", "bfloat16", "int64"):
        yield Case("fractional_max_pool2d/%s/dtype" % dtype, _fractional_direct(2, [2, 2], [3, 4], s2), (image,),
                   dtype)
        yield Case("fractional_max_pool3d/%s/dtype" % dtype, _fractional_direct(3, [2, 2, 2], [3, 4, 5], s3),
                   (volume,), dtype)
        yield Case("fractional_max_pool2d/%s/backward_op_dtype" % dtype, _fractional_backward(
            2, [2, 2], [3, 4], s2), (Arg((2, 3, 3, 4)), image), dtype)
        yield Case("fractional_max_pool3d/%s/backward_op_dtype" % dtype, _fractional_backward(
            3, [2, 2, 2], [3, 4, 5], s3), (Arg((2, 3, 3, 4, 5)), volume), dtype)
