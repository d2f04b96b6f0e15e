"""Peers without a coordinator: the federated job's FedAvg among the same device shards, each
device a process of its own averaging with the others over torch.distributed
(`init_process_group(backend="local")`, torchnative.nn.federated.Engine with coordinator=None).
Every round a peer trains from the common model in the device process's seeded batch order,
the peers average their models (weighted by examples), and test the average together, each on its
slice of the test set. In round 1 each peer also trains a copy alone, so that this process can
check the peers' average against the weighted average it computes centrally, bit for bit.

    run(shards, test_images, test_labels, settings, directory)            # the orchestrator
    python peers.py --rank R --world W --shard SHARD.pt --rendezvous file://... ...   # a peer
"""
import argparse
import copy
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from cnn import accuracy, batchnorm_cnn, sgd, shuffled_batches
from federated_job import reaped
from torchnative.nn import federated

HERE = Path(__file__).resolve().parent


def engine_for(model, arguments):
    """The device processes' local steps (device_process.py), without a coordinator."""
    return federated.Engine(model, lr=arguments.lr, optimizer=sgd(arguments.momentum), epochs=arguments.epochs)


def test_together(model, images, labels):
    """The fraction of the whole test set the (common) model labels right: each peer counts on its
    slice, one all-reduce sums the counts."""
    counts = torch.tensor([round(accuracy(model, images, labels) * len(labels)), len(labels)], dtype=torch.float64)
    dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()


def peer(arguments):
    """One peer's rounds; rank 0 prints each round's test accuracy. Saves its round-1 check."""
    dist.init_process_group(backend="local", init_method=arguments.rendezvous, rank=arguments.rank,
                            world_size=arguments.world, timeout=timedelta(seconds=arguments.timeout))
    shard = torch.load(arguments.shard)
    model = batchnorm_cnn()
    engine = engine_for(model, arguments)
    for number in range(1, arguments.rounds + 1):
        start = time.perf_counter()
        # The device process's order for the same device and round.
        batches = shuffled_batches(shard["images"], shard["labels"], arguments.batch_size,
                                   seed=arguments.seed + 1000 * arguments.rank + number)
        if number == 1:
            alone = copy.deepcopy(model)
            engine_for(alone, arguments).local_steps(batches)
        report = engine.participate(batches)
        if number == 1:
            state = model.state_dict()
            torch.save({"weight": report.weight, "trained": alone.state_dict(),
                        "averaged": {name: state[name] for name in engine.trained_names()}}, arguments.check)
        test_accuracy = test_together(model, shard["test_images"], shard["test_labels"])
        # One write per line (print writes its end apart, unbuffered under PYTHONUNBUFFERED): the
        # peers leave the all-reduce together, and their lines would run into each other.
        print(f"  peer {arguments.rank}: round {number}, {report.weight} of {report.total_weight:.0f} examples, "
              f"loss {report.metrics['loss_before']:.3f} -> {report.metrics['loss_after']:.3f}, "
              f"{time.perf_counter() - start:.1f} s\n", end="", flush=True)
        if arguments.rank == 0:
            print(f"peers round {number}/{arguments.rounds}: {arguments.world} peers' average test accuracy "
                  f"{test_accuracy:.4f}\n", end="", flush=True)
            with open(arguments.results, "a") as results:
                results.write(f"{number} {test_accuracy!r} {time.time()!r}\n")
    dist.destroy_process_group()


def central_average_matches(checks):
    """Whether every peer's round-1 average has the bits of the weighted average of the peers'
    models trained alone, computed here: float64 products summed in rank order, divided and
    rounded to float32 once (the Engine's rule); the names of the tensors that differ."""
    total = sum(float(check["weight"]) for check in checks)
    differing = []
    for name in checks[0]["averaged"]:
        weighted = None
        for check in checks:
            product = check["trained"][name].double() * float(check["weight"])
            weighted = product if weighted is None else weighted + product
        expected = (weighted / total).to(checks[0]["averaged"][name].dtype)
        if not all(torch.equal(check["averaged"][name], expected) for check in checks):
            differing.append(name)
    return differing


def launch(shards, test_images, test_labels, settings, directory):
    """One peer process per shard, each with its slice of the test set."""
    processes = []
    # A file:// URL takes an absolute path: file://build/demo/... names host "build".
    rendezvous = f"file://{(directory / 'rendezvous').resolve()}"
    for rank, ((images, labels), test_part, label_part) in enumerate(
            zip(shards, test_images.tensor_split(len(shards)), test_labels.tensor_split(len(shards)))):
        shard = directory / f"peer-{rank}.pt"
        torch.save({"images": images, "labels": labels, "test_images": test_part, "test_labels": label_part}, shard)
        processes.append(subprocess.Popen(
            [sys.executable, str(HERE / "peers.py"), "--rank", str(rank), "--world", str(len(shards)),
             "--shard", str(shard), "--rendezvous", rendezvous, "--check", str(directory / f"check-{rank}.pt"),
             "--results", str(directory / "rounds.txt"), "--rounds", str(settings.peer_rounds),
             "--epochs", str(settings.epochs), "--batch-size", str(settings.batch_size), "--lr", str(settings.lr),
             "--momentum", str(settings.momentum), "--seed", str(settings.seed),
             "--timeout", str(settings.round_timeout)]))
    return processes


def run(shards, test_images, test_labels, settings, directory):
    """settings.peer_rounds rounds of peer FedAvg over the shards; one record per round (its number,
    the average's test accuracy, seconds since the peers started) and the round-1 check: the
    names of the tensors whose average differs from the central one (none, when it holds)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    start = time.time()
    with reaped(launch(shards, test_images, test_labels, settings, directory), "peer") as processes:
        for process in processes:
            process.wait(timeout=settings.peer_rounds * settings.round_timeout)
    records = [{"round": int(number), "accuracy": float(value), "seconds": float(when) - start}
               for number, value, when in map(str.split, (directory / "rounds.txt").read_text().splitlines())]
    differing = central_average_matches([torch.load(directory / f"check-{rank}.pt") for rank in range(len(shards))])
    print(f"peers round 1: the {len(shards)} peers' average "
          + (f"differs from the central weighted average in {differing}" if differing else
             "has the bits of the central weighted average (float64, rank order, rounded once)"), flush=True)
    return records, differing


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--rank", "--world", "--rounds", "--epochs", "--batch-size", "--seed", "--timeout"):
        parser.add_argument(name, type=int, required=True)
    for name in ("--shard", "--rendezvous", "--check", "--results"):
        parser.add_argument(name, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    return parser.parse_args()


if __name__ == "__main__":
    peer(parse_arguments())
