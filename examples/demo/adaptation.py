"""Test-time adaptation of the federated model (the source) on the corrupted test set.

Every corruption and severity (corruptions.py) gets the same images: the first `samples` test
images, dealt in contiguous streams of batches among the devices, once for each batch size. The
methods, each scored on those images:
- source: the federated model as trained (BatchNorm's running statistics), no adaptation;
- BNAdapt: each device online over its own stream, from the source model: every batch normalised
  with its own statistics, folded into the running ones (momentum `bn_momentum`);
- Tent: each device (a process of its own, tent_device_process.py) online over its own stream,
  from the source model (not episodic: its steps accumulate along its stream); a batch's
  predictions are those of the forward call that takes its step (Tent's protocol);
- Tent+EATA: the same, stepping only on the samples EATA's filter keeps (in this process);
- federated Tent: each device publishes its Tent model (the source plus its delta) with
  Delta.publish to a one-round FedAvg task of torchnative-coordinator whose initial model is the
  source, weighted by its number of images; the aggregate serves the whole set without adapting
  further, with batch statistics as Tent serves.
BNAdapt and Tent+EATA run here while the devices adapt, one corruption and batch size after the
other: each has its own task, created when the one before has closed (a device's delta is checked against its
round's model, and every task starts from the same source model).
"""
import dataclasses
import functools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from cnn import accuracy, batchnorm_cnn
from coordinator import Coordinator
from corruptions import CORRUPTIONS, SEVERITIES, corrupt
from federated_job import closed_rounds, reaped
from torchnative import adapt

HERE = Path(__file__).resolve().parent
METHODS = ("source", "BNAdapt", "Tent", "Tent+EATA", "federated Tent")
CONDITIONS = [(name, severity) for name in CORRUPTIONS for severity in SEVERITIES]


@dataclasses.dataclass
class Settings:
    devices: int
    samples: int          # test images per corruption and severity
    batch_sizes: tuple    # each corruption and severity is adapted to at each of these
    lr: float             # Tent's
    bn_momentum: float    # BNAdapt's
    redundancy: float     # EATA's epsilon
    seed: int
    round_timeout: int    # seconds a federated Tent round may take


def tent_optimizer():
    # Tent's ImageNet optimizer (Wang et al. 2021): SGD with momentum 0.9.
    return functools.partial(torch.optim.SGD, momentum=0.9)


def device_streams(images, labels, devices, batch_size):
    """Contiguous shares of the images, one per device, each as a list of (images, labels) batches."""
    return [list(zip(share_images.split(batch_size), share_labels.split(batch_size)))
            for share_images, share_labels in zip(images.tensor_split(devices), labels.tensor_split(devices))]


def source_model(state):
    model = batchnorm_cnn()
    model.load_state_dict(state)
    return model


def adapt_online(state, method, lr, stream, optimizer=None):
    """The source model (state) wrapped with method and adapting online along the stream; the
    number of its predictions that were right, and the adapted model."""
    model = adapt.wrap(source_model(state), method=method, lr=lr, optimizer=optimizer).online()
    correct = 0
    for images, labels in stream:
        with torch.no_grad():  # the wrapper takes its own gradient for Tent's step
            correct += (model(images).argmax(1) == labels).sum().item()
    return correct, model


def served_accuracy(model, stream):
    """The accuracy of a wrapped model served offline (no adaptation) over the stream."""
    model.offline()
    with torch.no_grad():
        correct = sum((model(images).argmax(1) == labels).sum().item() for images, labels in stream)
    return correct / sum(len(labels) for _, labels in stream)


def change_norm(model):
    """The 2-norm of what adaptation changed in a wrapped model's adapted floating tensors (not
    BatchNorm's batch counter, which counts batches whatever they hold)."""
    return sum(offset.double().pow(2).sum().item() for offset in model.delta.offset().values()
               if offset.is_floating_point()) ** 0.5


def evaluate_here(state, images, labels, batch_size, settings):
    """The methods this process runs on one corruption and severity: source, BNAdapt and
    Tent+EATA accuracies, the largest change of a device's BatchNorm statistics, the share of
    samples EATA's filter kept and its steps."""
    streams = device_streams(images, labels, settings.devices, batch_size)
    eata = adapt.Tent(filter=adapt.EataFilter(redundancy=settings.redundancy))
    bn = [adapt_online(state, adapt.BNAdapt(), settings.bn_momentum, stream) for stream in streams]
    filtered = [adapt_online(state, eata, settings.lr, stream, tent_optimizer()) for stream in streams]
    return {"accuracy": {"source": accuracy(source_model(state), images, labels),
                         "BNAdapt": sum(correct for correct, _ in bn) / len(labels),
                         "Tent+EATA": sum(correct for correct, _ in filtered) / len(labels)},
            "bn_statistics_change": max(change_norm(model) for _, model in bn),
            "eata_kept": sum(model.counts.kept for _, model in filtered) / len(labels),
            "eata_steps": sum(model.counts.steps for _, model in filtered)}


