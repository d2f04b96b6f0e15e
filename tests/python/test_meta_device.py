"""The meta device (issue 18 point 5): tensors with a shape and a dtype and no storage. Each case
runs under upstream torch and the shim and the records must be equal: factories, views,
in-place initialisers, nn modules built with device="meta", Module.to("meta"), to_empty and
skip_init, load_state_dict after to_empty, the errors of reading a meta tensor's values.
Computing operators on meta tensors give the shapes and dtypes of their results (pointwise,
reductions, matrix products, linear, where, softmax, convolutions, pooling, normalization,
embedding, activations, dropout, cat/stack, bmm), up to resnet18's and a TransformerEncoderLayer's
forward; gradients reach meta leaves through backward (linear, layer and batch norm, softmax,
cross entropy, pooling, embedding, cumsum, sort). A large model built on the meta device allocates nothing
(peak RSS). What the shim cannot do on meta yet is listed in NOT_YET, each a strict expected
failure naming the gap."""
import json
import subprocess
import sys

import pytest

SHIM_PYTHON = sys.executable  # the venv running pytest: .venv, or .venv-asan under make asan-test
UPSTREAM_PYTHON = "/usr/bin/python3"

PRELUDE = r'''
import json, resource, sys, torch


def describe(value):
    if isinstance(value, torch.Tensor):
        record = [value.device.type, value.is_meta, list(value.shape), list(value.stride()), str(value.dtype),
                  value.requires_grad, type(value).__name__]
        return record if value.is_meta else record + [value.tolist()]
    if isinstance(value, torch.nn.Module):
        return {name: describe(t) for name, t in list(value.named_parameters()) + list(value.named_buffers())}
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items()}
    return value


def layout(tensor):
    return [tensor.device.type, list(tensor.shape), list(tensor.stride()), str(tensor.dtype)]


def outcome(call):
    try:
        return {"value": describe(call())}
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error).partition("\n")[0]}


def meta(*shape, **kwargs):
    return torch.empty(*shape, device="meta", **kwargs)


def in_place(tensor, call):
    result = call(tensor)
    return [result is tensor, tensor._version, describe(tensor)]


def built_then_emptied():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3, device="meta"), torch.nn.BatchNorm1d(3, device="meta"))
    before = describe(model)
    model.to_empty(device="cpu")
    reference = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    model.load_state_dict(reference.state_dict())
    return [before, describe(model), [p.is_leaf for p in model.parameters()]]


def transformer_on_meta():
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, device="meta")
    return [describe(layer), sum(p.numel() for p in layer.parameters())]


def moved_to_meta():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Embedding(5, 2, padding_idx=0))
    return describe(model.to("meta"))


def resnet18_forward_on_meta():
    import torchvision
    model = torchvision.models.resnet18().to("meta")
    return [model(meta(1, 3, 224, 224)), model.eval()(meta(2, 3, 224, 224))]


def backward_on_meta():
    F = torch.nn.functional
    x = meta(4, 3, requires_grad=True)
    planes = meta(2, 3, 8, 8, requires_grad=True)
    linear, norm = torch.nn.Linear(3, 5, device="meta"), torch.nn.LayerNorm(5, device="meta")
    batch_norm, embedding = torch.nn.BatchNorm2d(3, device="meta"), torch.nn.Embedding(10, 5, device="meta")
    losses = [F.cross_entropy(norm(linear(x)).softmax(-1), meta(4, dtype=torch.long)),
              F.mse_loss(F.gelu(x), meta(4, 3)), x.cumsum(1).sort(1)[0].sum(),
              F.max_pool2d(batch_norm(planes), 2).sum(),
              F.avg_pool2d(planes, 2).sum() + F.adaptive_avg_pool2d(planes, 1).sum(),
              embedding(meta(2, 3, dtype=torch.long)).sum()]
    for loss in losses:
        loss.backward()
    return [x.grad, planes.grad, linear.weight.grad, linear.bias.grad, norm.weight.grad, batch_norm.weight.grad,
            embedding.weight.grad]


def conv2d_backward_on_meta():
    conv = torch.nn.Conv2d(3, 4, 3, device="meta")
    conv(meta(1, 3, 8, 8)).sum().backward()
    return conv.weight.grad


def transformer_forward_on_meta():
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, device="meta")
    first = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True, norm_first=True,
                                             activation="gelu", device="meta")
    return [layer(meta(5, 2, 16)), first(meta(2, 5, 16)), first.eval()(meta(2, 5, 16))]
'''

