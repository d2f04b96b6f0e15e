"""The federated job: a coordinator, one device process per shard (device_process.py), FedAvg
rounds, and the test accuracy of each round's aggregate (the global model), fetched from the
coordinator as the rounds complete."""
import contextlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from cnn import accuracy, batchnorm_cnn
from coordinator import Coordinator

HERE = Path(__file__).resolve().parent
COMPLETED = "ROUND_STATE_COMPLETED"
STILL_OPEN = "ROUND_STATE_TRAINING"


def launch_devices(coordinator, shards, directory, settings):
    """One device process per shard (saved to directory/device-I.pt); their stdout is this process's."""
    processes = []
    for index, (images, labels) in enumerate(shards):
        shard = directory / f"device-{index}.pt"
        torch.save({"images": images, "labels": labels}, shard)
        processes.append(subprocess.Popen(
            [sys.executable, str(HERE / "device_process.py"), "--index", str(index), "--shard", str(shard),
             "--server", coordinator.address, "--key", str(directory / f"device-{index}.key"),
             "--rounds", str(settings.rounds), "--epochs", str(settings.epochs),
             "--batch-size", str(settings.batch_size), "--lr", str(settings.lr),
             "--momentum", str(settings.momentum), "--seed", str(settings.seed)]))
    return processes


@contextlib.contextmanager
def reaped(processes, name):
    """processes, for a with block: leaving it normally, each must exit with status 0 (waited for
    60 s at most); leaving it in any way, those still running are killed."""
    try:
        yield processes
        for index, process in enumerate(processes):
            if process.wait(timeout=60) != 0:
                raise RuntimeError(f"{name} {index} exited with status {process.returncode}")
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def closed_rounds(coordinator, task, devices):
    """The task's rounds closed so far, by round number; a round that did not complete, or a
    device process that died, ends the job."""
    closed = sorted((entry for entry in coordinator.rounds(task) if entry["state"] != STILL_OPEN),
                    key=lambda entry: int(entry["round_id"]))
    for entry in closed:
        if entry["state"] != COMPLETED:
            raise RuntimeError(f"round {entry['round_id']} of {task} ended {entry['state']}: {entry}")
    for index, process in enumerate(devices):
        if process.poll() not in (None, 0):
            raise RuntimeError(f"device {index} exited with status {process.returncode}")
    return closed


def round_record(closed, start_ms):
    """What the table shows of a closed round, by the coordinator's clock: its number,
    contributors, how long it took and when it closed (seconds since the devices started)."""
    started, ended = int(closed["started_unix_ms"]), int(closed["closed_unix_ms"])
    return {"round": int(closed["round_id"]), "contributors": len(closed["contributors"]),
            "round_seconds": (ended - started) / 1000, "seconds": (ended - start_ms) / 1000}


def follow_rounds(coordinator, task, devices, settings, start_ms, test_accuracy):
    """Announces each round as it closes and, between polls, tests the closed rounds' global
    models one at a time (test_accuracy(closed round)): a test takes longer than a round's poll,
    so a round's close is shown at most one test late. Returns the rounds' records."""
    records, announced = [], 0
    deadline = time.monotonic() + settings.rounds * settings.round_timeout
    while len(records) < settings.rounds:
        closed = closed_rounds(coordinator, task, devices)
        for entry in closed[announced:]:
            record = round_record(entry, start_ms)
            print(f"federated round {record['round']}/{settings.rounds} closed: {record['contributors']} devices, "
                  f"{record['round_seconds']:.1f} s, at {record['seconds']:.1f} s", flush=True)
        announced = len(closed)
        if len(records) < announced:
            entry = closed[len(records)]
            records.append(dict(round_record(entry, start_ms), accuracy=test_accuracy(entry)))
            print(f"federated round {records[-1]['round']}/{settings.rounds}: global model "
                  f"{entry['output_model_version']} test accuracy {records[-1]['accuracy']:.4f}", flush=True)
        elif time.monotonic() > deadline:
            raise TimeoutError(f"{task}: {announced} of {settings.rounds} rounds closed after "
                               f"{settings.rounds * settings.round_timeout} s")
        else:
            time.sleep(0.5)
    return records


def run(shards, test_images, test_labels, settings, directory):
    """FedAvg over the shards ([(images, labels)] per device) for settings.rounds rounds; returns
    one record per round (round_record, with the global model's test accuracy) and the last
    round's global model (its state dict)."""
    # A coordinator resumes the state it finds: a run's task, keys and models start from nothing.
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with Coordinator(directory) as coordinator:
        task = coordinator.create_fedavg_task(batchnorm_cnn(), settings.rounds, len(shards),
                                              settings.round_timeout)
        start_ms = time.time() * 1000
        with reaped(launch_devices(coordinator, shards, directory, settings), "device") as devices:
            global_model = batchnorm_cnn()

            def test_accuracy(closed):
                global_model.load_state_dict(coordinator.fetch_model(closed["output_model_version"]))
                return accuracy(global_model, test_images, test_labels)

            records = follow_rounds(coordinator, task, devices, settings, start_ms, test_accuracy)
    return records, global_model.state_dict()
