"""The federated job: a coordinator, one device process per shard (device_process.py), FedAvg
rounds, and the test accuracy of each round's aggregate (the global model), fetched from the
coordinator as the rounds complete."""
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


def next_closed_round(coordinator, task, number, devices, timeout):
    """The task's round `number` (1-based) once it has closed; a failed round, or a device process
    that died, ends the job."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rounds = coordinator.rounds(task)
        if len(rounds) >= number and rounds[number - 1]["state"] != STILL_OPEN:
            closed = rounds[number - 1]
            if closed["state"] != COMPLETED:
                raise RuntimeError(f"round {number} of {task} ended {closed['state']}: {closed}")
            return closed
        for index, process in enumerate(devices):
            if process.poll() not in (None, 0):
                raise RuntimeError(f"device {index} exited with status {process.returncode}")
        time.sleep(0.5)
    raise TimeoutError(f"round {number} of {task} did not close within {timeout} s")


def round_record(closed, test_accuracy, start_ms):
    """What the table shows of a closed round: its number, contributors, the aggregate's test
    accuracy, how long the round took and when it closed (seconds since the devices started),
    by the coordinator's clock (the accuracy is computed later, while the next rounds train)."""
    started, ended = int(closed["started_unix_ms"]), int(closed["closed_unix_ms"])
    return {"round": int(closed["round_id"]), "contributors": len(closed["contributors"]), "accuracy": test_accuracy,
            "round_seconds": (ended - started) / 1000, "seconds": (ended - start_ms) / 1000}


def run(shards, test_images, test_labels, settings, directory):
    """FedAvg over the shards ([(images, labels)] per device) for settings.rounds rounds; returns
    one record per round (round_record)."""
    directory.mkdir(parents=True, exist_ok=True)
    records = []
    with Coordinator(directory) as coordinator:
        task = coordinator.create_fedavg_task(batchnorm_cnn(), settings.rounds, len(shards),
                                              settings.round_timeout)
        start_ms = time.time() * 1000
        devices = launch_devices(coordinator, shards, directory, settings)
        try:
            global_model = batchnorm_cnn()
            for number in range(1, settings.rounds + 1):
                closed = next_closed_round(coordinator, task, number, devices, settings.round_timeout)
                global_model.load_state_dict(coordinator.fetch_model(closed["output_model_version"]))
                records.append(round_record(closed, accuracy(global_model, test_images, test_labels), start_ms))
                print(f"federated round {number}/{settings.rounds}: {records[-1]['contributors']} devices, "
                      f"{records[-1]['round_seconds']:.1f} s, closed at {records[-1]['seconds']:.1f} s; global "
                      f"model {closed['output_model_version']} test accuracy {records[-1]['accuracy']:.4f}", flush=True)
            for index, process in enumerate(devices):
                if process.wait(timeout=60) != 0:
                    raise RuntimeError(f"device {index} exited with status {process.returncode}")
        finally:
            for process in devices:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    return records