CASES = {
    "empty": "meta(2, 3)",
    "empty float64 requires_grad": "meta(4, dtype=torch.float64, requires_grad=True)",
    "zeros ones full": "[torch.zeros(2, device='meta'), torch.ones(1, 3, device='meta', dtype=torch.int32), "
                       "torch.full((2, 2), 1.5, device='meta')]",
    "empty_strided": "torch.empty_strided((2, 3), (1, 2), device='meta')",
    "like factories": "[torch.empty_like(meta(2, 3)), torch.zeros_like(meta(2, 3), dtype=torch.int64), "
                      "torch.rand_like(meta(3))]",
    # Upstream 1.13 leaves zeros_like's and ones_like's cpu result of a meta input unfilled (its
    # values are whatever the memory held): only the layouts are compared.
    "like onto the cpu": "[layout(f(meta(2, 3), device='cpu', dtype=torch.float64)) "
                         "for f in (torch.empty_like, torch.zeros_like, torch.ones_like, torch.rand_like)]",
    "random factories": "[torch.rand(2, 3, device='meta'), torch.randn(4, device='meta', dtype=torch.float64), "
                        "torch.randint(5, (3,), device='meta'), torch.randperm(4, device='meta'), "
                        "torch.randint_like(meta(2), 3), torch.randn_like(torch.ones(2), device='meta')]",
    "new_ factories": "[meta(2).new_zeros(3, 4), meta(2, dtype=torch.float64).new_empty((1,)), meta(1).new_full((2,), 3.)]",
    "tensor and as_tensor": "[torch.tensor([1, 2, 3], device='meta'), torch.as_tensor([1.5], device='meta'), "
                            "torch.tensor(0, dtype=torch.long, device='meta')]",
    "views": "[meta(3, 4).t(), meta(3, 4)[1], meta(3, 4)[:, ::2], meta(3, 4).view(2, 6), meta(3, 4).reshape(12), "
             "meta(3, 1).expand(3, 5), meta(2, 3, 4).permute(2, 0, 1), meta(6).unflatten(0, (2, 3)), "
             "meta(4, 4).diagonal(), list(meta(6).split(4)), meta(3, 4).unsqueeze(1).squeeze(1)]",
    "device and flags": "[str(meta(1).device), meta(1).is_meta, meta(1).is_cpu, torch.ones(1).is_meta, "
                        "meta(1).data_ptr(), repr(meta(2, 3)), repr(meta(2, dtype=torch.float64))]",
    "to meta": "[torch.arange(6.).reshape(2, 3).t().to('meta'), torch.ones(2).to('meta', torch.int64), "
               "torch.ones(2).to(device='meta')]",
    "meta to meta keeps the tensor": "(lambda t: [t.to('meta') is t, str(t.to(torch.float64).dtype)])(meta(2))",
    "in-place initialisers": "[in_place(meta(3, 4), lambda t: t.uniform_(-1, 1)), in_place(meta(3), lambda t: t.normal_()), "
                             "in_place(meta(2), lambda t: t.fill_(2)), in_place(meta(2), lambda t: t.zero_()), "
                             "in_place(meta(4, 4), torch.nn.init.kaiming_uniform_), "
                             "in_place(meta(4, 4), torch.nn.init.xavier_normal_), "
                             "in_place(meta(4, 4), lambda t: torch.nn.init.trunc_normal_(t, std=0.02))]",
    "in-place with a 0-dim cpu value": "in_place(meta(2, 3), lambda t: t.add_(torch.tensor(1.)))",
    "copy into meta": "in_place(meta(2, 3), lambda t: t.copy_(torch.ones(2, 3)))",
    "in-place with a cpu tensor": "meta(2, 3).add_(torch.ones(2, 3))",
    "in-place shape mismatch": "meta(2, 3).add_(meta(4, 3))",
    "modules built on meta": "[torch.nn.Linear(4, 3, device='meta'), torch.nn.BatchNorm2d(3, device='meta'), "
                             "torch.nn.Embedding(10, 4, padding_idx=0, device='meta'), "
                             "torch.nn.LayerNorm(4, device='meta'), torch.nn.Conv2d(2, 4, 3, device='meta')]",
    "transformer layer on meta": "transformer_on_meta()",
    "Module.to meta": "moved_to_meta()",
    "to_empty then load_state_dict": "built_then_emptied()",
    "skip_init": "(lambda m: [m.weight.shape, m.weight.is_meta, m.bias.device.type])"
                 "(torch.nn.utils.skip_init(torch.nn.Linear, 5, 2))",
    "tolist refused": "meta(2).tolist()",
    "item refused": "meta(()).item()",
    "to cpu refused": "meta(2).to('cpu')",
    "copy out of meta refused": "torch.ones(2).copy_(meta(2))",
    "printing values refused": "meta(2).numpy()",
    "sum": "meta(2, 3).sum(0)",
    "linear forward": "torch.nn.Linear(4, 3, device='meta')(meta(2, 4))",
    "conv2d forward": "torch.nn.Conv2d(3, 4, 3, device='meta')(meta(1, 3, 8, 8))",
    "add": "meta(2, 3) + meta(3)",
    "pointwise": "[meta(2, 3) * 2, meta(2, 3, dtype=torch.int64) / 2, torch.exp(meta(4)), meta(2, 1).sub(meta(3)), "
                 "meta(3) > 0, "
                 "torch.relu(meta(2, 2)), torch.sigmoid(meta(5, dtype=torch.float64))]",
    "reductions": "[meta(2, 3).sum(), meta(2, 3, dtype=torch.int32).sum(1), meta(4, 5).mean(0, keepdim=True)]",
    "where": "torch.where(meta(2, 3, dtype=torch.bool), meta(3), meta(2, 1))",
    "amax": "meta(3, 4).amax(1)",
    "max min argmax": "[meta(3, 4).max(), meta(3, 4).min(1), meta(3, 4).max(0, keepdim=True), "
                      "meta(3, 4, dtype=torch.int64).amin((0, 1)), meta(3, 4).argmax(), "
                      "meta(3, 4).argmax(1, keepdim=True), meta(3, 4).argmin(0)]",
    "softmax": "[meta(2, 5).softmax(-1), torch.log_softmax(meta(2, 5, 3), 1), meta(4).softmax(0, dtype=torch.float64), "
               "meta(2, 3, dtype=torch.bfloat16).softmax(1)]",
    "conv1d 2d 3d forward": "[torch.nn.Conv1d(3, 4, 3, device='meta')(meta(2, 3, 10)), "
                            "torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, device='meta')(meta(1, 3, 8, 8)), "
                            "torch.nn.Conv2d(4, 4, 3, groups=2, device='meta', dtype=torch.float64)"
                            "(meta(2, 4, 7, 7, dtype=torch.float64)), "
                            "torch.nn.Conv3d(2, 3, 2, device='meta')(meta(1, 2, 4, 4, 4)), "
                            "torch.nn.Conv2d(3, 4, 1, bias=False, device='meta')(meta(3, 6, 6))]",
    "pooling": "[torch.nn.functional.max_pool2d(meta(1, 3, 8, 8), 2), "
               "torch.nn.functional.max_pool2d(meta(3, 9, 9), 3, 2, 1, return_indices=True), "
               "torch.nn.functional.avg_pool2d(meta(1, 2, 7, 7), 3, 2), "
               "torch.nn.functional.adaptive_avg_pool2d(meta(1, 3, 7, 7), 1), "
               "torch.nn.functional.adaptive_avg_pool2d(meta(2, 3, 7, 7), (3, 2)), "
               "torch.nn.functional.adaptive_max_pool2d(meta(1, 2, 5, 5), 2), "
               "torch.nn.functional.avg_pool3d(meta(1, 2, 5, 5, 5), 3, 2, 1, ceil_mode=True), "
               "torch.nn.functional.adaptive_avg_pool3d(meta(2, 4, 5, 6), (3, 2, 2)), "
               "torch.nn.functional.adaptive_avg_pool3d(meta(1, 2, 5, 5, 5), 1), "
               "torch.nn.functional.adaptive_max_pool3d(meta(1, 2, 5, 5, 5), 2, return_indices=True)]",
    # Evaluation-mode native_batch_norm is left out: its saved statistics are (0,) in upstream's
    # cpu kernel and the shim's, (C,) in upstream's meta function.
    "normalization": "[torch.nn.BatchNorm2d(3, device='meta')(meta(2, 3, 4, 4)), "
                     "torch.nn.BatchNorm2d(3, device='meta').eval()(meta(2, 3, 4, 4)), "
                     "torch.nn.BatchNorm1d(3, device='meta', dtype=torch.float64)(meta(4, 3, dtype=torch.float64)), "
                     "torch.ops.aten.native_batch_norm(meta(2, 3, 4), meta(3), meta(3), meta(3), meta(3), True, 0.1, 1e-5), "
                     "torch.nn.LayerNorm(4, device='meta')(meta(2, 3, 4)), "
                     "torch.ops.aten.native_layer_norm(meta(2, 3, 4), [3, 4], None, None, 1e-5), "
                     "torch.nn.functional.layer_norm(meta(2, 5, dtype=torch.float64), (5,)), "
                     "torch.nn.GroupNorm(2, 4, device='meta')(meta(2, 4, 3, 3)), "
                     "torch.nn.functional.group_norm(meta(2, 4, 5), 4), meta(3, 4).var(1), meta(3, 4).std()]",
    "batch norm training leaves the running statistics": "(lambda m: [m(meta(2, 3, 4, 4)), m.running_mean, "
                                                         "m.running_var, m.num_batches_tracked])"
                                                         "(torch.nn.BatchNorm2d(3, device='meta'))",
    "embedding": "[torch.nn.Embedding(10, 4, device='meta')(meta(2, 3, dtype=torch.long)), "
                 "torch.nn.functional.embedding(meta(5, dtype=torch.int32), meta(7, 3)), "
                 "meta(4, 3).index_select(0, meta(6, dtype=torch.long))]",
    "cat stack": "[torch.cat([meta(2, 3), meta(1, 3)]), torch.stack([meta(2), meta(2)], 1), "
                 "torch.cat([meta(2, 3), meta(2, 3, dtype=torch.float64)], 1)]",
    "activations": "[f(meta(2, 4)) for f in (torch.nn.functional.gelu, lambda x: torch.nn.functional.gelu(x, approximate='tanh'), "
                   "torch.nn.functional.silu, torch.nn.functional.relu6, torch.nn.functional.leaky_relu, "
                   "torch.nn.functional.hardswish, torch.nn.functional.elu, torch.nn.functional.selu, "
                   "torch.nn.functional.softplus, torch.nn.functional.hardtanh, torch.nn.functional.mish, torch.tanh, "
                   "torch.nn.functional.hardsigmoid, torch.nn.functional.logsigmoid, torch.nn.functional.glu, "
                   "lambda x: torch.nn.functional.prelu(x, meta(1)), lambda x: torch.nn.functional.gelu(x.double()), "
                   "lambda x: torch.nn.functional.silu(x.bfloat16()), lambda x: torch.logaddexp(x, meta(4)))]",
    "dropout": "[torch.nn.functional.dropout(meta(2, 3), 0.5), torch.nn.functional.dropout(meta(2, 3), 0.5, training=False), "
               "torch.nn.Dropout(0.1)(meta(4))]",
    "bmm baddbmm": "[torch.bmm(meta(2, 3, 4), meta(2, 4, 5)), torch.bmm(meta(2, 30, 40), meta(2, 40, 50)), "
                   "torch.baddbmm(meta(2, 3, 5), meta(2, 3, 4), meta(2, 4, 5)), meta(2, 3, 4) @ meta(4, 5), "
                   "meta(5, 2, 3, 4) @ meta(2, 4, 1)]",
    "resnet18 forward": "resnet18_forward_on_meta()",
    "transformer encoder layer forward": "transformer_forward_on_meta()",
    "matmul": "[meta(2, 3) @ meta(3, 4), torch.mm(meta(5, 2), meta(2, 1)), torch.addmm(meta(4), meta(3, 2), meta(2, 4))]",
    "to another tensor's device": "[torch.ones(2).to(meta(1)), meta(2).to(torch.ones(1, dtype=torch.int64), copy=True)]",
    "meta with a cpu tensor": "meta(2, 3) + torch.ones(2, 3)",
    "meta with a 0-dim cpu tensor": "meta(2, 3) * torch.tensor(2.)",
    "shape errors on meta": "meta(2, 3) + meta(4)",
    "backward": "backward_on_meta()",
    # Upstream 1.13 has no meta convolution_backward either: both refuse (the messages differ).
    "conv2d backward refused": "conv2d_backward_on_meta()",
}

