"""The federated job: a coordinator, one device process per shard (device_process.py), FedAvg
rounds, and each round's aggregate (the global model) fetched from the coordinator as the rounds
complete and evaluated: the Fashion-MNIST CNN's test accuracy here (run), the fortunes model's
perplexity in text_job.py (both through run_job)."""
import contextlib
import dataclasses
import shutil
import subprocess
import sys
import time
import typing
from pathlib import Path

import torch

from cnn import accuracy, batchnorm_cnn
from coordinator import Coordinator

HERE = Path(__file__).resolve().parent
COMPLETED = "ROUND_STATE_COMPLETED"
STILL_OPEN = ("ROUND_STATE_TRAINING", "ROUND_STATE_AGGREGATING")


def device_flags(settings):
    """The device processes' flags for the Fashion-MNIST job: the CNN, SGD with momentum."""
    return ["--model", "cnn", "--name", "device", "--rounds", str(settings.rounds), "--epochs", str(settings.epochs),
            "--batch-size", str(settings.batch_size), "--lr", str(settings.lr), "--optimizer", "sgd",
            "--momentum", str(settings.momentum), "--seed", str(settings.seed)]


def launch_devices(coordinator, shards, directory, flags):
    """One device process (device_process.py flags...) per (inputs, targets) shard, saved to
    directory/device-I.pt; their stdout is this process's."""
    processes = []
    for index, (inputs, targets) in enumerate(shards):
        shard = directory / f"device-{index}.pt"
        torch.save({"inputs": inputs, "targets": targets}, shard)
        processes.append(subprocess.Popen(
            [sys.executable, str(HERE / "device_process.py"), "--index", str(index), "--shard", str(shard),
             "--server", coordinator.address, "--key", str(directory / f"device-{index}.key")] + flags))
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
    closed = sorted((entry for entry in coordinator.rounds(task) if entry["state"] not in STILL_OPEN),
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


def follow_rounds(coordinator, task, devices, job, start_ms, evaluate):
    """Announces each round as it closes and, between polls, evaluates the closed rounds' global
    models one at a time (evaluate(closed round) -> job.metric's value): an evaluation takes
    longer than a round's poll, so a round's close is shown at most one evaluation late. Returns
    the rounds' records."""
    records, announced = [], 0
    key, description = job.metric
    deadline = time.monotonic() + job.rounds * job.round_timeout
    while len(records) < job.rounds:
        closed = closed_rounds(coordinator, task, devices)
        for entry in closed[announced:]:
            record = round_record(entry, start_ms)
            print(f"{job.name} round {record['round']}/{job.rounds} closed: {record['contributors']} devices, "
                  f"{record['round_seconds']:.1f} s, at {record['seconds']:.1f} s", flush=True)
        announced = len(closed)
        if len(records) < announced:
            entry = closed[len(records)]
            records.append(dict(round_record(entry, start_ms), **{key: evaluate(entry)}))
            print(f"{job.name} round {records[-1]['round']}/{job.rounds}: global model "
                  f"{entry['output_model_version']} {description} {records[-1][key]:.4f}", flush=True)
        elif time.monotonic() > deadline:
            raise TimeoutError(f"{task}: {announced} of {job.rounds} rounds closed after "
                               f"{job.rounds * job.round_timeout} s")
        else:
            time.sleep(0.5)
    return records


@dataclasses.dataclass
class Job:
    """A FedAvg task of device processes: its name in the progress lines, its model (a factory:
    the task's initial model, unless one is given to run_job), rounds, seconds a round may take,
    device_process.py's flags, and the metric of its global models (record key, description)."""
    name: str
    model: typing.Callable
    rounds: int
    round_timeout: int
    flags: list
    metric: tuple


def run_job(job, shards, directory, evaluate, initial=None):
    """job's FedAvg rounds over the shards ([(inputs, targets)] per device), from initial (a model;
    job.model() when None); one record per round (round_record, with evaluate(model) of its
    global model under job.metric's key) and the last round's global model."""
    # A coordinator resumes the state it finds: a run's task, keys and models start from nothing.
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with Coordinator(directory) as coordinator:
        task = coordinator.create_fedavg_task(job.model() if initial is None else initial, job.rounds, len(shards),
                                              job.round_timeout)
        start_ms = time.time() * 1000
        with reaped(launch_devices(coordinator, shards, directory, job.flags), "device") as devices:
            global_model = job.model()

            def evaluate_round(closed):
                global_model.load_state_dict(coordinator.fetch_model(closed["output_model_version"]))
                return evaluate(global_model)

            records = follow_rounds(coordinator, task, devices, job, start_ms, evaluate_round)
    return records, global_model


def run(shards, test_images, test_labels, settings, directory):
    """FedAvg of the CNN over the shards ([(images, labels)] per device) for settings.rounds
    rounds; returns one record per round (round_record, with the global model's test accuracy)
    and the last round's global model (its state dict)."""
    job = Job("federated", batchnorm_cnn, settings.rounds, settings.round_timeout, device_flags(settings),
              ("accuracy", "test accuracy"))
    records, global_model = run_job(job, shards, directory, lambda model: accuracy(model, test_images, test_labels))
    return records, global_model.state_dict()
