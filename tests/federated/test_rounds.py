"""A coordinator and five devices, as real processes on loopback, run three rounds of FedAvg: all
on the data plane, two of them over gRPC alone (FetchModel, SubmitUpdate), or all five over gRPC.

The test recomputes every round's weighted average on its own, from what each device reports it
trained (float64 products and sums in device-id order, rounded once to float32), and requires
the model versions the coordinator stored to have exactly those bits.
"""
import json
import signal
import subprocess
import threading

import numpy as np
import pytest

from federation import (admin_json, fedavg, http_get, read_safetensors, run_device_rounds, tool, wait_for,
                        write_safetensors)

DEVICES = 5
ROUNDS = 3


@pytest.mark.parametrize("grpc_devices", [0, 2, DEVICES])
def test_three_fedavg_rounds_have_the_bits_of_an_independent_average(coordinator, tmp_path, grpc_devices):
    rng = np.random.default_rng(2026)
    initial = {"weight": rng.standard_normal((4, 3)).astype(np.float32),
               "bias": rng.standard_normal(3).astype(np.float32),
               "batches_seen": np.array([41], dtype=np.int64)}
    write_safetensors(tmp_path / "initial.safetensors", initial)
    created = admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", str(ROUNDS),
                         "--devices-per-round", str(DEVICES), "--min-updates", str(DEVICES),
                         "--min-available", str(DEVICES), "--round-timeout-ms", "20000",
                         "--model", str(tmp_path / "initial.safetensors"))
    task = created["task_id"]
    assert created["initial_model_version"] == f"{task}/0"

    reports = tmp_path / "reports"
    rounds = run_device_rounds(coordinator, tmp_path, task, DEVICES, ROUNDS, grpc_devices)

    registered = sorted(device["device_id"] for device in admin_json(coordinator, "devices"))
    assert len(registered) == DEVICES
    assert [r["round_id"] for r in rounds] == list(range(1, ROUNDS + 1)), rounds
    previous = initial
    for version, entry in enumerate(rounds, start=1):
        assert entry["selected"] == registered and entry["contributors"] == registered, entry
        assert entry["missing"] == []
        assert entry["input_model_version"] == f"{task}/{version - 1}"
        assert entry["output_model_version"] == f"{task}/{version}"

        trained = {}
        for device in registered:
            report = json.loads((reports / f"{device}-round{entry['round_id']}.json").read_text())
            assert report["contributed"] and report["error"] == "", report
            assert report["task_id"] == task and report["round_id"] == entry["round_id"]
            trained[device] = report
        expected = {  # registered is in device-id order, as the hub's ascending ranks
            name: fedavg((trained[device]["num_examples"], trained[device]["tensors"][name]["values"])
                         for device in registered).reshape(initial[name].shape)
            for name in ("weight", "bias")}

        fetched_path = tmp_path / f"version{version}.safetensors"
        fetched = admin_json(coordinator, "fetch-model", entry["output_model_version"], "--out", str(fetched_path))
        assert fetched["model_version"] == entry["output_model_version"]
        model = read_safetensors(fetched_path)
        assert list(model) == ["weight", "bias", "batches_seen"]
        for name in ("weight", "bias"):
            assert model[name].dtype == np.float32 and model[name].shape == initial[name].shape
            assert np.array_equal(model[name].view(np.uint32), expected[name].view(np.uint32)), (
                f"round {entry['round_id']} tensor {name}: stored {model[name]} != recomputed {expected[name]}")
            assert not np.array_equal(model[name], previous[name])  # the round did move the model
        # Integer tensors are not averaged: the global's value stays, whatever devices sent.
        assert model["batches_seen"].tolist() == [41]
        assert all(trained[d]["tensors"]["batches_seen"]["values"] == [42] for d in registered)
        previous = model

    status, health = http_get(coordinator, "/healthz")
    assert (status, health) == (200, "ok\n")
    _, metrics = http_get(coordinator, "/metrics")
    assert f'torchnative_rounds_total{{outcome="completed"}} {ROUNDS}' in metrics
    assert 'torchnative_rounds_total{outcome="abandoned"} 0' in metrics
    assert f"torchnative_devices_registered {DEVICES}" in metrics

    process = coordinator["process"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0
    events = [json.loads(line)["event"] for line in coordinator["log"].read_text().splitlines()]
    assert events.count("round_completed") == ROUNDS and events[-1] == "stopped"
    assert events.count("update_received") == ROUNDS * DEVICES  # over gRPC and the data plane alike


def test_bad_requests_are_refused_by_name_and_the_daemon_stays_up(coordinator, tmp_path):
    stranger = subprocess.run(
        [tool("torchnative-admin"), "--server", f"127.0.0.1:{coordinator['grpc_port']}",
         "--key", str(tmp_path / "stranger.key"), "devices"], capture_output=True, text=True, timeout=60)
    assert stranger.returncode == 1
    assert "status 16" in stranger.stderr and "is not a configured administrator key" in stranger.stderr

    write_safetensors(tmp_path / "model.safetensors", {"weight": np.ones((2, 2), dtype=np.float32)})
    common = ["create-task", "--rounds", "1", "--round-timeout-ms", "1000", "--model", str(tmp_path / "model.safetensors")]
    refusals = {
        "min_updates 3 is below the 5 that krum needs":
            ["--strategy", "krum", "--params", '{"f": 1}', "--devices-per-round", "3", "--min-updates", "3"],
        "min_updates 4 exceeds selection.devices_per_round 3":
            ["--strategy", "fedavg", "--devices-per-round", "3", "--min-updates", "4"],
        "unknown parameter":
            ["--strategy", "fedavg", "--devices-per-round", "3", "--min-updates", "3", "--params", '{"momentum": 1}'],
    }
    for message, arguments in refusals.items():
        result = subprocess.run(coordinator["admin"] + common + arguments, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and "status 3" in result.stderr and message in result.stderr, result.stderr

    assert http_get(coordinator, "/healthz") == (200, "ok\n")
    _, metrics = http_get(coordinator, "/metrics")
    assert 'torchnative_requests_refused_total{reason="unknown_admin_key"} 1' in metrics
    assert admin_json(coordinator, "devices") == []


def test_unknown_configuration_keys_are_refused_by_name(tmp_path):
    config = tmp_path / "coordinator.json"
    config.write_text(json.dumps({"state_directory": str(tmp_path / "state"), "admin_public_keys": ["00" * 32],
                                  "check_in_wait_ms": 1000}))
    result = subprocess.run([tool("torchnative-coordinator"), "--config", str(config)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "unknown configuration key 'check_in_wait_ms'" in result.stderr
    # A spool directory that does not exist is refused at start, not at the first round that spools.
    config.write_text(json.dumps({"state_directory": str(tmp_path / "state"), "admin_public_keys": ["00" * 32],
                                  "data_plane": {"spool_directory": str(tmp_path / "absent")}}))
    result = subprocess.run([tool("torchnative-coordinator"), "--config", str(config)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert f"data_plane.spool_directory: '{tmp_path / 'absent'}' is not a directory" in result.stderr
    config.write_text(json.dumps({"state_directory": str(tmp_path / "state"), "admin_public_keys": ["00" * 32],
                                  "data_plane": {"enabled": "no"}}))
    result = subprocess.run([tool("torchnative-coordinator"), "--config", str(config)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "'data_plane.enabled' must be true or false, not \"no\"" in result.stderr



def test_a_device_refuses_a_round_whose_model_is_above_its_limit_by_name(coordinator, tmp_path):
    # 12 + 3 float32 values and one int64: 68 bytes of tensors, above the device's limit of 64.
    write_safetensors(tmp_path / "initial.safetensors",
                      {"weight": np.zeros((4, 3), dtype=np.float32), "bias": np.zeros(3, dtype=np.float32),
                       "batches_seen": np.array([0], dtype=np.int64)})
    admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", "1", "--devices-per-round", "1",
               "--min-updates", "1", "--min-available", "1", "--round-timeout-ms", "20000",
               "--model", str(tmp_path / "initial.safetensors"))
    device = subprocess.Popen(
        [tool("torchnative-device"), "--server", f"127.0.0.1:{coordinator['grpc_port']}",
         "--key-dir", str(tmp_path / "keys"), "--check-in-wait-ms", "2000", "--max-model-bytes", "64"],
        stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(device.stderr), daemon=True)
    reader.start()
    refusal = "announces a model of 68 bytes, above this device's limit of 64"
    try:
        wait_for("the device's refusal", lambda: any(refusal in line for line in list(lines)) or None, 30)
    finally:
        device.kill()
        device.wait()
        reader.join(timeout=5)
    report = json.loads(next(line for line in lines if refusal in line))
    assert report["contributed"] is False and report["round"] == 1, report
