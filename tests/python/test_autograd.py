"""Autograd on the shim against upstream PyTorch: the graph, the engine and training.

API scripts run under upstream and the shim (test_training_apis's harness) and must record the
same values, node names and error messages, exactly: their arithmetic is exact in float32.
Training scripts run three times, upstream in float32 and float64 and the shim in float32, and
the shim's record is judged as the golden harness judges a case (tests/golden/compare.py): each
float within twice upstream's own float32-vs-float64 error of the float64 reference, or equal to
upstream's. What the shim refuses by name until the later autograd issue is checked on its own.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from test_training_apis import PRELUDE, SHIM_PYTHON, UPSTREAM_PYTHON, assert_agree, run_both
from test_training_apis import fashion_mnist_root  # noqa: F401 (a fixture: pytest finds it by name)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
from compare import compare_values, network_difference  # noqa: E402

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"

GRAPH = r'''
def names(fn, depth=3):
    """fn's class name and, to `depth`, its next functions' (None for an edge to nothing)."""
    if fn is None:
        return None
    if depth == 0:
        return fn.name()
    return [fn.name(), [[names(next_fn, depth - 1), number] for next_fn, number in fn.next_functions]]


def main():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = (x * 2).sum()
    before = [type(y.grad_fn).__name__, y.grad_fn.name(), x.is_leaf, y.is_leaf, y.requires_grad, x.grad]
    y.backward()
    w = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], requires_grad=True)
    b = torch.tensor([0.5, -0.5, 1.0], requires_grad=True)
    h = torch.nn.functional.linear(torch.tensor([[1.0, 2.0]]), w, b)
    loss = torch.nn.functional.cross_entropy(h.relu(), torch.tensor([2]))
    indices = h.argmax(1)
    return {"snippet": before + [x.grad],
            "cross_entropy graph": names(loss.grad_fn, 2),
            "integer outputs": [indices.requires_grad, indices.grad_fn is None],
            "type(grad_fn)": repr(type(loss.grad_fn)),
            "output_nr": [h.output_nr, torch.max(h, 1)[0].output_nr]}
'''

MODES = r'''
def main():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        under_no_grad = x * 2
    with torch.enable_grad():
        under_enable = x * 2
    with torch.set_grad_enabled(False):
        under_set_false = x * 2
    with torch.inference_mode():
        under_inference = x * 2
    detached = (x * 3).detach()
    inplace_detached = x * 4
    inplace_detached.detach_()
    return {"requires_grad": [t.requires_grad for t in (under_no_grad, under_enable, under_set_false,
                                                           under_inference, detached, inplace_detached)],
            "is_leaf": [t.is_leaf for t in (under_no_grad, under_enable, detached, inplace_detached)]}
'''

CONVERSIONS = r'''
def main():
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    as_double = x.double()
    data = x.data
    return {"same dtype returns self": [x.float() is x, x.to(torch.float32) is x, x.contiguous() is x,
                                        x.real is x],
            "double": [as_double.grad_fn.name(), as_double.requires_grad],
            "type()": x.type(torch.float64).grad_fn.name(),
            "data": [data.requires_grad, data.is_leaf, data._version, data.grad_fn is None],
            "data writes do not bump x": outcome(lambda: (data.add_(1), x._version)[1]),
            "t().contiguous()": torch.ones(2, 3, requires_grad=True).t().contiguous().grad_fn.name()}
'''

ENGINE = r'''
def main():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    u = torch.tensor([4.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    twice = x.grad.clone()
    second = outcome(lambda: y.backward())
    x.grad = None
    z = x * torch.tensor([1.0, 10.0, 100.0])
    z.backward(torch.tensor([1.0, 2.0, 3.0]))
    with_grad_tensors = x.grad.clone()
    x.grad = None
    v = (x * 2).sum() + (u * 3).sum()
    v.backward(inputs=[u])
    only_inputs = [x.grad, u.grad]
    w = (x * 5).sum()
    unused = torch.autograd.grad(w, [x, u], allow_unused=True)
    a, b = torch.tensor([1.0, 2.0, -1.0], requires_grad=True), torch.tensor([1.0, 5.0, -1.0], requires_grad=True)
    weights = torch.tensor([1.0, 2.0, 3.0])
    ties = torch.autograd.grad((torch.maximum(a, b) * weights).sum() + (torch.minimum(a, b) * weights * 10).sum(),
                               [a, b])
    # One tensor asked for twice, and a tensor with the result of an in-place call on it (the
    # same object: ReLU(inplace=True) makes a layer's output the next layer's input).
    repeated = torch.autograd.grad((x * weights).sum(), [x, x])
    before_relu = x * 2
    after_relu = torch.relu_(before_relu)
    in_place = torch.autograd.grad((after_relu * weights).sum(), [before_relu, after_relu, x])
    return {"twice": twice, "second backward": second, "grad_tensors": with_grad_tensors,
            "inputs=": only_inputs, "allow_unused": list(unused), "maximum/minimum ties": list(ties),
            "an input twice": list(repeated), "an input and its in-place result": list(in_place),
            "unused": outcome(lambda: torch.autograd.grad((x * 5).sum(), [x, u])),
            "non-scalar root": outcome(lambda: (x * 2).backward()),
            "no grad_fn": outcome(lambda: torch.tensor([1.0]).sum().backward())}
'''

ERRORS = r'''
def main():
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    computed = leaf * 2
    saved = leaf.exp()
    y = saved * saved
    saved.add_(1)
    return {"in-place on a leaf": outcome(lambda: leaf.add_(1)),
            "view of a leaf": outcome(lambda: leaf[0:1].add_(1)),
            "version check": outcome(lambda: y.sum().backward()),
            "requires_grad on int": outcome(lambda: torch.tensor([1]).requires_grad_()),
            "non-leaf requires_grad_(False)": outcome(lambda: computed.requires_grad_(False)),
            "grad of another size": outcome(lambda: setattr(leaf, "grad", torch.ones(3))),
            "grad of another dtype": outcome(lambda: setattr(leaf, "grad", torch.ones(2, dtype=torch.float64))),
            "out= with grad": outcome(lambda: torch.add(leaf, 1, out=torch.empty(2)))}
'''

IN_PLACE = r'''
def main():
    # torchvision's residual block: out += identity, then relu(inplace=True).
    x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]], requires_grad=True)
    identity = x * 3
    out = x * 2
    out += identity
    out.relu_()
    (out * torch.tensor([1.0, 0.5])).sum().backward()
    residual = [x.grad, out.grad_fn.name(), out.grad_fn.next_functions[0][0].name(), out._version]
    x.grad = None
    after = x * 2
    after.relu_()
    after.mul_(2)  # overwrites what relu_ saved for its backward
    # In place on the result of an operator whose kernel made it as a view of its own tensor
    # (linear of a 3-D input, a 1-D pool): the gradients still reach the inputs.
    w = torch.tensor([[1.0, -2.0], [0.5, 3.0], [-1.0, 1.0]], requires_grad=True)
    rows = torch.tensor([[[1.0, 2.0], [-3.0, 0.5]]], requires_grad=True)
    torch.nn.functional.linear(rows, w).relu_().sum().backward()
    pooled = torch.nn.functional.max_pool1d(rows, 2).relu_()
    return {"residual": residual, "write after a saved result": outcome(lambda: after.sum().backward()),
            "linear of 3-D, then relu_": [w.grad, rows.grad],
            "max_pool1d, then relu_": torch.autograd.grad(pooled.sum(), [rows])}
'''


VIEW_WRITES = r'''
def main():
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], requires_grad=True)
    a = x * 2
    a[:, 1].mul_(3)
    a[0].relu_()
    b = torch.zeros(2, 3)
    b[:, 0] = x[:, 2] * 5
    (a.sum() + (b * torch.tensor([1.0, 2.0, 3.0])).sum()).backward()
    flat = (x * 1).flatten()
    torch.nn.functional.dropout(flat, 0.0, training=True, inplace=True)
    # (flat's own node is not compared: upstream replays some view operators, _reshape_alias here,
    # where the shim records AsStridedBackward0 for every view written through.)
    return {"grad": x.grad, "names": [a.grad_fn.name(), b.grad_fn.name(), b.requires_grad, flat.requires_grad],
            "view of a leaf": outcome(lambda: x[0].add_(1))}
'''

GRAD_LAYOUT = r"""
def main():
    # The gradient layout contract: .grad has a dense leaf's strides (transposed, NHWC in memory,
    # size-1 dims), a contiguous layout for a leaf that overlaps itself; the first gradient is
    # kept without a copy when nothing else holds it, even a view of the one given to backward.
    def first_grad(leaf, f, gradient):
        f(leaf).backward(gradient)
        return [list(leaf.grad.stride()), leaf.grad.data_ptr() == gradient.data_ptr(), leaf.grad._base is None,
                leaf.grad.requires_grad, leaf.grad]
    g = torch.arange(12.0).reshape(4, 3)
    x = torch.arange(12.0).reshape(3, 4).t().detach().requires_grad_()
    channels_last = (torch.arange(24.0) - 12).reshape(2, 2, 2, 3).permute(0, 3, 1, 2).detach().requires_grad_()
    expanded = torch.tensor([[1.0], [2.0]]).expand(2, 3).detach().requires_grad_()
    column = torch.arange(4.0).reshape(4, 1).requires_grad_()
    leaf = torch.arange(12.0).reshape(4, 3).requires_grad_()
    cases = {"transposed leaf, fresh gradient": first_grad(x, lambda t: t * 2, g),
             "transposed leaf, the given gradient": first_grad(x.detach().requires_grad_(), lambda t: t.view(4, 3), g),
             "channels_last leaf": first_grad(channels_last, lambda t: t.relu(), torch.ones(2, 3, 2, 2)),
             "expanded leaf": first_grad(expanded, lambda t: t * 1, torch.ones(2, 3)),
             "size-1 dim, expanded gradient": first_grad(column, lambda t: t.sum(), torch.tensor(2.0)),
             "the given gradient itself": first_grad(leaf, lambda t: t, g),
             "a view of the given gradient": first_grad(leaf.detach().requires_grad_(), lambda t: t.view(12).view(4, 3), g)}
    kept = leaf.grad
    (leaf * 3).sum().backward()
    cases["accumulated in place"] = [leaf.grad is kept, leaf.grad]
    return cases
