"""A coordinator and five devices, as real processes on loopback, run rounds of the robust
strategies (fedmedian, trimmed_mean, multi_krum) through the hub's data plane, or with two of
the five taking part over gRPC alone (FetchModel, SubmitUpdate).

The test recomputes every round's model on its own with numpy, from what each device reports it
trained: the coordinate-wise median, the trimmed mean, Multi-Krum's selection and mean, each in
float64 and rounded once to float32, and requires the stored model versions to have exactly
those bits. Example counts play no part in any of them.
"""
import json
import subprocess

import numpy as np
import pytest

from federation import (admin_json, log_events, read_safetensors, run_device_rounds, start_coordinator,
                        write_safetensors)

DEVICES = 5
ROUNDS = 2
FLOATING = ("weight", "bias")


def in_order(*terms):
    """terms[0] + terms[1] + ... left to right, each addition rounded in float64."""
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def median(stacked):
    # An odd number of devices: the middle value, exactly.
    return np.sort(stacked, axis=0)[len(stacked) // 2]


def trimmed_mean(stacked, beta):
    cut = int(np.floor(beta * len(stacked)))
    kept = np.sort(stacked, axis=0)[cut:len(stacked) - cut]
    return in_order(*kept) / np.float64(len(kept))


def multi_krum(stacked_by_tensor, f, m):
    """stacked_by_tensor: {name: [device][element]}; returns {name: mean of the kept devices}."""
    n = len(next(iter(stacked_by_tensor.values())))
    whole = np.concatenate([stacked_by_tensor[name] for name in FLOATING], axis=1)
    distance = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            # Summed over every coordinate in model order, one addition at a time, as the
            # strategy does (np.sum would sum pairwise).
            distance[a, b] = np.cumsum((whole[a] - whole[b]) ** 2)[-1]
    scores = []
    for a in range(n):
        neighbours = sorted(distance[a, b] for b in range(n) if b != a)
        scores.append(in_order(np.float64(0), *neighbours[:n - f - 2]))
    kept = sorted(np.argsort(np.array(scores), kind="stable")[:m])  # ties: the lower device id
    return {name: in_order(*(stacked_by_tensor[name][i] for i in kept)) / np.float64(m)
            for name in FLOATING}


STRATEGIES = {
    "fedmedian": ({}, lambda stacked: {name: median(stacked[name]) for name in FLOATING}),
    "trimmed_mean": ({"beta": 0.2}, lambda stacked: {name: trimmed_mean(stacked[name], 0.2) for name in FLOATING}),
    "multi_krum": ({"f": 1, "m": 3}, lambda stacked: multi_krum(stacked, 1, 3)),
}


@pytest.fixture(params=["in_memory", "spooled"])
def hub(request, tmp_path):
    """A coordinator whose hub keeps the contributions in memory, or spools every one to disk
    (a one-byte budget), so that both ways of reading them back are exercised."""
    spooled = request.param == "spooled"
    for coordinator in start_coordinator(tmp_path, spool_bytes=1 if spooled else None):
        coordinator["spooled"] = spooled
        yield coordinator


@pytest.mark.parametrize("grpc_devices", [0, 2])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_robust_rounds_have_the_bits_of_an_independent_reference(hub, tmp_path, strategy, grpc_devices):
    coordinator = hub
    params, reference = STRATEGIES[strategy]
    rng = np.random.default_rng(2027)
    initial = {"weight": rng.standard_normal((4, 3)).astype(np.float32),
               "bias": rng.standard_normal(3).astype(np.float32),
               "batches_seen": np.array([41], dtype=np.int64)}
    write_safetensors(tmp_path / "initial.safetensors", initial)
    task = admin_json(coordinator, "create-task", "--strategy", strategy, "--params", json.dumps(params),
                      "--rounds", str(ROUNDS), "--devices-per-round", str(DEVICES), "--min-updates", str(DEVICES),
                      "--min-available", str(DEVICES), "--round-timeout-ms", "20000",
                      "--model", str(tmp_path / "initial.safetensors"))["task_id"]

    reports = tmp_path / "reports"
    rounds = run_device_rounds(coordinator, tmp_path, task, DEVICES, ROUNDS, grpc_devices)

    registered = sorted(device["device_id"] for device in admin_json(coordinator, "devices"))
    assert len(registered) == DEVICES
    assert [r["round_id"] for r in rounds] == list(range(1, ROUNDS + 1)), rounds
    previous = initial
    for version, entry in enumerate(rounds, start=1):
        assert entry["contributors"] == registered and entry["missing"] == [], entry
        assert entry["output_model_version"] == f"{task}/{version}"
        stacked = {}
        for name in FLOATING:
            rows = []
            for device in registered:  # device-id order, as the hub's ascending ranks
                report = json.loads((reports / f"{device}-round{entry['round_id']}.json").read_text())
                assert report["contributed"] and report["error"] == "", report
                rows.append(np.array(report["tensors"][name]["values"], dtype=np.float64))
            stacked[name] = np.stack(rows)
        expected = {name: values.astype(np.float32).reshape(initial[name].shape)
                    for name, values in reference(stacked).items()}

        fetched_path = tmp_path / f"version{version}.safetensors"
        admin_json(coordinator, "fetch-model", entry["output_model_version"], "--out", str(fetched_path))
        model = read_safetensors(fetched_path)
        assert list(model) == ["weight", "bias", "batches_seen"]
        for name in FLOATING:
            assert model[name].dtype == np.float32 and model[name].shape == initial[name].shape
            assert np.array_equal(model[name].view(np.uint32), expected[name].view(np.uint32)), (
                f"{strategy} round {entry['round_id']} tensor {name}: stored {model[name]} != "
                f"recomputed {expected[name]}")
            assert not np.array_equal(model[name], previous[name])  # the round did move the model
        assert model["batches_seen"].tolist() == [41]
        previous = model

    data_planes = [entry for entry in map(json.loads, coordinator["log"].read_text().splitlines())
                   if entry["event"] == "round_data_plane"]
    assert len(data_planes) == ROUNDS
    # Each contribution is the 15 floating values, the example count and the values tag, in float64.
    assert all(entry["bytes_reduced"] == DEVICES * 17 * 8 for entry in data_planes), data_planes
    assert all(entry["grpc_devices"] == grpc_devices for entry in data_planes), data_planes
    assert all((entry["spooled_bytes"] > 0) == coordinator["spooled"] for entry in data_planes), data_planes
    # The gRPC devices' contributions go through the same budget, to a spool file of their own.
    assert all((entry.get("grpc_spooled_bytes", 0) > 0) == (coordinator["spooled"] and grpc_devices > 0)
               for entry in data_planes), data_planes
    received = log_events(coordinator["log"], "update_received")
    assert [entry["transport"] for entry in received].count("grpc") == ROUNDS * grpc_devices


def test_krum_below_its_minimum_of_updates_is_refused_at_create_task(coordinator, tmp_path):
    write_safetensors(tmp_path / "model.safetensors", {"weight": np.ones((2, 2), dtype=np.float32)})
    result = subprocess.run(
        coordinator["admin"] + ["create-task", "--strategy", "krum", "--params", '{"f": 1}', "--rounds", "1",
                                "--devices-per-round", "4", "--min-updates", "4", "--round-timeout-ms", "1000",
                                "--model", str(tmp_path / "model.safetensors")],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "status 3" in result.stderr, result.stderr
    assert "min_updates 4 is below the 5 that krum needs" in result.stderr, result.stderr
