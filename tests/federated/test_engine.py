"""torchnative.nn.federated.Engine on the shim's torch: device processes train a small BatchNorm
MLP (supervised, or with Tent) on synthetic batches and take part in one FedAvg round of a real
coordinator; peers average the same way over torch.distributed (backend "local"). A model whose
head is tied to its token embedding (as GPT's) takes part the same way, the tie kept.

Each device also trains a deep copy of its model alone (Engine.local_steps, the same code on the
same data from the same weights), and the test averages those copies itself: float64 products
and sums in device-id order (the coordinator's hub), or rank order (the all-reduce), divided
and rounded once to float32 (federation.fedavg). Both aggregators sum in that fixed order, so
the aggregate must have exactly those bits, not merely be close to them.
"""
import copy
import json
import re
import signal
import subprocess
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from torchnative import adapt
from torchnative.delta import BaseMismatch, TiedMismatch, first_names
from torchnative.nn import federated

from federation import (PYTHON, admin_json, closed_rounds, create_fedavg_task, fedavg, fetch_model,
                        read_safetensors, wait_for)

HERE = Path(__file__).resolve().parent
FEATURES, CLASSES, VOCABULARY = 6, 3, 7


def tiny_model():
    """The same BatchNorm MLP in every process (seeded)."""
    torch.manual_seed(19)
    return nn.Sequential(nn.Linear(FEATURES, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, CLASSES))


def synthetic_batches(seed, count, size):
    """count batches of size examples: class-dependent means, so that the loss can fall; shifted
    per seed, so that the devices' data differ."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        targets = torch.randint(0, CLASSES, (size,), generator=generator)
        inputs = torch.randn(size, FEATURES, generator=generator) + targets[:, None] * 0.8 + seed * 0.1
        batches.append((inputs, targets))
    return batches


def tied_lm():
    """A GPT's tie in small (the same in every process): the head's weight is the token
    embedding's, one Parameter under two state_dict names ("2.weight" and "0.weight")."""
    torch.manual_seed(19)
    model = nn.Sequential(nn.Embedding(VOCABULARY, 8), nn.LayerNorm(8), nn.Linear(8, VOCABULARY, bias=False))
    model[2].weight = model[0].weight
    return model


def token_batches(seed, count, size):
    """count batches of size (token, next token) pairs, a rule per seed, so that the loss can fall."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        tokens = torch.randint(0, VOCABULARY, (size,), generator=generator)
        batches.append((tokens, (2 * tokens + seed) % VOCABULARY))
    return batches


MODELS = {"tiny": (tiny_model, synthetic_batches), "tied": (tied_lm, token_batches)}


def ties(model):
    """{name: the name it is tied to} of model's tied tensors."""
    return {name: first for name, first in first_names(model).items() if name != first}


def floating_state(model):
    return {name: tensor.detach().numpy().copy() for name, tensor in model.state_dict().items()
            if tensor.is_floating_point()}


def engine_options(method):
    if method == "tent":
        return {"method": adapt.Tent(), "lr": 0.05}
    return {"lr": 0.1}


def alone(model, method, batches):
    """What the Engine's local steps make of a copy of model: the test's reference."""
    twin = copy.deepcopy(model)
    federated.Engine(twin, **engine_options(method)).local_steps(batches)
    return floating_state(twin)


DEVICE_SCRIPT = r'''
import json, pathlib, sys, dataclasses, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_engine import MODELS, engine_options, alone, floating_state, ties
from torchnative import adapt
from torchnative.nn import federated
server, key, out, seed, batch_size, method, rounds = sys.argv[2:9]
options = json.loads(sys.argv[9])
build, make_batches = MODELS[options.get("model", "tiny")]
model, batches = build(), make_batches(int(seed), 3, int(batch_size))
np.savez(out + ".npz", **alone(model, method, batches))
if options.get("wrap"):  # served with Tent between rounds, as a deployed model would be
    model = adapt.wrap(model, method=adapt.Tent(), lr=0.05)
settings = engine_options(method)
if options.get("stall"):  # stops in the round's first loss, after the model arrived: a test kills it there
    def stalling_loss(outputs, targets):
        pathlib.Path(out + ".training").touch()
        time.sleep(600)
    settings["loss"] = stalling_loss
engine = federated.Engine(model, aggregator=federated.FedAvg(), coordinator=server, key=key,
                          check_in_wait=2.0, **settings)
reports = [dataclasses.asdict(engine.participate(batches, apply_aggregate=options.get("apply", False),
                                                 aggregate_grace=options.get("grace", 10.0)))
           for _ in range(int(rounds))]
np.savez(out + "-final.npz", **floating_state(model))
if options.get("wrap"):
    model.revert()
    np.savez(out + "-reverted.npz", **{name: t.detach().numpy() for name, t in model.state_dict().items()})
print(json.dumps({"device_id": engine.device.device_id, "seed": int(seed), "reports": reports, "report": reports[0],
                  "ties": ties(model)}))
'''


