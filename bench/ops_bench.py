"""Single operators, ours and upstream in one run, at each of --threads intra-op thread counts:
the shapes of the demo's CNN training step (batch 64, 28x28), batch norm's statistics and
gradients, max pooling, reductions over rows, copies and fills, and a first gradient reaching
a leaf. Each side runs in --rounds processes, taking turns to go first; a case's time is the
fastest of all its calls (each after two untimed ones). Prints microseconds and ours/upstream.
Not a test: nothing here asserts a time.

usage: ops_bench.py --shim PY --upstream PY [--threads 1,2] [--rounds 2] [-k REGEX]
"""
import json
import subprocess
import sys
import time

from timing import paired_parser, taking_turns

SCRIPT = r'''
import json, re, sys, time
import torch
import torch.nn.functional as F
threads, pattern = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(threads)
torch.manual_seed(0)


def fastest(f, calls):
    f(); f()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter(); f(); times.append(time.perf_counter() - t0)
    return min(times) * 1e6


def forward_backward(f, inputs):
    """f over leaf copies of inputs, then backward of its result with a fixed gradient."""
    leaves = [t.clone().requires_grad_() for t in inputs]
    gradient = torch.ones_like(f(leaves))

    def step():
        for leaf in leaves:
            leaf.grad = None
        f(leaves).backward(gradient)
    return step


def batch_norm(t):
    channels = t[0].shape[1]
    return F.batch_norm(t[0], torch.zeros(channels), torch.ones(channels), t[1], t[2], True)


def cases():
    x1, w1, b1 = torch.rand(64, 1, 28, 28), torch.randn(8, 1, 3, 3), torch.randn(8)
    a1, x2 = torch.randn(64, 8, 28, 28), torch.randn(64, 8, 14, 14)
    w2, b2, a2 = torch.randn(16, 8, 3, 3), torch.randn(16), torch.randn(64, 16, 14, 14)
    flat, wl, bl = torch.randn(64, 784), torch.randn(10, 784), torch.randn(10)
    logits, labels = torch.randn(64, 10), torch.arange(64) % 10
    cnn = {"conv 1->8": (lambda t: F.conv2d(t[0], t[1], t[2], padding=1), [x1, w1, b1]),
           "batch_norm 8": (batch_norm, [a1, torch.ones(8), torch.zeros(8)]),
           "relu 8x28x28": (lambda t: F.relu(t[0]), [a1]),
           "max_pool2d 2 8x28x28": (lambda t: F.max_pool2d(t[0], 2), [a1]),
           "conv 8->16": (lambda t: F.conv2d(t[0], t[1], t[2], padding=1), [x2, w2, b2]),
           "batch_norm 16": (batch_norm, [a2, torch.ones(16), torch.zeros(16)]),
           "linear 784->10": (lambda t: F.linear(t[0], t[1], t[2]), [flat, wl, bl]),
           "cross_entropy": (lambda t: F.cross_entropy(t[0], labels), [logits])}
    for name, (f, inputs) in cnn.items():
        yield f"CNN {name} forward", (lambda f=f, inputs=inputs: f(inputs)), 100
        yield f"CNN {name} forward+backward", forward_backward(f, inputs), 100
    for channels, side in ((8, 28), (16, 14), (64, 28)):
        x, g = torch.randn(64, channels, side, side), torch.randn(64, channels, side, side)
        w, b, rm, rv = torch.ones(channels), torch.zeros(channels), torch.zeros(channels), torch.ones(channels)
        y, mean, invstd = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        shape = f"[64,{channels},{side},{side}]"
        yield f"native_batch_norm training {shape}", lambda: torch.ops.aten.native_batch_norm(
            x, w, b, rm, rv, True, 0.1, 1e-5), 100
        yield f"native_batch_norm_backward {shape}", lambda: torch.ops.aten.native_batch_norm_backward(
            g, x, w, rm, rv, mean, invstd, True, 1e-5, [True, True, True]), 100
    pooled = torch.randn(8, 64, 112, 112)
    yield "max_pool2d 3/2/1 [8,64,112,112]", lambda: F.max_pool2d(pooled, 3, 2, 1), 20
    for shape in ((8, 96, 112, 112), (8, 144, 56, 56), (8, 672, 14, 14), (8, 1280, 7, 7)):
        x = torch.randn(*shape)
        yield f"adaptive_avg_pool2d 1x1 {list(shape)}", lambda x=x: F.adaptive_avg_pool2d(x, 1), 50
    rows = torch.randn(256, 4096)
    yield "sum(-1) [256,4096]", lambda: rows.sum(-1), 50
    yield "mean(0) [256,4096]", lambda: rows.mean(0), 50
    a = torch.randn(64, 8, 28, 28)
    yield "clone [64,8,28,28]", lambda: a.clone(), 300
    yield "zeros_like [64,8,28,28]", lambda: torch.zeros_like(a), 300
    leaf, gradient = a.clone().requires_grad_(), torch.randn(64, 8, 28, 28)

    def relu_into_leaf():
        leaf.grad = None
        F.relu(leaf).backward(gradient)
    yield "relu forward+backward into a leaf's .grad", relu_into_leaf, 300


out = {}
for name, f, calls in cases():
    if re.search(pattern, name):
        out[name] = fastest(f, calls)
print(json.dumps(out))
'''


def run(python, threads, pattern):
    result = subprocess.run([python, "-c", SCRIPT, str(threads), pattern], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{python} failed: {result.stderr.strip().splitlines()[-1]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    args = paired_parser(__doc__, rounds=2).parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}  command: {' '.join(sys.argv)}")
    print(f"{'case':52s} {'threads':>7s} {'ours us':>10s} {'upstream us':>11s} {'ratio':>7s}", flush=True)
    for threads in [int(t) for t in args.threads.split(",")]:
        fastest = [{}, {}]
        for _, side in taking_turns(args.rounds):
            for name, us in run((args.shim, args.upstream)[side], threads, args.pattern).items():
                fastest[side][name] = min(us, fastest[side].get(name, us))
        for name, ours in fastest[0].items():
            up = fastest[1][name]
            print(f"{name:52s} {threads:7d} {ours:10.1f} {up:11.1f} {ours / up:7.3f}", flush=True)


if __name__ == "__main__":
    main()