"""

API_SCRIPTS = {"graph": GRAPH, "modes": MODES, "conversions": CONVERSIONS, "engine": ENGINE, "errors": ERRORS,
               "in_place": IN_PLACE, "grad_layout": GRAD_LAYOUT,
               "view_writes": VIEW_WRITES}


@pytest.mark.parametrize("name", sorted(API_SCRIPTS))
def test_api_agrees_with_upstream(name, tmp_path):
    assert_agree(*run_both(API_SCRIPTS[name], tmp_path))


REFUSED = r'''
def main():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    return {"create_graph": outcome(lambda: torch.autograd.grad((x * x).sum(), [x], create_graph=True)),
            "node hooks": outcome(lambda: (x * 2).grad_fn.register_hook(lambda *a: None)),
            "no formula": outcome(lambda: torch.i0(x).sum().backward()),
            "leaf hook": outcome(lambda: (x.register_hook(lambda g: g * 2), (x * 3).sum().backward())),
            "custom Function": outcome(lambda: Square.apply(x)),
            "retain_grad of a leaf": outcome(x.retain_grad),
            "retain_grad of a non-leaf": outcome(lambda: (x * 2).retain_grad())}


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return grad
'''


def test_what_comes_later_is_refused_by_name(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(PRELUDE + REFUSED + "\nprint(json.dumps(main()))\n")
    result = subprocess.run([SHIM_PYTHON, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["create_graph"] == {"error": "NotImplementedError", "message":
                                      "torchnative does not support create_graph=True (higher-order gradients) yet"}
    assert record["node hooks"]["error"] == "NotImplementedError"
    assert record["no formula"] == {"error": "NotImplementedError",
                                    "message": "torchnative has no derivative for aten::i0 yet"}
    assert record["leaf hook"] == {"error": "NotImplementedError",
                                   "message": "torchnative does not run tensor hooks (Tensor.register_hook) yet"}
    assert record["custom Function"]["error"] == "NotImplementedError"
    assert "torch.autograd.Function" in record["custom Function"]["message"]
    assert record["retain_grad of a leaf"] == {"value": None}  # upstream's no-op: a leaf keeps its grad
    assert record["retain_grad of a non-leaf"] == {
        "error": "NotImplementedError",
        "message": "torchnative does not keep the gradient of a non-leaf tensor (Tensor.retain_grad) yet"}


# Training: the same initial weights and data on every run (made in float32 from a seed, as
# the shim's generator reproduces upstream's draws, then converted to the run's dtype).
TRAINING_PRELUDE = r'''
import json
import sys

import torch

DTYPE = getattr(torch, sys.argv[2])


def encode(value):
    if isinstance(value, dict):
        return value
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "dtype": str(value.dtype), "shape": list(value.shape), "data": value.tolist()}
    return {"kind": "list", "items": [encode(item) for item in value]}


def mlp(activation):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), activation, torch.nn.Linear(16, 16), activation,
                                torch.nn.Linear(16, 4))
    data = torch.randn(32, 6)
    return model.to(DTYPE), data.to(DTYPE)


def train(model, optimizer, loss_of, steps=20):
    """Loss per step, every gradient of the first step, and the final parameters."""
    losses, first_grads = [], None
    for step in range(steps):
        optimizer.zero_grad()
        loss = loss_of(model)
        loss.backward()
        if first_grads is None:
            first_grads = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        losses.append(loss.detach())
    return [torch.stack(losses), first_grads, [p.detach() for p in model.parameters()]]
'''

TRAINING_EPILOGUE = r'''
if __name__ == "__main__":
    with open(sys.argv[1], "w") as file:
        json.dump(encode(main()), file)
'''

MLP_SGD = r'''
def main():
    model, data = mlp(torch.nn.Tanh())
    labels = torch.arange(32) % 4
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return train(model, optimizer, lambda m: torch.nn.functional.cross_entropy(m(data), labels))
'''

MLP_ADAM = r'''
def main():
    model, data = mlp(torch.nn.GELU())
    target = torch.sin(data[:, :4])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return train(model, optimizer, lambda m: torch.nn.functional.mse_loss(torch.sigmoid(m(data)), target))
'''

MLP_RELU_SUM = r'''
def main():
    model, data = mlp(torch.nn.ReLU())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    weights = torch.linspace(-1, 1, 4).to(DTYPE)
    return train(model, optimizer, lambda m: (torch.log_softmax(m(data), 1) * weights).mean())
'''

TRAINING_SCRIPTS = {"mlp_sgd_momentum_weight_decay": MLP_SGD, "mlp_adam": MLP_ADAM, "mlp_relu_sgd": MLP_RELU_SUM}

# A BatchNorm CNN on real images: the first 200 batches of 32 of Fashion-MNIST's training set
# in file order, so every run sees the same batches. Needs ROOT (test_training_apis's
# fashion_mnist_root, built from Debian's dataset-fashion-mnist) defined before it.
BATCHNORM_CNN_FASHION_MNIST = r'''
import itertools

import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

STEPS, BATCH = 200, 32


def batchnorm_cnn():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    return model.to(DTYPE)


def main():
    dataset = torchvision.datasets.FashionMNIST(ROOT, train=True, transform=transforms.ToTensor())
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=False)
    batches = iter([(images.to(DTYPE), labels) for images, labels in itertools.islice(loader, STEPS)])

    def loss_on_next_batch(model):
        images, labels = next(batches)
        return torch.nn.functional.cross_entropy(model(images), labels)

    model = batchnorm_cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return train(model, optimizer, loss_on_next_batch, steps=STEPS)
'''


def run_training(body, python, dtype, directory):
    folder = directory / f"{Path(python).parent.parent.name}-{dtype}"
    folder.mkdir()
    (folder / "script.py").write_text(TRAINING_PRELUDE + body + TRAINING_EPILOGUE)
    result = subprocess.run([python, "script.py", "record.json", dtype], cwd=folder, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"{python} {dtype}:\n{result.stderr}"
    return json.loads((folder / "record.json").read_text())


def three_runs(body, directory):
    """The records of upstream in float32, upstream in float64 (the reference) and ours."""
    return (run_training(body, UPSTREAM_PYTHON, "float32", directory),
            run_training(body, UPSTREAM_PYTHON, "float64", directory),
            run_training(body, SHIM_PYTHON, "float32", directory))


@pytest.mark.parametrize("name", sorted(TRAINING_SCRIPTS))
def test_training_agrees_with_upstream(name, tmp_path):
    body = TRAINING_SCRIPTS[name]
    upstream, reference, ours = three_runs(body, tmp_path)
    difference = compare_values(upstream, ours, reference, "[losses, first gradients, final parameters]")
    assert difference is None, difference


# 200 SGD steps on real Fashion-MNIST batches. batch_norm's weight gradient is summed as
# upstream's kernel sums it (dotp = sum((x - mean) g), then times invstd): summed from x^
# rounded per element it was 2.33 times upstream's own error (2026-12-06).
@pytest.mark.slow
def test_batchnorm_cnn_on_fashion_mnist_agrees_with_upstream(fashion_mnist_root, tmp_path):
    body = f"ROOT = {str(fashion_mnist_root)!r}\n" + BATCHNORM_CNN_FASHION_MNIST
    upstream, reference, ours = three_runs(body, tmp_path)
    difference = compare_values(upstream, ours, reference, "[losses, first gradients, final parameters]")
    assert difference is None, difference


# The demo's GPT-style character model (examples/demo/gpt.py: token and position embeddings,
# causal pre-norm TransformerEncoder blocks, LayerNorm, head tied to the token embedding),
# imported by path with the demo's reading of Debian's fortunes (examples/demo/fortunes.py), for
# 50 AdamW steps on batches of 8 consecutive 64-character windows of one fortune file, in file
# order. Needs DEMO (examples/demo), TEXT (the fortune file) and AMSGRAD defined before it.
GPT_FORTUNES_ADAMW = r"""
import importlib.util

