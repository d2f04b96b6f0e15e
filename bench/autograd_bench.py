"""Autograd, shim vs upstream in one run: the recording overhead per operation (a chain of
1,000 small operations with and without requires_grad) and an MLP's forward and backward at one
intra-op thread, and one resnet18 training step (batch 8, 224x224: forward, cross_entropy,
backward, SGD step) with the process's peak RSS at each of --threads
(torch.set_num_threads on both sides). Prints ratios (ours/upstream; below 1 means ours is
faster or smaller). Not a test: nothing here asserts a time.

usage: autograd_bench.py --shim PY --upstream PY [--repeat N] [--threads 1,2] [--skip-resnet]
"""
import argparse
import json
import subprocess
import sys
import time

from timing import STEP_TIMES

SCRIPT = STEP_TIMES + r"""
import json, resource, sys, time
import torch
repeat, case, threads = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)


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
out = {"%s, %d thread%s" % (key, threads, "s" if threads > 1 else ""): value for key, value in out.items()}
print(json.dumps(out))
"""


def measure(python, repeat, case, threads):
    result = subprocess.run([python, "-c", SCRIPT, str(repeat), case, str(threads)], check=True, capture_output=True,
                            text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", default="1,2", help="the resnet18 step's thread counts (comma-separated)")
    parser.add_argument("--skip-resnet", action="store_true", help="leave out the resnet18 step")
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}  command: {' '.join(sys.argv)}")
    cases = [("small", 1)] + ([] if args.skip_resnet else [("resnet18", int(t)) for t in args.threads.split(",")])
    results = {"ours": {}, "upstream": {}}
    for case, threads in cases:
        for label, python in (("ours", args.shim), ("upstream", args.upstream)):
            results[label].update(measure(python, args.repeat, case, threads))
    print(f"{'measure':50s} {'ours':>12s} {'upstream':>12s} {'ours/upstream':>14s}")
    for key in results["ours"]:
        ours, up = results["ours"][key], results["upstream"][key]
        print(f"{key:50s} {ours:12.6g} {up:12.6g} {ours / up:14.3f}")


if __name__ == "__main__":
    main()
