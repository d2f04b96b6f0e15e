"""Devices written in Python (torchnative.device on the shim's torch) take part in a FedAvg round.
One of them trains to NaN: its client refuses to send the update (the check the hub applies too),
and the round completes over the others with their exact weights, the poisoned one missing.
A Python device's max_model_bytes, like torchnative-device's --max-model-bytes, refuses a round
whose model is larger, by name; its noise floor is checked as torchnative-device's. Ctrl-C stops a
Python device that waits for work."""
import json
import signal
import subprocess
import time

import numpy as np
import pytest

from federation import (CLOSED_ROUND_STATES, PYTHON, admin_json, communicate_within, fedavg, read_safetensors, wait_for,
                        write_safetensors)

DEVICE_SCRIPT = r'''
import json, sys, torch
from torchnative.device import Device
server, key_file, shift, examples, poison = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
device = Device(server, key_file, check_in_wait=2.0)
seen = {}
def train(state, config):
    assert all(isinstance(t, torch.Tensor) for t in state.values())
    trained = {name: (t + shift if t.dtype == torch.float32 else t.clone()) for name, t in state.items()}
    if poison:
        trained["weight"][1, 2] = float("nan")
    seen.update({name: t.tolist() for name, t in trained.items()})
    return trained, examples
reports = device.run(train, rounds=1)
print(json.dumps({"device_id": device.device_id, "contributed": reports[0].contributed,
                  "error": reports[0].error, "trained": seen}))
'''