# Computing operators whose kernels have loops of their own (not the shared pointwise, reduction
# and GEMM helpers, which stop at a meta result): the shim refuses them by name ("torchnative
# has no meta (shape-only) implementation of aten::... yet").
NOT_YET = {name: "this operator's kernel has no shape-only path on meta yet"
           for name in ("printing values refused",)}


# Refusals whose upstream message is a dispatcher's dump of its backends: the error type is compared.
TYPE_ONLY = {"item refused", "conv2d backward refused"}


# Every case in one process per side (a process per case cost minutes under the sanitizers).
RUN_ALL = r'''
records = {}
for name, expression in json.loads(sys.stdin.read()).items():
    records[name] = outcome(lambda: eval(expression, globals()))
print(json.dumps(records))
'''


def run_all(python):
    process = subprocess.run([python, "-c", PRELUDE + RUN_ALL], input=json.dumps(CASES), capture_output=True,
                             text=True, timeout=600)
    assert process.returncode == 0, process.stderr
    records = json.loads(process.stdout.splitlines()[-1])
    for name in TYPE_ONLY:
        records[name].pop("message", None)
    return records


@pytest.fixture(scope="module")
def records():
    return {"upstream": run_all(UPSTREAM_PYTHON), "shim": run_all(SHIM_PYTHON)}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(reason=NOT_YET[name], strict=True))
                                  if name in NOT_YET else name for name in CASES])
def test_agrees_with_upstream(name, records):
    assert records["shim"][name] == records["upstream"][name]


# 4096 x 4096 x 64 float32 parameters would be 4 GiB: on the meta device the process grows by
# less than 64 MiB building them, on either side.
LARGE_MODEL = r'''
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, device="meta") for _ in range(64)])
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps([sum(p.numel() for p in model.parameters()), grown]))
'''


@pytest.mark.parametrize("side", ["upstream", "shim"])
def test_a_large_model_on_meta_allocates_nothing(side):
    python = UPSTREAM_PYTHON if side == "upstream" else SHIM_PYTHON
    process = subprocess.run([python, "-c", PRELUDE + LARGE_MODEL], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    parameters, grown_kib = json.loads(process.stdout.splitlines()[-1])
    assert parameters == 64 * (4096 * 4096 + 4096)
    assert grown_kib < 64 * 1024, f"building the meta model grew peak RSS by {grown_kib} KiB"
