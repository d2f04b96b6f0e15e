"""The main job (`make demo`): federated learning of Fashion-MNIST on one machine, against
centralised training of the same model on the same data and against peers averaging without a
coordinator, federated fine-tuning of a GPT-style character model on fortune files, then
test-time adaptation of the federated model to corrupted test images.

A BatchNorm CNN (cnn.py); Fashion-MNIST from Debian's dataset-fashion-mnist (fashion_mnist.py);
devices * samples training examples dealt among the devices with Dirichlet label skew
(label_skew.py); FedAvg rounds through torchnative-coordinator, each device its own process
with torchnative.nn.federated.Engine (federated_job.py, device_process.py); the same training
on the union of the devices' data in one process (centralised.py); the same devices' FedAvg as
peers over torch.distributed (peers.py); the fortunes job (text_job.py: fortunes.py, gpt.py,
device_process.py again; its model under shifted text with Tent, text_shift.py); the test set corrupted
(corruptions.py) and the federated model adapted to it by BNAdapt, Tent, Tent with EATA's filter
and federated Tent through the coordinator (adaptation.py, tent_device_process.py); the tables
and plots (report.py) in --out.

    .venv/bin/python examples/demo/run_demo.py [--rounds 10 --devices 8 --samples 600 ...]
"""
import argparse
import time
from pathlib import Path

import numpy as np
import torch

import adaptation
import centralised
import fashion_mnist
import federated_job
import peers
import report
import text_job
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
    parser.add_argument("--peer-rounds", type=int, default=2,
                        help="FedAvg rounds of the same devices as peers over torch.distributed, without a coordinator")
    parser.add_argument("--adapt-samples", type=int, default=2000,
                        help="test images corrupted per corruption and severity, dealt among the devices")
    parser.add_argument("--adapt-batch-sizes", type=int, nargs="+", default=[16, 64],
                        help="test-time batch sizes, each adapted to separately")
    parser.add_argument("--tent-lr", type=float, default=0.01, help="Tent's SGD learning rate (momentum 0.9)")
    parser.add_argument("--bn-momentum", type=float, default=0.1, help="BNAdapt's running-statistics momentum")
    parser.add_argument("--eata-redundancy", type=float, default=0.5,
                        help="EATA's epsilon: a sample is kept if its softmax's cosine to the kept average is below it")
    parser.add_argument("--text-devices", type=int, default=4,
                        help="fortunes job: device processes, a fortune file each")
    parser.add_argument("--text-rounds", type=int, default=3, help="fortunes job: FedAvg rounds")
    parser.add_argument("--text-sequences", type=int, default=192,
                        help="fortunes job: training sequences of 64 characters per device (and of the source)")
    parser.add_argument("--text-held-out", type=int, default=32, help="fortunes job: held-out sequences per file")
    parser.add_argument("--text-batch-size", type=int, default=16)
    parser.add_argument("--text-lr", type=float, default=3e-3, help="fortunes job: Adam's learning rate")
    parser.add_argument("--text-epochs", type=int, default=1, help="fortunes job: local passes per round")
    parser.add_argument("--text-pretrain-epochs", type=int, default=2, help="fortunes job: passes over the source")
    parser.add_argument("--text-tent-lr", type=float, default=1e-3,
                        help="fortunes job: Tent's Adam learning rate on the LayerNorms under a shifted source")
    parser.add_argument("--text-typos", type=float, default=0.2,
                        help="fortunes job: share of the held-out text's characters replaced by random symbols")
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


def adaptation_settings(settings):
    return adaptation.Settings(devices=settings.devices, samples=settings.adapt_samples,
                               batch_sizes=tuple(settings.adapt_batch_sizes), lr=settings.tent_lr,
                               bn_momentum=settings.bn_momentum, redundancy=settings.eata_redundancy,
                               seed=settings.seed, round_timeout=settings.round_timeout)


def print_adapted(record):
    print(f"adaptation, batches of {record['batch_size']}, {record['corruption']} severity {record['severity']}: "
          + ", ".join(f"{method} {value:.4f}" for method, value in record["accuracy"].items())
          + f"; BatchNorm statistics moved {record['bn_statistics_change']:.3f}, Tent parameters "
          f"{record['tent_change']:.4f}, EATA kept {record['eata_kept']:.0%}; federated Tent: "
          f"{record['task']}, {record['contributors']} devices", flush=True)


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
    federated, source = federated_job.run(shards, test_images, test_labels, settings, settings.out / "federated")
    timings["federated"] = time.perf_counter() - start - timings["setup"]
    central = centralised.run(torch.cat([shard[0] for shard in shards]), torch.cat([shard[1] for shard in shards]),
                              test_images, test_labels, settings)
    timings["centralised"] = time.perf_counter() - start - timings["setup"] - timings["federated"]
    peer_rounds, differing = peers.run(shards, test_images, test_labels, settings, settings.out / "peers")
    if differing:
        raise SystemExit(f"the peers' average is not the central weighted average in {differing}")
    timings["peers"] = time.perf_counter() - start - sum(timings.values())
    text = text_job.run(settings, settings.out / "text")
    timings["text"] = time.perf_counter() - start - sum(timings.values())
    print(f"test-time adaptation: {settings.adapt_samples} test images per corruption and severity, "
          f"{settings.devices} devices' streams, batches of {' and of '.join(map(str, settings.adapt_batch_sizes))}",
          flush=True)
    adapted = adaptation.run(source, test_images, test_labels, adaptation_settings(settings),
                             settings.out / "adaptation", progress=print_adapted)
    timings["adaptation"] = time.perf_counter() - start - sum(timings.values())
    timings["total"] = time.perf_counter() - start

    print(report.write(settings.out, settings, counts, federated, central, peer_rounds, text, adapted,
                       adaptation.METHODS, timings))
    print(f"after {settings.rounds} rounds: federated {federated[-1]['accuracy']:.4f}, "
          f"centralised {central[-1]['accuracy']:.4f} test accuracy; after {settings.peer_rounds} rounds, "
          f"peers {peer_rounds[-1]['accuracy']:.4f}; fortunes held-out perplexity {text['pretrained']:.4f} -> "
          f"{text['rounds'][-1]['perplexity']:.4f} in {settings.text_rounds} rounds; "
          + ", ".join(f"{what} {seconds:.1f} s" for what, seconds in timings.items()))
    print(f"output: {settings.out.resolve()} (accuracy.png, label_skew.png, perplexity.png, adaptation.png, "
          "results.json)")


if __name__ == "__main__":
    main()
