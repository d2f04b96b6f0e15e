"""One device of the federated job, as its own process: its shard of the training set, a
torchnative.nn.federated.Engine on the coordinator, one participate call per round, a progress
line per round on stdout.

    python device_process.py --index I --shard SHARD.pt --server HOST:PORT --key KEY --rounds R ...
"""
import argparse
import time

import torch

from cnn import batchnorm_cnn, sgd, shuffled_batches
from torchnative.nn import federated


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=int, required=True, help="this device's number in the demo (0-based)")
    parser.add_argument("--shard", required=True, help="torch.save'd {'images', 'labels'} of this device")
    parser.add_argument("--server", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    return parser.parse_args()


def main():
    arguments = parse_arguments()
    shard = torch.load(arguments.shard)
    engine = federated.Engine(batchnorm_cnn(), aggregator=federated.FedAvg(), coordinator=arguments.server,
                              key=arguments.key, lr=arguments.lr, optimizer=sgd(arguments.momentum),
                              epochs=arguments.epochs, check_in_wait=2.0)
    for round_number in range(1, arguments.rounds + 1):
        # Every round its own order of the shard, the same in every run.
        batches = shuffled_batches(shard["images"], shard["labels"], arguments.batch_size,
                                   seed=arguments.seed + 1000 * arguments.index + round_number)
        start = time.perf_counter()
        report = engine.participate(batches)
        if not report.contributed:
            raise SystemExit(f"device {arguments.index}: round {report.round_id} not contributed: {report.error}")
        print(f"  device {arguments.index}: round {report.round_id} from {report.model_version}, "
              f"{report.weight} examples, loss {report.metrics['loss_before']:.3f} -> "
              f"{report.metrics['loss_after']:.3f}, {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