STEPS, BATCH = 50, 8


def demo_module(name):
    spec = importlib.util.spec_from_file_location(name, f"{DEMO}/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpt, fortunes = demo_module("gpt"), demo_module("fortunes")


def main():
    inputs, targets = fortunes.sequences(fortunes.read_fortunes(TEXT), gpt.CONTEXT, STEPS * BATCH)
    assert len(inputs) == STEPS * BATCH, f"{TEXT} holds {len(inputs)} windows of {gpt.CONTEXT} characters"
    batches = zip(inputs.split(BATCH), targets.split(BATCH))
    model = gpt.char_gpt(fortunes.VOCABULARY).to(DTYPE)
    # CharGpt builds its causal mask in the default dtype at every forward: make it the model's.
    torch.set_default_dtype(DTYPE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, amsgrad=AMSGRAD)

    def loss_on_next_batch(model):
        ids, next_ids = next(batches)
        return torch.nn.functional.cross_entropy(model(ids), next_ids)

    return train(model, optimizer, loss_on_next_batch, steps=STEPS)
"""

# A file of Debian's fortunes package (not fortunes-min's 'fortunes': 383 windows, too few).
FORTUNE_FILE = "computers"

# Plain AdamW (amsgrad off) once ended a final parameter (layer 0's in_proj_weight) at 2.18 times
# upstream's float32-vs-float64 error: AdamW's eps amplifies gradient errors near 1e-8 and steps
# 44-49 amplify every difference about tenfold a step, so any arithmetic not upstream's shows.
# Since softmax's and log_softmax's backward kernels (attention's softmax, cross_entropy's
# log_softmax over the class dim) and nll_loss are upstream's arithmetic, both cases are upstream's
# record bit for bit: losses, first gradients and final parameters (2026-12-06).
# docs/measurements.md, "GPT-style model, 50 AdamW steps".
GPT_CASES = {"adamw": pytest.param(False),
             "adamw_amsgrad": pytest.param(True)}


@pytest.fixture(scope="module")
def fortune_file():
    if str(DEMO) not in sys.path:
        sys.path.append(str(DEMO))
    import fortunes  # the demo's reading of Debian's fortunes (it imports torch: not at collection)
    try:
        files = fortunes.fortune_files()
    except fortunes.NotInstalled as missing:
        pytest.skip(str(missing))
    if FORTUNE_FILE not in files:
        pytest.skip(f"Debian's fortunes has no file {FORTUNE_FILE!r}")
    return files[FORTUNE_FILE]


@pytest.mark.slow
@pytest.mark.parametrize("amsgrad", list(GPT_CASES.values()), ids=list(GPT_CASES))
def test_gpt_on_fortunes_agrees_with_upstream(fortune_file, amsgrad, tmp_path):
    body = f"DEMO = {str(DEMO)!r}\nTEXT = {str(fortune_file)!r}\nAMSGRAD = {amsgrad}\n" + GPT_FORTUNES_ADAMW
    upstream, reference, ours = three_runs(body, tmp_path)
    difference = compare_values(upstream, ours, reference, "[losses, first gradients, final parameters]")
    assert difference is None, difference


# Gradients operator by operator: each case's floating inputs require grad, its floating
# outputs are weighted by a fixed pattern and summed, and torch.autograd.grad gives the
# gradient of every input; judged as the training records are. Inputs: float32 normals from a
# seed, so upstream and the shim start from the same values.
GRADIENT_PRELUDE = TRAINING_PRELUDE + r'''
import torch.nn.functional as F


def const(tensor):
    """An input that stays a constant (upstream refuses gradients for nll_loss's weight)."""
    return ("const", tensor)


def prepared(item):
    if isinstance(item, tuple):
        return item[1].to(DTYPE)
    if isinstance(item, torch.Tensor) and item.is_floating_point():
        return item.to(DTYPE).requires_grad_()
    return item


def gradients(build, call):
    torch.manual_seed(0)
    inputs = [prepared(item) for item in build()]
    outputs = call(*inputs)
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    total = 0
    for out in outputs:
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            pattern = torch.cos(torch.arange(out.numel(), dtype=DTYPE)).reshape(out.shape)
            total = total + (out * pattern).sum()
    leaves = [item for item in inputs if isinstance(item, torch.Tensor) and item.requires_grad]
    return list(torch.autograd.grad(total, leaves))


def main():
    records = []
    for build, call in CASES:
        try:
            records.append(gradients(build, call))
        except Exception as error:  # recorded, so one case's failure shows beside the others'
            records.append({"kind": "object", "type": type(error).__name__, "value": str(error)})
    return records
'''

GRADIENT_CASES = {
    # name: (inputs, call): inputs a Python expression giving a list, call a lambda over them.
    "pointwise": ("[torch.randn(3, 4), torch.rand(4) + 0.5]",
                  "lambda x, y: [x + y, x - 2 * y, x * y, x / y, -x, x ** 2, y ** x, torch.exp(x), torch.log(y), "
                  "torch.sqrt(y), torch.rsqrt(y), torch.abs(x), torch.clamp(x, -0.5, 0.5), torch.maximum(x, y), "
                  "torch.minimum(x, y), torch.where(x > 0, x, y)]"),
    "activations": ("[torch.randn(2, 3, 5) * 3]",
                    "lambda x: [F.relu(x), F.relu6(x), F.hardtanh(x), F.gelu(x), F.gelu(x, approximate='tanh'), "
                    "F.silu(x), torch.sigmoid(x), torch.tanh(x), F.hardswish(x), F.hardsigmoid(x), "
                    "F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x)]"),
    "matmul family": ("[torch.randn(4, 3), torch.randn(3, 5), torch.randn(2, 4, 3), torch.randn(2, 3, 5), "
                      "torch.randn(5), torch.randn(3)]",
                      "lambda a, b, p, q, bias, v: [a @ b, torch.addmm(bias, a, b, beta=0.5, alpha=2), p @ q, "
                      "torch.bmm(p, q), torch.baddbmm(torch.randn(2, 4, 5).to(p.dtype), p, q), p @ v, v @ b, "
                      "F.linear(p, b.t(), bias), torch.mv(a, v), torch.dot(v, v)]"),
    "reductions": ("[torch.randn(3, 4, 5)]",
                   "lambda x: [x.sum(), x.sum((0, 2)), x.mean(1, keepdim=True), x.amax(1), x.max(2)[0], x.max(), "
                   "x.min(0)[0], x.var(1), x.std((0, 1), unbiased=False), torch.logsumexp(x, 2), x.norm(), "
                   "torch.linalg.vector_norm(x, 3, dim=1), torch.linalg.vector_norm(x, float('inf'), dim=2)]"),
    "softmax and losses": ("[torch.randn(6, 5), torch.tensor([0, 4, 2, 2, 1, 3]), const(torch.rand(5) + 0.5), "
                           "torch.randn(6, 5), torch.rand(6, 5)]",
                           "lambda x, t, w, y, p: [torch.softmax(x, 1), torch.log_softmax(x, 0), "
                           "F.cross_entropy(x, t), F.cross_entropy(x, t, weight=w, label_smoothing=0.1), "
                           "F.cross_entropy(x, t, ignore_index=2, reduction='sum'), F.nll_loss(x, t, weight=w), "
                           "F.mse_loss(x, y), F.l1_loss(x, y, reduction='sum'), F.smooth_l1_loss(x, y, beta=0.5), "
                           "F.huber_loss(x, y, delta=0.7), F.binary_cross_entropy(torch.sigmoid(x), p), "
                           "F.binary_cross_entropy_with_logits(x, p, pos_weight=w), F.cross_entropy(x, p)]"),
    "shapes": ("[torch.randn(2, 3, 4), torch.randn(4, 3)]",
               "lambda x, y: [x.view(6, 4), x.reshape(4, 6), x.permute(2, 0, 1), x.transpose(0, 2), y.t(), "
               "x.flatten(1), x.unsqueeze(1), x[:, 1], x[:, 1:3, ::2], x.narrow(2, 1, 2), x.expand(5, 2, 3, 4), "
               "torch.cat([x, x * 2], 1), torch.stack([y, y], 2), *x.split(1, 1), *x.chunk(2, 2), "
               "x.index_select(2, torch.tensor([3, 0, 3])), x.gather(1, torch.tensor([[[2, 0, 1, 1]]] * 2)), "
               "x.masked_fill(x > 0.5, 0.25), x.double(), x.contiguous(), x.squeeze(), x.unbind(1)[2]]"),
    "embedding": ("[torch.randn(7, 3), torch.tensor([[1, 2, 6], [0, 2, 2]])]",
                  "lambda w, i: [F.embedding(i, w), F.embedding(i, w, padding_idx=2)]"),
    "convolution": ("[torch.randn(2, 4, 9, 8), torch.randn(6, 2, 3, 3), torch.randn(6), torch.randn(4, 1, 3, 3), "
                    "torch.randn(3, 4, 5), torch.randn(4, 4, 10)]",
                    "lambda x, w, b, dw, w1, x1: [F.conv2d(x, w, b, stride=2, padding=1, groups=2), "
                    "F.conv2d(x, w, None, dilation=2, groups=2), F.conv2d(x, dw, None, padding='same', groups=4), "
                    "F.conv2d(x[0], w, b, groups=2), F.conv1d(x1, w1, None, stride=2, padding=2), "
                    "F.conv2d(x, w.repeat(1, 2, 1, 1), b, stride=(2, 1), padding=(0, 2))]"),
    "pooling": ("[torch.randn(2, 3, 9, 7)]",
                "lambda x: [F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, ceil_mode=True), "
                "F.max_pool2d(x, 3, 1, dilation=2), F.max_pool2d_with_indices(x, 2)[0], F.max_pool1d(x[0], 3, 2), "
                "F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False, ceil_mode=True), "
                "F.avg_pool2d(x, 2, divisor_override=3), F.adaptive_avg_pool2d(x, (4, 3)), "
                "F.adaptive_avg_pool2d(x, 1), F.adaptive_max_pool2d(x, (3, 2))[0]]"),
    "normalization": ("[torch.randn(4, 3, 5, 5), torch.rand(3) + 0.5, torch.randn(3), torch.randn(4, 3, 6), "
                      "torch.rand(3, 6) + 0.5]",
                      "lambda x, w, b, y, lw: [F.batch_norm(x, torch.zeros(3, dtype=x.dtype), torch.ones(3, dtype=x.dtype), w, b, "
                      "training=True), "
                      "F.batch_norm(x, torch.randn(3).to(x.dtype), torch.rand(3).to(x.dtype) + 0.5, w, b), "
                      "F.batch_norm(y, None, None, training=True), F.layer_norm(y, (6,), None, None), "
                      "F.layer_norm(y, (3, 6), lw, lw), F.group_norm(x, 3, w, b), F.instance_norm(x)]"),
}


def gradient_script(names):
    cases = ",\n    ".join(f"(lambda: {GRADIENT_CASES[name][0]}, {GRADIENT_CASES[name][1]})" for name in names)
    return f"\nCASES = [\n    {cases},\n]\n"


def test_gradients_agree_with_upstream(tmp_path):
    names = sorted(GRADIENT_CASES)
    body = GRADIENT_PRELUDE.replace(TRAINING_PRELUDE, "") + gradient_script(names)
    upstream, reference, ours = three_runs(body, tmp_path)
    found = [compare_values(u, o, r, name) for name, u, o, r in
             zip(names, upstream["items"], ours["items"], reference["items"])]
    assert [line for line in found if line] == []


# One training step of the architectures a device trains: forward, cross_entropy, backward and
# an SGD step, the loss and every parameter's gradient compared (with numpy: vit_b_16 has 86
# million parameters). Dropout and stochastic depth are set to 0: their draws in float64 are not
# float32's, so the reference run could not share them.
ARCHITECTURE_SCRIPT = r'''
import sys

import numpy
import torch
import torchvision

DTYPE = getattr(torch, sys.argv[2])


class Gpt(torch.nn.Module):
    """A GPT-style language model from torch.nn: token and position embeddings, causal
    pre-norm transformer blocks, a final norm and a head tied to the token embedding."""

    def __init__(self, vocabulary=50, width=32, heads=4, blocks=2, context=12):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocabulary, width)
        self.positions = torch.nn.Embedding(context, width)
        block = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(block, blocks)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocabulary, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, ids):
        n = ids.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1).to(self.head.weight.dtype)
        x = self.tokens(ids) + self.positions(torch.arange(n))
        return self.head(self.norm(self.blocks(x, mask=causal)))


