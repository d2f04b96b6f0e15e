"""Autograd, shim vs upstream in one run, one intra-op thread on both: the recording overhead
per operation (a chain of 1,000 small operations with and without requires_grad), an MLP's
forward and backward, and one resnet18 training step (batch 8, 224x224: forward,
cross_entropy, backward, SGD step) with the process's peak RSS. Prints ratios
(ours/upstream; below 1 means ours is faster or smaller). Not a test: nothing here asserts a
time.

usage: autograd_bench.py --shim PY --upstream PY [--repeat N] [--skip-resnet]
"""
import argparse
import json
import subprocess
import sys
import time

SCRIPT = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
repeat = int(sys.argv[1])
case = sys.argv[2]


def median_time(step, runs):
    step()  # warm-up: first-call costs are not per-step costs
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def chain(requires_grad, backward):
    x = torch.ones(16, requires_grad=requires_grad)

    def step():
        y = x
        for _ in range(1000):
            y = y * 1.0001 + 0.0001
        if backward:
            y.sum().backward()
    return step


def mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    data, labels = torch.randn(64, 784), torch.arange(64) % 10

    def step():
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(data), labels).backward()
    return step


def resnet18_step():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data, labels = torch.randn(8, 3, 224, 224), torch.arange(8)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), labels).backward()
        optimizer.step()
    return step


if case == "small":
    out = {"1,000-op chain, no grad s": median_time(chain(False, False), repeat),
           "1,000-op chain, requires_grad s": median_time(chain(True, False), repeat),
           "1,000-op chain + backward s": median_time(chain(True, True), repeat),
           "MLP 784-256-256-10 batch 64 fwd+bwd s": median_time(mlp(), repeat)}
else:
    out = {"resnet18 training step b8 224 s": median_time(resnet18_step(), 2)}
out["peak RSS MiB (" + case + ")"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def measure(python, repeat, case):
    result = subprocess.run([python, "-c", SCRIPT, str(repeat), case], check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--skip-resnet", action="store_true", help="leave out the resnet18 step (minutes on ours)")
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}  command: {' '.join(sys.argv)}")
    cases = ["small"] + ([] if args.skip_resnet else ["resnet18"])
    results = {"ours": {}, "upstream": {}}
    for case in cases:
        for label, python in (("ours", args.shim), ("upstream", args.upstream)):
            results[label].update(measure(python, args.repeat, case))
    print(f"{'measure (one thread)':40s} {'ours':>12s} {'upstream':>12s} {'ours/upstream':>14s}")
    for key in results["ours"]:
        ours, up = results["ours"][key], results["upstream"][key]
        print(f"{key:40s} {ours:12.6g} {up:12.6g} {ours / up:14.3f}")


if __name__ == "__main__":
    main()