def launch_devices(coordinator, state, experiments, labels, settings, directory):
    """One tent_device_process per device, its share of every experiment's images (a batch size
    and the images) saved to directory/tent-device-I.pt; its results in directory/tent-device-I.jsonl."""
    torch.save(state, directory / "source.pt")
    shares = [(batch_size, images.tensor_split(settings.devices), labels.tensor_split(settings.devices))
              for batch_size, images in experiments]
    processes = []
    for index in range(settings.devices):
        streams = directory / f"tent-device-{index}.pt"
        torch.save([{"batch_size": batch_size, "images": images[index], "labels": share_labels[index]}
                    for batch_size, images, share_labels in shares], streams)
        processes.append(subprocess.Popen(
            [sys.executable, str(HERE / "tent_device_process.py"), "--index", str(index), "--streams", str(streams),
             "--source", str(directory / "source.pt"), "--server", coordinator.address,
             "--key", str(directory / f"device-{index}.key"), "--lr", str(settings.lr),
             "--results", str(directory / f"tent-device-{index}.jsonl")]))
    return processes


def federated_aggregate(coordinator, task, devices, timeout):
    """The aggregate of the task's one round, once the coordinator has closed it."""
    deadline = time.monotonic() + timeout
    while not (closed := closed_rounds(coordinator, task, devices)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{task}: its federated Tent round did not close within {timeout} s")
        time.sleep(0.5)
    return coordinator.fetch_model(closed[0]["output_model_version"]), len(closed[0]["contributors"])


def device_results(directory, devices, number):
    """What each device reported (its Tent's correct predictions and change) for experiment `number`."""
    return [json.loads((directory / f"tent-device-{index}.jsonl").read_text().splitlines()[number])
            for index in range(devices)]


def evaluate(coordinator, devices, state, number, images, labels, batch_size, settings, directory):
    """Experiment `number`, one corruption and severity in batches of batch_size: every method's
    accuracy and what shows that each adaptation acted (evaluate_here's, the largest change of a
    device's Tent parameters, the federated round's contributors)."""
    task = coordinator.create_fedavg_task(source_model(state), 1, settings.devices, settings.round_timeout)
    record = evaluate_here(state, images, labels, batch_size, settings)
    aggregate, contributors = federated_aggregate(coordinator, task, devices, settings.round_timeout + 60)
    averaged = adapt.wrap(source_model(aggregate), adapt.Tent(), settings.lr)
    streams = device_streams(images, labels, settings.devices, batch_size)
    tent = device_results(directory, settings.devices, number)
    record["accuracy"]["Tent"] = sum(result["correct"] for result in tent) / len(labels)
    record["accuracy"]["federated Tent"] = served_accuracy(averaged, [batch for stream in streams for batch in stream])
    record["accuracy"] = {method: record["accuracy"][method] for method in METHODS}
    return dict(record, task=task, contributors=contributors, tent_change=max(result["change"] for result in tent))


def run(source_state, test_images, test_labels, settings, directory, progress=print):
    """Every batch size, corruption and severity, one after the other: a record of each method's
    accuracy (see evaluate)."""
    images, labels = test_images[:settings.samples], test_labels[:settings.samples]
    corrupted = {condition: corrupt(images, *condition, settings.seed) for condition in CONDITIONS}
    experiments = [(batch_size, condition) for batch_size in settings.batch_sizes for condition in CONDITIONS]
    shutil.rmtree(directory, ignore_errors=True)  # a coordinator resumes the state it finds
    directory.mkdir(parents=True)
    records = []
    with Coordinator(directory) as coordinator:
        launched = launch_devices(coordinator, source_state, [(batch_size, corrupted[condition])
                                                              for batch_size, condition in experiments],
                                  labels, settings, directory)
        with reaped(launched, "Tent device") as devices:
            for number, (batch_size, (name, severity)) in enumerate(experiments):
                record = evaluate(coordinator, devices, source_state, number, corrupted[name, severity], labels,
                                  batch_size, settings, directory)
                records.append({"batch_size": batch_size, "corruption": name, "severity": severity, **record})
                progress(records[-1])
    return records
