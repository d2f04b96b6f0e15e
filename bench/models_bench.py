"""Real models, ours and upstream in one run, at each of --threads intra-op thread counts
(torch.set_num_threads on both sides), every measure in a process of its own so that its peak RSS
is that measure's (issue 18 point 6):

- eval forward at batch 8: resnet18, mobilenet_v2 and efficientnet_b0 at 224x224, vit_b_16 at
  image_size 64;
- one training step (forward, cross_entropy, backward, SGD step with momentum) at batch 64:
  resnet18 at 224x224 and the demo's BatchNorm CNN (examples/demo/cnn.py) at 28x28;
- the demo's GPT-style character model (examples/demo/gpt.py): one AdamW training step on 16
  sequences of 64 characters, and sampling: one token per step from the last position's
  softmax (torch.multinomial under a seed), 32 steps, timed per token.

Random weights and inputs from a seed (time does not depend on the values). Each measure runs
in --rounds processes per side, ours and upstream alternating (so a slow spell of the host falls
on both), each making --repeat timed calls after a warm-up call. The time is the fastest of all a
side's calls: on a shared host, noise only ever adds time, and single medians swung by 20-50%
between runs (docs/measurements.md, 2026-12-07); the median ratio is printed beside it to show
the spread. Peak RSS is the largest of a side's rounds. Below 1 means ours is faster or smaller.
Not a test: nothing here asserts a time.

usage: models_bench.py --shim PY --upstream PY [--threads 1,2] [--repeat N] [--rounds N] [-k REGEX]
"""
import json
import os
import re
import subprocess
import sys
import time

from timing import STEP_TIMES, paired_parser, taking_turns

DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "demo")

SCRIPT = STEP_TIMES + r"""
import json, resource, sys, time
import torch
case, threads, repeat, demo = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(threads)
torch.manual_seed(0)


def forward(model, x):
    model.eval()

    def step():
        with torch.no_grad():
            model(x)
    return step


def training_step(model, x, labels, optimizer):
    model.train()

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
    return step


def torchvision_model(name, **options):
    import torchvision
    return getattr(torchvision.models, name)(**options)


def gpt():
    sys.path.insert(0, demo)
    from gpt import CONTEXT, char_gpt
    model = char_gpt(96)
    ids = torch.randint(0, 96, (16, CONTEXT + 1))
    return model, ids[:, :-1], ids[:, 1:]


def sampling(model, tokens):
    model.eval()
    prompt = torch.randint(0, 96, (1, 8))

    def step():
        generator = torch.Generator().manual_seed(1)
        ids = prompt
        with torch.no_grad():
            for _ in range(tokens):
                logits = model(ids[:, -64:])[:, :, -1]
                ids = torch.cat([ids, torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)], 1)
    return step


def measure(case):
    sgd = lambda model: torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # noqa: E731
    if case.endswith("forward b8"):
        name = case.split()[0]
        size = 64 if name == "vit_b_16" else 224
        options = {"image_size": 64} if name == "vit_b_16" else {}
        model = torchvision_model(name, **options)
        return step_times(forward(model, torch.randn(8, 3, size, size)), repeat)
    if case == "resnet18 training step b64":
        model = torchvision_model("resnet18")
        step = training_step(model, torch.randn(64, 3, 224, 224), torch.arange(64) % 1000, sgd(model))
        return step_times(step, repeat)
    if case == "CNN training step b64":
        sys.path.insert(0, demo)
        from cnn import batchnorm_cnn
        model = batchnorm_cnn()
        step = training_step(model, torch.rand(64, 1, 28, 28), torch.arange(64) % 10, sgd(model))
        return step_times(step, repeat)
    if case == "GPT training step b16x64":
        model, inputs, targets = gpt()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        return step_times(training_step(model, inputs, targets, optimizer), repeat)
    if case == "GPT sampling, per token":
        return [seconds / 32 for seconds in step_times(sampling(gpt()[0], 32), repeat)]
    raise ValueError(case)


print(json.dumps({"seconds": measure(case), "peak RSS MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CASES = ["resnet18 forward b8", "mobilenet_v2 forward b8", "efficientnet_b0 forward b8", "vit_b_16 forward b8",
         "resnet18 training step b64", "CNN training step b64", "GPT training step b16x64", "GPT sampling, per token"]


def run(python, case, threads, repeat):
    """The side's timed calls and peak RSS in a process of its own, or {"error": its last line}."""
    result = subprocess.run([python, "-c", SCRIPT, case, str(threads), str(repeat), DEMO], capture_output=True,
                            text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else "exit status %d" % result.returncode}
    return json.loads(result.stdout.strip().splitlines()[-1])


def alternating_rounds(pythons, case, threads, repeat, rounds):
    """Each side's calls and peak RSS over `rounds` processes, the sides taking turns to go first;
    the first error a side meets ends its measure."""
    sides = [{"seconds": [], "peak RSS MiB": 0.0} for _ in pythons]
    for _, index in taking_turns(rounds):
        if "error" in sides[index]:
            continue
        result = run(pythons[index], case, threads, repeat)
        if "error" in result:
            sides[index] = result
            continue
        sides[index]["seconds"] += result["seconds"]
        sides[index]["peak RSS MiB"] = max(sides[index]["peak RSS MiB"], result["peak RSS MiB"])
    return sides


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    parser = paired_parser(__doc__, rounds=3)
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per process")
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}  command: {' '.join(sys.argv)}")
    print(f"{'measure':44s} {'threads':>7s} {'ours':>10s} {'upstream':>10s} {'ratio':>7s} {'median':>7s} "
          f"{'ours MiB':>9s} {'up MiB':>9s} {'ratio':>7s}", flush=True)
    for case in [c for c in CASES if not args.pattern or re.search(args.pattern, c)]:
        for threads in [int(t) for t in args.threads.split(",")]:
            ours, up = alternating_rounds((args.shim, args.upstream), case, threads, args.repeat, args.rounds)
            if "error" in ours or "error" in up:
                print(f"{case:44s} {threads:7d} ours: {ours.get('error', 'ran')}; upstream: {up.get('error', 'ran')}")
                continue
            fastest = min(ours["seconds"]), min(up["seconds"])
            print(f"{case:44s} {threads:7d} {fastest[0]:10.4g} {fastest[1]:10.4g} {fastest[0] / fastest[1]:7.3f} "
                  f"{median(ours['seconds']) / median(up['seconds']):7.3f} {ours['peak RSS MiB']:9.1f} "
                  f"{up['peak RSS MiB']:9.1f} {ours['peak RSS MiB'] / up['peak RSS MiB']:7.3f}", flush=True)


if __name__ == "__main__":
    main()