def test_python_devices_and_a_poisoned_update(coordinator, tmp_path):
    initial = {"weight": np.arange(6, dtype=np.float32).reshape(2, 3), "steps": np.array([7], dtype=np.int64)}
    write_safetensors(tmp_path / "initial.safetensors", initial)
    task = admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", "1",
                      "--devices-per-round", "3", "--min-updates", "2", "--min-available", "3",
                      "--round-timeout-ms", "20000", "--model", str(tmp_path / "initial.safetensors"))["task_id"]
    server = f"127.0.0.1:{coordinator['grpc_port']}"
    plans = [(0.5, 10, "0"), (-0.25, 30, "0"), (1.0, 5, "1")]  # shift, examples, poisoned
    devices = [subprocess.Popen([PYTHON, "-c", DEVICE_SCRIPT, server, str(tmp_path / f"python{i}.key"),
                                 str(shift), str(examples), poison], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for i, (shift, examples, poison) in enumerate(plans)]
    outputs = {}
    for process, plan in zip(devices, plans):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        outputs[plan] = json.loads(out)
    poisoned = outputs.pop(plans[2])
    assert not poisoned["contributed"], poisoned
    assert "tensor 'weight' element 5 (index [1, 2]) is NaN" in poisoned["error"], poisoned
    rounds = wait_for("the round to close", lambda: [r for r in admin_json(coordinator, "rounds", task)
                                                     if r["state"] in CLOSED_ROUND_STATES] or None, 30)
    entry = rounds[0]
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    honest = sorted(output["device_id"] for output in outputs.values())
    assert entry["contributors"] == honest and entry["missing"] == [poisoned["device_id"]], entry

    # FedAvg of the two honest devices, float64 in device-id order, rounded once.
    by_id = sorted(outputs.items(), key=lambda item: item[1]["device_id"])
    expected = fedavg((examples, output["trained"]["weight"]) for (_, examples, _), output in by_id)
    admin_json(coordinator, "fetch-model", entry["output_model_version"], "--out", str(tmp_path / "out.safetensors"))
    model = read_safetensors(tmp_path / "out.safetensors")
    assert np.array_equal(model["weight"].view(np.uint32), expected.view(np.uint32)), (model["weight"], expected)
    assert model["steps"].tolist() == [7]


LIMITED_DEVICE_SCRIPT = r'''
import json, sys
from torchnative.device import Device
server, key_file, limit = sys.argv[1], sys.argv[2], sys.argv[3]
limits = {} if limit == "default" else {"max_model_bytes": int(limit)}
device = Device(server, key_file, check_in_wait=2.0, **limits)
report = device.run(lambda state, config: (state, 1), rounds=1)[0]
print(json.dumps({"device_id": device.device_id, "round_id": report.round_id,
                  "contributed": report.contributed, "error": report.error}))
'''


@pytest.mark.slow
def test_a_python_device_refuses_a_model_above_its_max_model_bytes_and_accepts_it_by_default(
        coordinator, tmp_path):
    # 12 + 3 float32 values and one int64: 68 bytes of tensors, above a limit of 64.
    write_safetensors(tmp_path / "initial.safetensors",
                      {"weight": np.zeros((4, 3), dtype=np.float32), "bias": np.zeros(3, dtype=np.float32),
                       "batches_seen": np.array([0], dtype=np.int64)})
    # A selected device that does not join fails the attempt at the round's deadline (5 s), and the
    # retry goes to the device that checks in next.
    task = admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", "1",
                      "--devices-per-round", "1", "--min-updates", "1", "--min-available", "1",
                      "--round-timeout-ms", "5000", "--model", str(tmp_path / "initial.safetensors"))["task_id"]
    server = f"127.0.0.1:{coordinator['grpc_port']}"

    def device(key, limit):
        result = subprocess.run([PYTHON, "-c", LIMITED_DEVICE_SCRIPT, server, str(tmp_path / key), limit],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    limited = device("limited.key", "64")
    assert limited["round_id"] == 1 and limited["contributed"] is False, limited
    assert "announces a model of 68 bytes, above this device's limit of 64" in limited["error"], limited
    accepting = device("default.key", "default")
    assert accepting["round_id"] == 2 and accepting["contributed"] is True and accepting["error"] == "", accepting

    rounds = {entry["round_id"]: entry for entry in admin_json(coordinator, "rounds", task)}
    assert rounds[1]["state"] == "ROUND_STATE_FAILED" and rounds[1]["missing"] == [limited["device_id"]], rounds
    assert rounds[2]["contributors"] == [accepting["device_id"]], rounds


def test_a_python_device_refuses_a_max_model_bytes_that_is_not_positive(tmp_path):
    result = subprocess.run([PYTHON, "-c", LIMITED_DEVICE_SCRIPT, "127.0.0.1:1", str(tmp_path / "k.key"), "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "ValueError: torchnative._device: max_model_bytes must be positive, not 0" in result.stderr, result.stderr


NOISE_FLOORS_SCRIPT = r'''
import sys
from torchnative.device import Device
for floor in ({"min_noise_multiplier": 1.0}, {"max_noise_devices": 3}, {"min_noise_multiplier": -1.0, "max_noise_devices": 3},
              {"min_noise_multiplier": float("inf"), "max_noise_devices": 3}, {"min_noise_multiplier": 1.0, "max_noise_devices": 0},
              {"min_noise_multiplier": 1.0, "max_noise_devices": 2**32}):
    try:
        Device("127.0.0.1:1", sys.argv[1], **floor)
        print("accepted")
    except ValueError as error:
        print(error)
'''


def test_a_python_device_refuses_a_noise_floor_as_torchnative_device_does(tmp_path):
    """min_noise_multiplier and max_noise_devices, as --min-noise-multiplier and --max-noise-devices:
    both or neither, a positive finite multiplier, from 1 to 2^32 - 1 devices (the floor held in a
    round: test_secure_aggregation.py)."""
    result = subprocess.run([PYTHON, "-c", NOISE_FLOORS_SCRIPT, str(tmp_path / "k.key")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    prefix = "torchnative._device: "
    assert result.stdout.splitlines() == [
        prefix + "min_noise_multiplier and max_noise_devices make the noise floor together: give both"] * 2 + [
        prefix + "min_noise_multiplier must be positive and finite, not -1.0",
        prefix + "min_noise_multiplier must be positive and finite, not inf",
        prefix + "max_noise_devices must be from 1 to 4294967295, not 0",
        prefix + "max_noise_devices must be from 1 to 4294967295, not 4294967296"], result.stdout


WAITING_SCRIPT = r'''
import sys
from torchnative.device import Device
device = Device(sys.argv[1], sys.argv[2], check_in_wait=2.0)
print(device.device_id, flush=True)  # registered: the loop below only waits for work
device.run(lambda state, config: (state, 1), rounds=1)
'''


def test_ctrl_c_stops_a_python_device_waiting_for_work(coordinator, tmp_path):
    # No task, so the device checks in and waits; SIGINT must end run() with KeyboardInterrupt
    # promptly, not after a round that never comes.
    process = subprocess.Popen([PYTHON, "-c", WAITING_SCRIPT, f"127.0.0.1:{coordinator['grpc_port']}",
                                str(tmp_path / "waiting.key")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout.readline().startswith("dev-")
        time.sleep(0.5)  # inside run()
        interrupted_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = communicate_within(process, 30, "the Python device after SIGINT")
        stopped_after = time.monotonic() - interrupted_at
        code = process.returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == -signal.SIGINT and "KeyboardInterrupt" in err, (code, err)
    # One CheckIn may still be held (check_in_wait 2 s) before the loop sees the stop.
    assert stopped_after < 5, stopped_after
