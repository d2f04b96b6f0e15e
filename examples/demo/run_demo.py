"""The main job (`make demo`): federated learning of Fashion-MNIST on one machine, against
centralised training of the same model on the same data.

A BatchNorm CNN (cnn.py); Fashion-MNIST from Debian's dataset-fashion-mnist (fashion_mnist.py);
devices * samples training examples dealt among the devices with Dirichlet label skew
(label_skew.py); FedAvg rounds through torchnative-coordinator, each device its own process
with torchnative.nn.federated.Engine (federated_job.py, device_process.py); the same training
on the union of the devices' data in one process (centralised.py); the table and plots
(report.py) in --out.

    .venv/bin/python examples/demo/run_demo.py [--rounds 10 --devices 8 --samples 600 ...]
"""
import argparse
import time
from pathlib import Path

import numpy as np
import torch

import centralised
import fashion_mnist
import federated_job
import report
from label_skew import class_counts, dirichlet_label_skew


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="FedAvg rounds (and centralised rounds of passes)")
    parser.add_argument("--devices", type=int, default=8, help="device processes")
    parser.add_argument("--samples", type=int, default=600, help="training examples per device, on average")
    parser.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration of the label skew")
    parser.add_argument("--epochs", type=int, default=1, help="local passes over a device's data per round")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--test-samples", type=int, default=10000, help="test images evaluated (of 10,000)")
    parser.add_argument("--seed", type=int, default=0, help="of the data's choice, split and order")
    parser.add_argument("--round-timeout", type=int, default=300, help="seconds a round may take")
    parser.add_argument("--out", type=Path, default=Path("build/demo"), help="output folder")
    return parser.parse_args()


def device_shards(images, labels, settings):
    """devices * samples training examples chosen at random (seeded), dealt with label skew; the
    shards [(images, labels)] and their class counts."""
    chosen = np.random.default_rng(settings.seed).choice(len(labels), settings.devices * settings.samples,
                                                         replace=False)
    # At least two batches per device, so that every device takes a step with batch statistics.
    shards = dirichlet_label_skew(labels.numpy()[chosen], settings.devices, settings.alpha, settings.seed,
                                  min_examples=2 * settings.batch_size)
    counts = class_counts(labels.numpy()[chosen], shards)
    return [(images[torch.from_numpy(chosen[shard])], labels[torch.from_numpy(chosen[shard])])
            for shard in shards], counts


def main():
    settings = parse_arguments()
    start = time.perf_counter()
    settings.out.mkdir(parents=True, exist_ok=True)
    root = fashion_mnist.torchvision_root(settings.out / "data")
    images, labels = fashion_mnist.load(root, train=True)
    test_images, test_labels = (part[:settings.test_samples] for part in fashion_mnist.load(root, train=False))
    shards, counts = device_shards(images, labels, settings)
    print(f"Fashion-MNIST: {counts.sum()} training examples over {settings.devices} devices "
          f"(Dirichlet alpha {settings.alpha}), {len(test_labels)} test images; examples per class:")
    print(f"  {'':9}  total  {' '.join(f'{label:4d}' for label in range(counts.shape[1]))}", flush=True)
    for index, row in enumerate(counts):
        print(f"  device {index}: {row.sum():5d}  {' '.join(f'{count:4d}' for count in row)}", flush=True)

    timings = {"setup": time.perf_counter() - start}
    federated = federated_job.run(shards, test_images, test_labels, settings, settings.out / "federated")
    timings["federated"] = time.perf_counter() - start - timings["setup"]
    central = centralised.run(torch.cat([shard[0] for shard in shards]), torch.cat([shard[1] for shard in shards]),
                              test_images, test_labels, settings)
    timings["centralised"] = time.perf_counter() - start - timings["setup"] - timings["federated"]
    timings["total"] = time.perf_counter() - start

    print(report.write(settings.out, settings, counts, federated, central, timings))
    print(f"after {settings.rounds} rounds: federated {federated[-1]['accuracy']:.4f}, "
          f"centralised {central[-1]['accuracy']:.4f} test accuracy; "
          + ", ".join(f"{what} {seconds:.1f} s" for what, seconds in timings.items()))
    print(f"output: {settings.out.resolve()} (accuracy.png, label_skew.png, results.json)")


if __name__ == "__main__":
    main()