def build(name):
    torch.manual_seed(0)
    if name == "gpt":
        ids = torch.randint(0, 50, (3, 12))
        return Gpt(), ids[:, :-1], ids[:, 1:]
    options = {"image_size": 64} if name == "vit_b_16" else {}
    model = getattr(torchvision.models, name)(num_classes=10, **options)
    for module in model.modules():
        if hasattr(module, "p") and isinstance(module.p, float):
            module.p = 0.0
    return model, torch.randn(2, 3, 64, 64), torch.tensor([1, 7])


def main():
    model, inputs, targets = build(sys.argv[3])
    model = model.to(DTYPE).train()
    inputs = inputs.to(DTYPE) if inputs.is_floating_point() else inputs
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    logits = model(inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    optimizer.step()  # the step must run; its arithmetic is the optimizer tests'
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    shapes = numpy.array([n for p in model.parameters() for n in (p.dim(), *p.shape)])
    numpy.savez(sys.argv[1], loss=loss.detach().double().numpy().reshape(1), grads=grads.double().numpy(),
                shapes=shapes, dtype=str(grads.dtype))


if __name__ == "__main__":
    main()
'''

ARCHITECTURES = ["resnet18", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "gpt"]


def run_architecture(name, python, dtype, directory):
    folder = directory / f"{Path(python).parent.parent.name}-{dtype}"
    folder.mkdir()
    (folder / "script.py").write_text(ARCHITECTURE_SCRIPT)
    result = subprocess.run([python, "script.py", "record.npz", dtype, name], cwd=folder, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, f"{python} {dtype}:\n{result.stderr}"
    with numpy.load(folder / "record.npz") as record:
        return {key: record[key] for key in record.files}


def record_difference(upstream, ours, reference):
    """The loss and the gradients judged as one network's record (compare.network_difference)."""
    return network_difference(*[[record["loss"], record["grads"]] for record in (upstream, ours, reference)])


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_training_step_agrees_with_upstream(name, tmp_path):
    upstream = run_architecture(name, UPSTREAM_PYTHON, "float32", tmp_path)
    reference = run_architecture(name, UPSTREAM_PYTHON, "float64", tmp_path)
    ours = run_architecture(name, SHIM_PYTHON, "float32", tmp_path)
    assert numpy.array_equal(ours["shapes"], upstream["shapes"]) and str(ours["dtype"]) == str(upstream["dtype"])
    difference = record_difference(upstream, ours, reference)
    assert difference is None, f"{name}, loss and gradients: {difference}"

BATCH_NORM_STEPS = r'''
LAYOUT, DTYPE = "{layout}", torch.{dtype}


def hexes(tensor):
    return [value.hex() for value in tensor.detach().flatten().tolist()]


class Net(torch.nn.Module):
    """Linear, then BatchNorm1d over (8, 4) rows, (8, 4, 3) planes or those planes transposed
    from (8, 3, 4), then Linear: the batch norm sees the layout a model would give it."""

    def __init__(self):
        super().__init__()
        width = 4 if LAYOUT == "rows" else 12
        self.first, self.norm, self.last = torch.nn.Linear(5, width), torch.nn.BatchNorm1d(4), torch.nn.Linear(width, 2)

    def forward(self, x):
        h = self.first(x)
        if LAYOUT == "planes":
            h = h.view(8, 4, 3)
        elif LAYOUT == "transposed":
            h = h.view(8, 3, 4).transpose(1, 2)
        return self.last(self.norm(h).reshape(8, -1))


def main():
    torch.manual_seed(0)
    net = Net().to(DTYPE)
    data, target = torch.randn(8, 5, dtype=DTYPE), torch.randn(8, 2, dtype=DTYPE)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    record = {{}}
    for step in range(5):
        optimizer.zero_grad()
        out = net(data * (1 + 0.5 * step))
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
        record["step%d" % step] = {{"out": hexes(out), "loss": hexes(loss),
                                    "grads": {{name: hexes(p.grad) for name, p in net.named_parameters()}},
                                    "running": [hexes(net.norm.running_mean), hexes(net.norm.running_var)]}}
        optimizer.step()
    net.eval()
    record["eval"] = hexes(net(data))
    record["parameters"] = {{name: hexes(p) for name, p in net.named_parameters()}}
    return record
'''


# Five SGD steps of a model with BatchNorm1d in training mode and an mse loss, then its eval
# forward: outputs, loss, every parameter's gradient and the running statistics at each step
# compared as hex floats, bit for bit (issue 18: a model trains on the shim as on upstream).
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["rows", "planes", "transposed"])
def test_batch_norm_training_steps_have_upstreams_bits(layout, dtype, tmp_path):
    body = BATCH_NORM_STEPS.format(layout=layout, dtype=dtype)
    assert_agree(*run_both(body, tmp_path))