def device_command(coordinator, tmp_path, seed, size, method, rounds, options=None):
    """A device process taking part in `rounds` rounds with an Engine; it prints its reports
    ("report": the first round's) and its model's ties after them, and saves what its first
    round's local steps make of its model alone to d<seed>.npz, and its model's floating tensors
    after its rounds to d<seed>-final.npz. options: "model" (a key of MODELS: "tiny", the
    default, or "tied"), "apply" and "grace" (participate's apply_aggregate and
    aggregate_grace), "wrap" (the model is
    adapt.wrap'ped with Tent; after its rounds it reverts, and saves d<seed>-reverted.npz),
    "stall" (it sleeps in its first round, once it has touched d<seed>.training)."""
    return [PYTHON, "-c", DEVICE_SCRIPT, str(HERE), f"127.0.0.1:{coordinator['grpc_port']}",
            str(tmp_path / f"d{seed}.key"), str(tmp_path / f"d{seed}"), str(seed), str(size), method, str(rounds),
            json.dumps(options or {})]


def start_devices(coordinator, tmp_path, plans, method, rounds=1, options=None):
    """One device process per (seed, batch size) plan, by seed."""
    return {seed: subprocess.Popen(device_command(coordinator, tmp_path, seed, size, method, rounds, options),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for seed, size in plans}


def device_outputs(tmp_path, processes):
    """The outputs of the device processes (by seed) once they end, by device id, with the trained
    copies and the final models."""
    outputs = {}
    for seed, process in processes.items():
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        output = json.loads(out)
        output["trained"] = dict(np.load(tmp_path / f"d{seed}.npz"))
        output["final"] = dict(np.load(tmp_path / f"d{seed}-final.npz"))
        outputs[output["device_id"]] = output
    return outputs


def run_devices(coordinator, tmp_path, plans, method, rounds=1, options=None):
    """Runs one device process per (seed, batch size) plan; their outputs by device id."""
    return device_outputs(tmp_path, start_devices(coordinator, tmp_path, plans, method, rounds, options))


def one_round(coordinator, tmp_path, plans, method, options=None):
    """One FedAvg round of len(plans) Engine devices from options' model (tiny_model() by default);
    returns the initial state, the devices' outputs by id and the aggregate the coordinator stored."""
    build, _ = MODELS[(options or {}).get("model", "tiny")]
    initial = {name: tensor.numpy() for name, tensor in build().state_dict().items()}
    task = create_fedavg_task(coordinator, tmp_path, initial, rounds=1, per_round=len(plans),
                              min_updates=len(plans), min_available=len(plans), timeout_ms=20000)
    outputs = run_devices(coordinator, tmp_path, plans, method, options=options)
    (entry,) = closed_rounds(coordinator, task, 1, 30)
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    assert entry["contributors"] == sorted(outputs), entry
    for output in outputs.values():
        report = output["report"]
        assert report["contributed"] and report["error"] == "", report
        assert (report["task_id"], report["round_id"]) == (task, entry["round_id"])
        assert report["model_version"] == entry["input_model_version"]
        assert report["bytes_received"] == report["bytes_sent"] == sum(a.nbytes for a in initial.values())
    _, aggregate = fetch_model(coordinator, tmp_path, entry["output_model_version"])
    return initial, outputs, aggregate


def assert_fedavg_bits(aggregate, outputs, weights):
    """Every floating tensor of aggregate has the bits of the weighted average of the devices'
    trained copies, in the order of `outputs` (device id or rank)."""
    for name, values in aggregate.items():
        if values.dtype != np.float32:
            continue
        expected = fedavg((weights[key], outputs[key]["trained"][name].ravel()) for key in sorted(outputs))
        assert np.array_equal(values.ravel().view(np.uint32), expected.view(np.uint32)), name


def assert_holds_the_aggregate(outputs, aggregate, version):
    """Every device's model ended holding the stored aggregate `version`, bit for bit."""
    for output in outputs.values():
        report = output["reports"][-1]
        assert report["aggregate_applied"] and report["aggregate_version"] == version, report
        assert sorted(output["final"]) == sorted(name for name, values in aggregate.items() if values.dtype == np.float32)
        for name, values in output["final"].items():
            assert values.tobytes() == aggregate[name].tobytes(), name


def test_supervised_engines_round_is_the_weighted_average_of_their_training(coordinator, tmp_path):
    plans = [(1, 8), (2, 16), (3, 24)]  # seed, batch size: weights 24, 48, 72 (3 batches each)
    initial, outputs, aggregate = one_round(coordinator, tmp_path, plans, "supervised")
    weights = {device: output["report"]["weight"] for device, output in outputs.items()}
    assert sorted(weights.values()) == [24, 48, 72]
    assert_fedavg_bits(aggregate, outputs, weights)
    # A control: the weights matter (the unweighted mean of the same training is another model).
    unweighted = fedavg((1, output["trained"]["0.weight"].ravel()) for output in outputs.values())
    assert not np.array_equal(aggregate["0.weight"].ravel(), unweighted)
    # The batch counter is not averaged: the global model's stays.
    assert aggregate["1.num_batches_tracked"].tolist() == initial["1.num_batches_tracked"].tolist()
    for output in outputs.values():
        metrics = output["report"]["metrics"]
        assert metrics["loss_after"] < metrics["loss_before"], metrics
        assert output["report"]["delta_norm"] > 0


def test_tent_engines_round_averages_only_the_batchnorm_affine_parameters(coordinator, tmp_path):
    plans = [(4, 16), (5, 32)]
    initial, outputs, aggregate = one_round(coordinator, tmp_path, plans, "tent")
    weights = {device: output["report"]["weight"] for device, output in outputs.items()}
    assert_fedavg_bits(aggregate, outputs, weights)
    adapted = {"1.weight", "1.bias"}
    for name, values in aggregate.items():
        changed = not np.array_equal(values, initial[name])
        assert changed == (name in adapted), name
    for output in outputs.values():
        metrics = output["report"]["metrics"]
        assert metrics["entropy_after"] < metrics["entropy_before"], metrics


def test_applying_the_aggregate_leaves_every_device_holding_the_weighted_average(coordinator, tmp_path):
    plans = [(11, 8), (12, 16), (13, 24)]
    _, outputs, aggregate = one_round(coordinator, tmp_path, plans, "supervised", {"apply": True})
    weights = {device: output["report"]["weight"] for device, output in outputs.items()}
    assert_fedavg_bits(aggregate, outputs, weights)
    task = next(iter(outputs.values()))["report"]["task_id"]
    assert_holds_the_aggregate(outputs, aggregate, f"{task}/1")


def test_a_wrapped_tent_model_takes_part_and_its_revert_restores_the_base_bytes(coordinator, tmp_path):
    plans = [(14, 16), (15, 32)]
    initial, outputs, aggregate = one_round(coordinator, tmp_path, plans, "tent", {"wrap": True, "apply": True})
    weights = {device: output["report"]["weight"] for device, output in outputs.items()}
    assert_fedavg_bits(aggregate, outputs, weights)
    task = next(iter(outputs.values()))["report"]["task_id"]
    assert_holds_the_aggregate(outputs, aggregate, f"{task}/1")
    assert not np.array_equal(aggregate["1.weight"], initial["1.weight"])
    for seed, _ in plans:
        reverted = np.load(tmp_path / f"d{seed}-reverted.npz")
        assert sorted(reverted) == sorted(initial)
        for name, values in initial.items():
            assert reverted[name].tobytes() == values.tobytes(), name


def kill_one_mid_round(coordinator, tmp_path, task, survivor_plans, victim_plan, options):
    """Runs Engine devices with `options` in the task's round and kills the victim (SIGKILL) once
    its local steps have begun; the survivors' outputs by device id, and the round's entry."""
    survivors = start_devices(coordinator, tmp_path, survivor_plans, "supervised", options=options)
    (victim,) = start_devices(coordinator, tmp_path, [victim_plan], "supervised",
                              options=dict(options, stall=True)).values()
    try:
        wait_for("the victim to be training", (tmp_path / f"d{victim_plan[0]}.training").exists, 30)
        victim.kill()
        assert victim.wait() == -signal.SIGKILL
        outputs = device_outputs(tmp_path, survivors)
    finally:
        for process in [victim, *survivors.values()]:
            if process.poll() is None:
                process.kill()
                process.wait()
    (entry,) = closed_rounds(coordinator, task, 1, 30)
    assert entry["contributors"] == sorted(outputs) and len(entry["missing"]) == 1, entry
    return outputs, entry


def test_a_device_killed_mid_round_leaves_the_survivors_holding_their_weighted_average(coordinator, tmp_path):
    initial = {name: tensor.numpy() for name, tensor in tiny_model().state_dict().items()}
    task = create_fedavg_task(coordinator, tmp_path, initial, rounds=1, per_round=3, min_updates=2,
                              min_available=3, timeout_ms=8000)
    outputs, entry = kill_one_mid_round(coordinator, tmp_path, task, [(21, 8), (22, 24)], (23, 16), {"apply": True})
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    _, aggregate = fetch_model(coordinator, tmp_path, entry["output_model_version"])
    weights = {device: output["report"]["weight"] for device, output in outputs.items()}
    assert sorted(weights.values()) == [24, 72]
    assert_fedavg_bits(aggregate, outputs, weights)
    assert_holds_the_aggregate(outputs, aggregate, entry["output_model_version"])


@pytest.mark.slow  # waits out the abandoned round's deadline (6 s) and grace (1 s)
def test_a_round_abandoned_for_a_killed_device_leaves_the_survivors_their_own_training(coordinator, tmp_path):
    initial = {name: tensor.numpy() for name, tensor in tiny_model().state_dict().items()}
    task = create_fedavg_task(coordinator, tmp_path, initial, rounds=1, per_round=3, min_updates=3,
                              min_available=3, timeout_ms=6000)
    outputs, entry = kill_one_mid_round(coordinator, tmp_path, task, [(24, 8), (25, 24)], (26, 16),
                                        {"apply": True, "grace": 1.0})
    assert entry["state"] == "ROUND_STATE_FAILED" and entry["output_model_version"] == "", entry
    for output in outputs.values():
        report = output["report"]
        assert report["contributed"] and not report["aggregate_applied"] and report["aggregate_version"] is None
        assert f"stored no aggregate ({task}/1) by its deadline and 1.0 s after" in report["error"], report
        for name, values in output["final"].items():
            assert values.tobytes() == output["trained"][name].tobytes(), name


PUBLISH_SCRIPT = r'''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_engine import tiny_model, synthetic_batches, floating_state
from torchnative import adapt
from torchnative.device import Device
from torchnative.nn import federated
server, key, out, seed, weight, via = sys.argv[2:8]
model = adapt.wrap(tiny_model(), method=adapt.Tent(), lr=0.05)
model.online()
for inputs, _ in synthetic_batches(int(seed), 3, 16):
    model(inputs)
model.offline()
np.savez(out + ".npz", **floating_state(model))
if via == "engine":
    engine = federated.Engine(model, method=adapt.Tent(), coordinator=server, key=key, check_in_wait=2.0)
    report, device = model.delta.publish(engine, int(weight)), engine.device
else:
    device = Device(server, key, check_in_wait=2.0)
    report = model.delta.publish(device, int(weight))
print(json.dumps({"device_id": device.device_id, "contributed": report.contributed, "error": report.error}))
'''


def test_published_tent_deltas_are_averaged_by_their_weights(coordinator, tmp_path):
    initial = {name: tensor.numpy() for name, tensor in tiny_model().state_dict().items()}
    task = create_fedavg_task(coordinator, tmp_path, initial, rounds=1, per_round=2, min_updates=2,
                              min_available=2, timeout_ms=20000)
    plans = {31: (10, "device"), 32: (30, "engine")}  # seed: weight, what publish is given
    processes = {seed: subprocess.Popen([PYTHON, "-c", PUBLISH_SCRIPT, str(HERE), f"127.0.0.1:{coordinator['grpc_port']}",
                                         str(tmp_path / f"p{seed}.key"), str(tmp_path / f"p{seed}"), str(seed),
                                         str(weight), via], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for seed, (weight, via) in plans.items()}
    outputs, weights = {}, {}
    for seed, process in processes.items():
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        output = json.loads(out)
        assert output["contributed"] and output["error"] == "", output
        outputs[output["device_id"]] = {"trained": dict(np.load(tmp_path / f"p{seed}.npz"))}
        weights[output["device_id"]] = plans[seed][0]
    (entry,) = closed_rounds(coordinator, task, 1, 30)
    assert entry["state"] == "ROUND_STATE_COMPLETED" and entry["contributors"] == sorted(outputs), entry
    _, aggregate = fetch_model(coordinator, tmp_path, entry["output_model_version"])
    assert_fedavg_bits(aggregate, outputs, weights)
    assert not np.array_equal(aggregate["1.weight"], initial["1.weight"])


class OneRound:
    """A stand-in for torchnative.device.Device whose one round trains from `state`."""

    def __init__(self, state):
        self.state = state

    def participate_once(self, train):
        return train(self.state, {"round_id": 4, "task_id": "t"})


def test_publish_contributes_the_adapted_tensors_of_its_base_and_refuses_another_base():
    model = adapt.wrap(tiny_model(), method=adapt.Tent(), lr=0.05)
    base = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    model.online()
    model(synthetic_batches(1, 1, 16)[0][0])
    state, examples = model.delta.publish(OneRound(base), 16)
    assert examples == 16 and list(state) == list(base)
    for name, tensor in state.items():
        expected = model.state_dict()[name] if name in model.delta.names else base[name]
        assert torch.equal(tensor, expected), name
    assert not torch.equal(state["1.weight"], base["1.weight"])
    other = dict(base, **{"0.weight": base["0.weight"] + 1})
    with pytest.raises(BaseMismatch, match="round 4 of task 't' trains from a model that is not this delta's base"):
        model.delta.publish(OneRound(other), 16)
    with pytest.raises(ValueError, match="whole number of examples"):
        model.delta.publish(OneRound(base), 2.5)


def test_the_next_round_starts_from_the_aggregate(coordinator, tmp_path):
    plans = [(6, 8), (7, 24)]
    initial = {name: tensor.numpy() for name, tensor in tiny_model().state_dict().items()}
    task = create_fedavg_task(coordinator, tmp_path, initial, rounds=2, per_round=2, min_updates=2,
                              min_available=2, timeout_ms=20000)
    outputs = run_devices(coordinator, tmp_path, plans, "supervised", rounds=2)
    first, second = closed_rounds(coordinator, task, 2, 30)
    assert second["state"] == "ROUND_STATE_COMPLETED" and second["input_model_version"] == first["output_model_version"]
    _, aggregate = fetch_model(coordinator, tmp_path, first["output_model_version"])
    model = tiny_model()
    model.load_state_dict({name: torch.from_numpy(values.copy()) for name, values in aggregate.items()})
    sizes = dict(plans)
    for output in outputs.values():
        report = output["reports"][1]
        assert report["contributed"] and report["model_version"] == first["output_model_version"], report
        # The loss the device measured before its second round's steps is the first aggregate's
        # on its batches, to the bit: the model it trained from was the aggregate.
        batches = synthetic_batches(output["seed"], 3, sizes[output["seed"]])
        assert report["metrics"]["loss_before"] == federated.Engine(model).mean_loss(batches), report


def test_a_round_whose_task_names_another_strategy_is_refused_by_name():
    fedavg_engine = federated.FedAvg()
    federated.check_aggregator(fedavg_engine, {"round_id": 1, "task_id": "t"})  # not told: the task decides
    federated.check_aggregator(fedavg_engine, {"strategy": "fedavg"})
    for config, named in [({"strategy": "krum", "round_id": 3, "task_id": "t"}, 'aggregates with krum'),
                          ({"proximal_mu": 0.1}, 'fedprox (from the client-side parameter "proximal_mu")')]:
        with pytest.raises(federated.AggregatorMismatch, match=re.escape(named)):
            federated.check_aggregator(fedavg_engine, config)


def test_save_initial_model_writes_the_state_dict_as_safetensors(tmp_path):
    model = tiny_model()
    federated.save_initial_model(model, tmp_path / "model.safetensors")
    saved = read_safetensors(tmp_path / "model.safetensors")
    state = model.state_dict()
    assert list(saved) == list(state)
    for name, values in saved.items():
        assert values.dtype == state[name].numpy().dtype and values.tobytes() == state[name].numpy().tobytes(), name


def test_an_engine_refuses_a_fedprox_round_before_training(coordinator, tmp_path):
    # FedProx tells its devices proximal_mu: the task's strategy is visible, and not FedAvg.
    federated.save_initial_model(tiny_model(), tmp_path / "initial.safetensors")
    task = admin_json(coordinator, "create-task", "--strategy", "fedprox", "--params", '{"proximal_mu": 0.01}',
                      "--rounds", "1", "--devices-per-round", "1", "--min-updates", "1", "--min-available", "1",
                      "--round-timeout-ms", "20000", "--model", str(tmp_path / "initial.safetensors"))["task_id"]
    result = subprocess.run(device_command(coordinator, tmp_path, 1, 8, "supervised", 1),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert (f"AggregatorMismatch: round 1 of task '{task}' aggregates with fedprox (from the client-side "
            'parameter "proximal_mu"), but this Engine\'s aggregator is FedAvg()') in result.stderr, result.stderr


PEER_SCRIPT = r'''
import json, sys, dataclasses
from datetime import timedelta
import numpy as np
import torch.distributed as dist
sys.path.insert(0, sys.argv[1])
from test_engine import MODELS, engine_options, alone, floating_state, ties
from torchnative.nn import federated
rendezvous, out, rank, world, batch_size = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
build, make_batches = MODELS[sys.argv[7]]
dist.init_process_group(backend="local", init_method=rendezvous, rank=rank, world_size=world,
                        timeout=timedelta(seconds=30))
model, batches = build(), make_batches(10 + rank, 2, batch_size)
np.savez(f"{out}/trained{rank}.npz", **alone(model, "supervised", batches))
try:
    report = federated.Engine(model, **engine_options("supervised")).participate(batches)
except federated.CohortOfOne as refused:
    untrained = all((floating_state(model)[name] == values).all() for name, values in floating_state(build()).items())
    print(json.dumps({"refused": str(refused), "untrained": bool(untrained)}))
    sys.exit(0)
np.savez(f"{out}/averaged{rank}.npz", **floating_state(model))
print(json.dumps(dict(dataclasses.asdict(report), ties=ties(model))))
'''


def run_peers(tmp_path, sizes, model="tiny"):
    """One peer process per batch size, world len(sizes), each training MODELS[model]; their
    printed JSON by rank."""
    rendezvous = f"file://{tmp_path / 'rendezvous'}"
    processes = [subprocess.Popen([PYTHON, "-c", PEER_SCRIPT, str(HERE), rendezvous, str(tmp_path), str(rank),
                                   str(len(sizes)), str(size), model], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for rank, size in enumerate(sizes)]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        outputs.append(json.loads(out))
    return outputs


@pytest.mark.parametrize("model", ["tiny", "tied"])
def test_peers_average_over_torch_distributed_is_the_central_weighted_average(tmp_path, model):
    sizes = [4, 12, 20]  # two batches each: weights 8, 24, 40
    reports = run_peers(tmp_path, sizes, model)
    trained = {rank: {"trained": dict(np.load(tmp_path / f"trained{rank}.npz"))} for rank in range(len(sizes))}
    weights = {rank: 2 * size for rank, size in enumerate(sizes)}
    for rank, report in enumerate(reports):
        assert report["contributors"] == [0, 1, 2] and report["aggregate_applied"], report
        assert (report["weight"], report["total_weight"]) == (weights[rank], sum(weights.values()))
        assert report["metrics"]["loss_after"] < report["metrics"]["loss_before"], report
        assert report["ties"] == ties(MODELS[model][0]()), report  # {"2.weight": "0.weight"} for "tied"
        assert_fedavg_bits(dict(np.load(tmp_path / f"averaged{rank}.npz")), trained, weights)


def test_a_peer_cohort_of_one_is_refused_by_name(tmp_path):
    (output,) = run_peers(tmp_path, [8])
    assert "a peer average over a world of 1 process" in output["refused"], output
    assert "FedAvg needs at least two peers" in output["refused"], output
    assert output["untrained"], "the model was trained before the cohort was refused"


def test_a_tied_models_round_keeps_the_tie_in_the_coordinators_table_and_on_every_device(coordinator, tmp_path):
    plans = [(16, 8), (17, 24)]
    initial, outputs, aggregate = one_round(coordinator, tmp_path, plans, "supervised", {"model": "tied", "apply": True})
    # The coordinator's table is state_dict's (model_files saves it as it is): the tied weight under
    # both names, the contributions alike under both, so their averages have the same bytes.
    assert list(aggregate) == list(initial) == ["0.weight", "1.weight", "1.bias", "2.weight"]
    assert aggregate["2.weight"].tobytes() == aggregate["0.weight"].tobytes()
    assert not np.array_equal(aggregate["0.weight"], initial["0.weight"])
    weights = {device: output["report"]["weight"] for device, output in outputs.items()}
    assert_fedavg_bits(aggregate, outputs, weights)
    task = next(iter(outputs.values()))["report"]["task_id"]
    assert_holds_the_aggregate(outputs, aggregate, f"{task}/1")
    for output in outputs.values():
        assert output["ties"] == {"2.weight": "0.weight"}, output  # still one tensor after the aggregate
        assert output["report"]["metrics"]["loss_after"] < output["report"]["metrics"]["loss_before"]


class StubDevice:
    """A stand-in for torchnative.device.Device in an Engine: its one round trains from `state`,
    and the aggregate it then serves is aggregate_of(the trained state)."""

    def __init__(self, state, aggregate_of):
        self.state, self.aggregate_of, self.trained = state, aggregate_of, None

    def participate_once(self, train):
        config = {"round_id": 1, "task_id": "t", "model_version": 0, "deadline_unix_ms": time.time() * 1000}
        trained, _ = train(self.state, config)
        self.trained = {name: tensor.clone() for name, tensor in trained.items()}  # as the client copies it out
        return types.SimpleNamespace(contributed=True, error="", round_id=1, task_id="t")

    def fetch_model(self, version, wait):
        return self.aggregate_of(self.trained)


def test_an_engine_measures_a_tied_weight_once_and_refuses_an_aggregate_that_unties_it():
    model = tied_lm()
    initial = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    engine = federated.Engine(model, lr=0.1)
    assert engine.trained_names() == ["0.weight", "1.weight", "1.bias"]
    engine.device = StubDevice(initial, lambda trained: {name: tensor + 1 for name, tensor in trained.items()})
    report = engine.participate(token_batches(1, 3, 8), apply_aggregate=True)
    trained = engine.device.trained
    assert list(trained) == list(initial) and torch.equal(trained["2.weight"], trained["0.weight"])
    assert report.bytes_sent == report.bytes_received == sum(t.numel() * 4 for t in initial.values())
    moved = sum((trained[name] - initial[name]).double().pow(2).sum().item() for name in engine.trained_names())
    assert report.delta_norm == pytest.approx(moved ** 0.5, rel=1e-12)  # the tied weight counted once
    assert report.aggregate_applied and model[2].weight is model[0].weight
    assert torch.equal(model[0].weight, trained["0.weight"] + 1)

    engine.device = StubDevice(initial, lambda trained: dict(trained, **{"2.weight": trained["2.weight"] + 1}))
    with pytest.raises(TiedMismatch, match="'0.weight' and '2.weight' are one tied tensor of the model"):
        engine.participate(token_batches(1, 3, 8), apply_aggregate=True)
    assert model[2].weight is model[0].weight


def test_publish_of_a_tied_models_tent_delta_sends_its_base_under_both_names():
    model = adapt.wrap(tied_lm(), method=adapt.Tent(), lr=0.5)
    base = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    model.online()
    model(token_batches(1, 1, 16)[0][0])
    state, examples = model.delta.publish(OneRound(base), 16)
    assert list(state) == list(base)
    assert sorted(name for name in state if not torch.equal(state[name], base[name])) == ["1.bias", "1.weight"]
    untied = dict(base, **{"2.weight": base["2.weight"] + 1})
    with pytest.raises(BaseMismatch, match="trains from a model that is not this delta's base"):
        model.delta.publish(OneRound(untied), 16)
