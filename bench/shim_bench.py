"""Shim vs upstream, side by side in one run: per-call overhead and kernel speed of a
few operators and torchvision models' eval forward, all at one thread on both sides, and
`import torch` wall time and peak RSS. Prints ratios (ours/upstream; below 1 means ours is faster or smaller). Not a
test: nothing here asserts a time.

usage: shim_bench.py --shim PY --upstream PY [--repeat N]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

TIMING_SCRIPT = r"""
import json, sys, time, torch
torch.set_num_threads(1)  # both sides: upstream defaults to a thread per core
cases = {
  "a+b 1 elem": (lambda: torch.ones(1), lambda: torch.ones(1), lambda a, b: a + b),
  "a+b 1M elem": (lambda: torch.ones(1 << 20), lambda: torch.ones(1 << 20), lambda a, b: a + b),
  "mm 64": (lambda: torch.ones(64, 64), lambda: torch.ones(64, 64), torch.mm),
  "mm 256": (lambda: torch.ones(256, 256), lambda: torch.ones(256, 256), torch.mm),
  "mm 1024": (lambda: torch.ones(1024, 1024), lambda: torch.ones(1024, 1024), torch.mm),
  "softmax 1000x1000": (lambda: torch.ones(1000, 1000), lambda: 1, lambda a, d: torch.softmax(a, d)),
  "sum 1M": (lambda: torch.ones(1 << 20), lambda: 0, lambda a, d: a.sum(d)),
  # The BatchNorm CNN's first block (64 x 8 x 28 x 28): relu's gradient over random signs,
  # a 2 x 2 max pooling forward and backward, and a fill.
  "threshold_backward 401k": (lambda: torch.randn(64, 8, 28, 28), lambda: torch.randn(64, 8, 28, 28),
                              lambda g, x: torch.ops.aten.threshold_backward(g, x, 0)),
  "max_pool2d fwd+bwd 401k": (lambda: torch.randn(64, 8, 28, 28, requires_grad=True), lambda: 2,
                              lambda x, k: torch.autograd.grad(torch.nn.functional.max_pool2d(x, k).sum(), x)),
  "fill_ 401k": (lambda: torch.empty(64, 8, 28, 28), lambda: 1.0, lambda x, v: x.fill_(v)),
  # An optimizer's arithmetic on resnet18's largest parameter (2.4M floats): SGD's momentum
  # update (buf.mul_(momentum).add_(grad); param.add_(buf, alpha=-lr)), Adam's moments and sqrt.
  "SGD momentum update 2.4M": (lambda: [torch.randn(2359296), torch.randn(2359296)], lambda: torch.randn(2359296),
                               lambda s, g: s[0].add_(s[1].mul_(0.9).add_(g), alpha=-0.01)),
  "Adam moments 2.4M": (lambda: [torch.randn(2359296), torch.rand(2359296)], lambda: torch.randn(2359296),
                        lambda s, g: (s[0].mul_(0.9).add_(g, alpha=0.1), s[1].mul_(0.999).addcmul_(g, g, value=0.001))),
  "sqrt 2.4M": (lambda: torch.rand(2359296), lambda: None, lambda x, _: x.sqrt()),
}
out = {}
for name, (make_a, make_b, fn) in cases.items():
    a, b = make_a(), make_b()
    fn(a, b)
    runs = []
    budget = time.perf_counter() + 0.5
    while time.perf_counter() < budget or len(runs) < 5:
        t0 = time.perf_counter(); fn(a, b); runs.append(time.perf_counter() - t0)
    runs.sort()
    out[name] = runs[len(runs) // 2]
print(json.dumps(out))
"""

# resnet18 and mobilenet_v2 (random weights: time does not depend on them), eval mode, no grad,
# batch 8 at 224x224, one thread on both sides; the median of 5 calls after a warm-up call.
MODEL_SCRIPT = r"""
import json, time, torch, torchvision
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(8, 3, 224, 224)
out = {}
for name in ("resnet18", "mobilenet_v2"):
    model = getattr(torchvision.models, name)().eval()
    with torch.no_grad():
        model(x)
        runs = []
        for _ in range(5):
            t0 = time.perf_counter(); model(x); runs.append(time.perf_counter() - t0)
    out[f"{name} forward b8 224"] = sorted(runs)[2]
print(json.dumps(out))
"""


def run_json(python, script):
    return json.loads(subprocess.run([python, "-c", script], check=True, capture_output=True, text=True).stdout)


def import_cost(python, repeat):
    """The median wall time of `repeat` interpreters importing torch, and the peak RSS (KiB) of one
    that reports its own: the children's ru_maxrss would be the largest over every child so far."""
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "import torch"], check=True)
        walls.append(time.perf_counter() - t0)
    peak = subprocess.run(
        [python, "-c", "import resource, torch; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
        check=True, capture_output=True, text=True).stdout.strip()
    return statistics.median(walls), int(peak)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}  command: {' '.join(sys.argv)}")
    results = {}
    for label, python in (("ours", args.shim), ("upstream", args.upstream)):
        wall, peak_kb = import_cost(python, args.repeat)
        timings = {**run_json(python, TIMING_SCRIPT), **run_json(python, MODEL_SCRIPT)}
        results[label] = {"import torch wall s": wall, "import torch peak RSS MiB": peak_kb / 1024, **timings}
    print(f"{'measure':28s} {'ours':>12s} {'upstream':>12s} {'ours/upstream':>14s}")
    for key in results["ours"]:
        ours, up = results["ours"][key], results["upstream"][key]
        print(f"{key:28s} {ours:12.6g} {up:12.6g} {ours / up:14.3f}")


if __name__ == "__main__":
    main()
