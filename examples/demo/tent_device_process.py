"""One device of federated Tent, as its own process: for each experiment in turn (a batch size,
a corruption and severity), Tent online from the source model over its own stream of the
corrupted test set, its result appended to --results (a JSON line: its right predictions,
images, parameter change), then its adapted model published with Delta.publish as its
contribution to the coordinator's round for that experiment; a progress line each on stdout.

    python tent_device_process.py --index I --streams STREAMS.pt --source SOURCE.pt --server HOST:PORT ...
"""
import argparse
import json
import time

import torch

from adaptation import adapt_online, change_norm, tent_optimizer
from torchnative import adapt
from torchnative.device import Device


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=int, required=True, help="this device's number in the demo (0-based)")
    parser.add_argument("--streams", required=True,
                        help="torch.save'd [{'batch_size', 'images', 'labels'}], one per experiment")
    parser.add_argument("--source", required=True, help="torch.save'd state dict of the source model")
    parser.add_argument("--server", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--results", required=True, help="JSON lines file, one line per experiment")
    return parser.parse_args()


def main():
    arguments = parse_arguments()
    source = torch.load(arguments.source)
    device = Device(arguments.server, arguments.key, check_in_wait=2.0)
    for number, share in enumerate(torch.load(arguments.streams)):
        start = time.perf_counter()
        stream = list(zip(share["images"].split(share["batch_size"]), share["labels"].split(share["batch_size"])))
        correct, model = adapt_online(source, adapt.Tent(), arguments.lr, stream, tent_optimizer())
        result = {"correct": correct, "images": len(share["labels"]), "change": change_norm(model)}
        # Written before publishing: the round closes only once every device has published.
        with open(arguments.results, "a") as results:
            results.write(json.dumps(result) + "\n")
        report = model.delta.publish(device, weight=len(share["labels"]))
        if not report.contributed:
            raise SystemExit(f"Tent device {arguments.index}: round {report.round_id} not contributed: {report.error}")
        print(f"  Tent device {arguments.index}: experiment {number + 1}, {correct}/{result['images']} right "
              f"while adapting, parameters moved {result['change']:.4f}, published to {report.task_id} "
              f"round {report.round_id}, {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
