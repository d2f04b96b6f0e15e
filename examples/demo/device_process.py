"""One device of a federated job, as its own process: its shard of the training data, a
torchnative.nn.federated.Engine on the coordinator, one participate call per round, a progress
line per round on stdout. The model is the Fashion-MNIST CNN (cnn.py) or the fortunes character
model (gpt.py).

    python device_process.py --index I --shard SHARD.pt --server HOST:PORT --key KEY --model cnn --rounds R ...
"""
import argparse
import time

import torch

from cnn import batchnorm_cnn, sgd, shuffled_batches
from fortunes import VOCABULARY
from gpt import char_gpt
from torchnative.nn import federated

MODELS = {"cnn": batchnorm_cnn, "gpt": lambda: char_gpt(VOCABULARY)}


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=int, required=True, help="this device's number in the demo (0-based)")
    parser.add_argument("--shard", required=True, help="torch.save'd {'inputs', 'targets'} of this device")
    parser.add_argument("--server", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--name", required=True, help="how its progress lines name it ('device': 'device I: ...')")
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), required=True)
    parser.add_argument("--momentum", type=float, default=0.0, help="SGD's")
    parser.add_argument("--seed", type=int, required=True)
    return parser.parse_args()


def main():
    arguments = parse_arguments()
    shard = torch.load(arguments.shard)
    optimizer = sgd(arguments.momentum) if arguments.optimizer == "sgd" else torch.optim.Adam
    engine = federated.Engine(MODELS[arguments.model](), aggregator=federated.FedAvg(), coordinator=arguments.server,
                              key=arguments.key, lr=arguments.lr, optimizer=optimizer, epochs=arguments.epochs,
                              check_in_wait=2.0)
    for round_number in range(1, arguments.rounds + 1):
        # Every round its own order of the shard, the same in every run.
        batches = shuffled_batches(shard["inputs"], shard["targets"], arguments.batch_size,
                                   seed=arguments.seed + 1000 * arguments.index + round_number)
        start = time.perf_counter()
        report = engine.participate(batches)
        if not report.contributed:
            raise SystemExit(f"{arguments.name} {arguments.index}: round {report.round_id} not contributed: "
                             f"{report.error}")
        print(f"  {arguments.name} {arguments.index}: round {report.round_id} from {report.model_version}, "
              f"{report.weight} examples, loss {report.metrics['loss_before']:.3f} -> "
              f"{report.metrics['loss_after']:.3f}, {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
