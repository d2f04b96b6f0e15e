"""Batch norm's speed, ours against upstream in one run, one thread on both: BatchNorm2d(64) on
(8, 64, 56, 56) in training mode, forward and backward (the median of 21 after a warm-up), and
one training step (forward, cross_entropy, backward, SGD with momentum) of resnet18 and
mobilenet_v2 at batch 8, 224x224 (the median of 3 after a warm-up). Prints seconds and the
ratios (ours/upstream). Not a test: nothing here asserts a time.

usage: batch_norm_bench.py --shim PY --upstream PY [--skip-models]
"""
import argparse
import json
import subprocess
import sys
import time

from timing import STEP_TIMES

TIMING_SCRIPT = STEP_TIMES + r"""
import json, sys, torch
torch.set_num_threads(1)
torch.manual_seed(0)


def batch_norm_step():
    layer = torch.nn.BatchNorm2d(64).train()
    x = torch.randn(8, 64, 56, 56, requires_grad=True)
    grad = torch.randn(8, 64, 56, 56)

    def step():  # fresh gradients each time, so no accumulation is timed
        x.grad = layer.weight.grad = layer.bias.grad = None
        layer(x).backward(grad)
    return step


def training_step(name):
    import torchvision
    model = getattr(torchvision.models, name)().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, labels = torch.randn(8, 3, 224, 224), torch.randint(0, 1000, (8,))

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
    return step


out = {"BatchNorm2d(64) fwd+bwd 8x64x56x56": median_time(batch_norm_step(), 21)}
if "--models" in sys.argv:
    for name in ("resnet18", "mobilenet_v2"):
        out[f"{name} training step b8 224"] = median_time(training_step(name), 3)
print(json.dumps(out))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--skip-models", action="store_true", help="only the BatchNorm2d step")
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}  command: {' '.join(sys.argv)}")
    results = {}
    for label, python in (("ours", args.shim), ("upstream", args.upstream)):
        command = [python, "-c", TIMING_SCRIPT] + ([] if args.skip_models else ["--models"])
        results[label] = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    print(f"{'measure':36s} {'ours s':>10s} {'upstream s':>10s} {'ours/upstream':>14s}")
    for key, ours in results["ours"].items():
        upstream = results["upstream"][key]
        print(f"{key:36s} {ours:10.4g} {upstream:10.4g} {ours / upstream:14.3f}")


if __name__ == "__main__":
    main()
