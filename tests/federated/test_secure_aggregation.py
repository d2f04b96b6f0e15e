"""Secure aggregation as a task's round mode (docs/secure_aggregation.md), through the admin CLI, a
real coordinator and real device processes: the --secagg-* flags make
CreateTaskHeader.secure_aggregation, which the coordinator validates by name; a secure task's
rounds run SecAgg+'s five stages over SecAggStage calls, and the model each round stores has the
bits the test computes from the quantised updates the devices report (their sum, dequantised and
averaged as FedAvg averages: float64, rounded once to float32), each quantised update checked
against the update the device trained. A device killed while training, or after any stage, leaves
the round to the survivors, which complete it over their sum (with its input when it died after
masking); too few left at a stage abandon the attempt by name."""
import json
import math
import subprocess

import numpy as np

import pytest

from federation import (PYTHON, admin_json, closed_rounds, http_get, kill_all, launch_coordinator, log_events,
                        read_safetensors, rogue_device, start_coordinator, tool, wait_for, write_safetensors)

SECURE = ["--secagg-corrupt-fraction", "0.05", "--secagg-dropout-fraction", "0.1", "--secagg-clip-range", "0.5",
          "--secagg-max-weight", "100"]
DEVICES = 5
# The fixed point of the rounds below: updates clamped to +-CLIP (torchnative-device's default
# --step 0.01 moves values uniformly within +-0.0173, so some are clamped), example counts (1 to 97,
# drawn by each device) capped at MAX_WEIGHT, LEVELS steps per CLIP at weight 1 (up to 100 x 50 x
# 400,000 fits in 31 bits).
CLIP, MAX_WEIGHT, LEVELS = 0.01, 50, 400_000
INITIAL = {"weight": (np.arange(12, dtype=np.float32).reshape(4, 3) / 7).astype(np.float32),
           "bias": np.array([0.5, -0.25, 1.0], dtype=np.float32),
           "batches_seen": np.array([41], dtype=np.int64)}
FLOATING = ("weight", "bias")  # the layout's order: the table's floating tensors

# A Python device (torchnative.device) that touches DIRECTORY/LABEL-training when it trains and
# then sleeps, for a test to kill it there.
SLEEPING_DEVICE = r'''
import pathlib, sys, time
from torchnative.device import Device
server, key_file, marker = sys.argv[1:4]
device = Device(server, key_file, check_in_wait=1.0, round_transport="grpc")
def train(state, config):
    pathlib.Path(marker).touch()
    time.sleep(60)
    return state, 1
device.run(train, rounds=1)
'''


def create_task(coordinator, tmp_path, *extra, strategy="fedavg"):
    write_safetensors(tmp_path / "model.safetensors", {"weight": np.ones((2, 2), dtype=np.float32)})
    return subprocess.run(
        coordinator["admin"] + ["create-task", "--strategy", strategy, "--rounds", "2", "--devices-per-round", "5",
                                "--min-available", "5", "--min-updates", "3", "--round-timeout-ms", "1000",
                                "--model", str(tmp_path / "model.safetensors"), *extra],
        capture_output=True, text=True, timeout=60)


def create_secure_task(coordinator, tmp_path, rounds, devices=DEVICES, min_updates=3, dropout_fraction=0.33,
                       initial=INITIAL, bits=32, levels=LEVELS):
    write_safetensors(tmp_path / "initial.safetensors", initial)
    return admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", str(rounds),
                      "--devices-per-round", str(devices), "--min-available", str(devices), "--min-updates",
                      str(min_updates), "--round-timeout-ms", "20000", "--model", str(tmp_path / "initial.safetensors"),
                      "--secagg-corrupt-fraction", "0.05", "--secagg-dropout-fraction", str(dropout_fraction),
                      "--secagg-clip-range", str(CLIP), "--secagg-max-weight", str(MAX_WEIGHT), "--secagg-levels",
                      str(levels), "--secagg-bits", str(bits))["task_id"]


def device_command(coordinator, tmp_path, count, rounds, transport="grpc", keys="keys"):
    """torchnative-device's command line for `count` devices with their keys in tmp_path/KEYS,
    writing reports to tmp_path/reports, checking in with --round-transport TRANSPORT (grpc: every
    message by gRPC; data-plane: the model by the hub's broadcast, the masked input into its reduce)."""
    return [tool("torchnative-device"), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key-dir",
            str(tmp_path / keys), "--devices", str(count), "--rounds", str(rounds), "--report-dir",
            str(tmp_path / "reports"), "--check-in-wait-ms", "2000", "--round-transport", transport]


def start_devices(coordinator, tmp_path, count, rounds, transport="grpc", keys="keys"):
    """A torchnative-device process of `count` devices (device_command)."""
    return subprocess.Popen(device_command(coordinator, tmp_path, count, rounds, transport, keys),
                            stderr=subprocess.PIPE, text=True)


def registered_ids(log):
    """The ids a torchnative-device process's devices registered with (its stderr), sorted."""
    return sorted(json.loads(line)["device"] for line in log.splitlines() if '"registered_with"' in line)


def run_devices(coordinator, tmp_path, task, count, rounds=1, timeout=30, meanwhile=None, transport="grpc"):
    """A torchnative-device process of `count` devices (start_devices) until the task's first `rounds`
    rounds closed and the process ended, which must be with status 0; `meanwhile` is called once it
    started. Returns those rounds (ListRounds) and the ids the devices registered with, sorted. The
    process is killed however this ends."""
    devices = start_devices(coordinator, tmp_path, count, rounds, transport)
    try:
        if meanwhile:
            meanwhile()
        listed = closed_rounds(coordinator, task, rounds, timeout)
        _, log = devices.communicate(timeout=30)
        assert devices.returncode == 0, log
    finally:
        if devices.poll() is None:
            devices.kill()
            devices.wait()
    return listed, registered_ids(log)


def signed(words):
    """Words modulo 2^32 as the two's complement integers they encode."""
    words = np.asarray(words, dtype=np.int64)
    return np.where(words >= 2**31, words - 2**32, words)


def check_quantised(report, round_model):
    """The device's words: each within one step of its capped weight times its clamped update
    (trained minus the round's model, in float64) over the step, the last the capped weight."""
    words = signed(report["quantised"])
    weight = min(report["num_examples"], MAX_WEIGHT)
    assert words[-1] == weight, report["quantised"][-1]
    update = np.concatenate([np.asarray(report["tensors"][name]["values"], dtype=np.float32).astype(np.float64)
                             - round_model[name].astype(np.float64).ravel() for name in FLOATING])
    exact = weight * np.clip(update, -CLIP, CLIP) / (CLIP / LEVELS)
    assert words.size == update.size + 1
    assert np.all(np.abs(words[:-1] - exact) < 1 + 1e-6), np.max(np.abs(words[:-1] - exact))
    assert np.any(np.abs(update) > CLIP)  # some coordinates were clamped


def expected_model(round_model, quantised):
    """The round's model as the coordinator must aggregate the sum of these quantised updates:
    W·g + step·(the words summed, as integers), over W, rounded once to float32."""
    total = sum(signed(words) for words in quantised)
    weight, step = np.float64(total[-1]), np.float64(CLIP) / np.float64(LEVELS)
    expected, offset = {}, 0
    for name in FLOATING:
        g = round_model[name].astype(np.float64)
        summed = total[offset:offset + g.size].astype(np.float64).reshape(g.shape)
        expected[name] = ((weight * g + summed * step) / weight).astype(np.float32)
        offset += g.size
    return expected


def check_round(coordinator, tmp_path, entry, reporting, round_model, more_words=()):
    """The round's stored model against the quantised words of the `reporting` devices (their
    --report-dir files, each checked against its update) and `more_words`."""
    reports = [json.loads((tmp_path / "reports" / f"{device}-round{entry['round_id']}.json").read_text())
               for device in reporting]
    for report in reports:
        assert report["contributed"] and report["error"] == "", report
        check_quantised(report, round_model)
    quantised = [report["quantised"] for report in reports] + list(more_words)
    path = tmp_path / f"round{entry['round_id']}.safetensors"
    admin_json(coordinator, "fetch-model", entry["output_model_version"], "--out", str(path))
    model = read_safetensors(path)
    for name, expected in expected_model(round_model, quantised).items():
        assert model[name].dtype == np.float32
        assert np.array_equal(model[name].view(np.uint32), expected.view(np.uint32)), (
            f"round {entry['round_id']} tensor {name}: stored {model[name]} != recomputed {expected}")
        assert not np.array_equal(model[name], round_model[name])
    assert model["batches_seen"].tolist() == [41]  # integer tensors are not aggregated
    return model


def test_secure_rounds_store_the_bits_of_the_devices_quantised_updates_summed(coordinator, tmp_path):
    task = create_secure_task(coordinator, tmp_path, rounds=2)
    rounds, registered = run_devices(coordinator, tmp_path, task, DEVICES, rounds=2, timeout=60)
    assert registered == sorted(device["device_id"] for device in admin_json(coordinator, "devices"))
    round_model = INITIAL
    for entry in rounds:
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == registered and entry["missing"] == [], entry
        round_model = check_round(coordinator, tmp_path, entry, registered, round_model)


def test_a_masked_input_larger_than_a_message_goes_in_several(tmp_path):
    """transfer_limits.max_chunk_bytes 4096: masked inputs go in messages of 1024 words, so each
    device's 3041 words (a 50x60 weight, a 40-element bias, the weight word) take three SecAggStage
    calls, the first two answered at once; the coordinator takes no message above 8192 bytes, so
    the input in one message (12 KB) would be refused. The task is created before, with the default
    limits (the admin CLI sends the model in one message), and resumed by a coordinator restarted
    on the same state with the small ones. The stored model is bit for bit the devices' sum."""
    initial = {"weight": np.linspace(-1, 1, 3000, dtype=np.float32).reshape(50, 60),
               "bias": np.linspace(0, 2, 40, dtype=np.float32), "batches_seen": np.array([41], dtype=np.int64)}
    first = launch_coordinator(tmp_path, log_name="first.log")
    task = create_secure_task(first, tmp_path, rounds=1, initial=initial)
    first["process"].terminate()  # drains: the task stays running for the next start
    assert first["process"].wait(timeout=15) == 0
    coordinator_runs = start_coordinator(tmp_path, transfer_limits={"max_message_bytes": 8192,
                                                                     "max_chunk_bytes": 4096})
    coordinator = next(coordinator_runs)
    try:
        (entry,), registered = run_devices(coordinator, tmp_path, task, DEVICES)
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == registered and entry["missing"] == [], entry
        check_round(coordinator, tmp_path, entry, registered, initial)
    finally:
        next(coordinator_runs, None)


def test_a_device_killed_while_training_leaves_the_secure_round_to_the_others(tmp_path):
    coordinator_runs = start_coordinator(tmp_path, heartbeat_interval_ms=400)
    coordinator = next(coordinator_runs)
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    marker = tmp_path / "victim-training"
    victim = subprocess.Popen([PYTHON, "-c", SLEEPING_DEVICE, f"127.0.0.1:{coordinator['grpc_port']}",
                               str(tmp_path / "victim.key"), str(marker)], stderr=subprocess.PIPE, text=True)

    def kill_the_victim_in_training():
        wait_for("the victim to train", marker.exists, 30)
        victim.kill()  # SIGKILL, before it advertised its round keys
        victim.wait()
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1,
                                          meanwhile=kill_the_victim_in_training)
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == survivors and len(entry["missing"]) == 1, entry
        check_round(coordinator, tmp_path, entry, survivors, INITIAL)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        next(coordinator_runs, None)


@pytest.mark.parametrize("stage", ["advertise", "share", "mask", "sign"])
def test_a_device_killed_after_a_stage_leaves_the_round_to_complete_over_the_survivors(tmp_path, stage):
    """federated_rogue_device takes part honestly and SIGKILLs itself once its STAGE message is
    answered: gone after advertising or sharing, its input is not in the sum (its pairwise masks,
    after sharing, rebuilt from its neighbours' shares); gone after masking or signing, it is (its
    self mask rebuilt), and the round needs its words, which it printed first."""
    coordinator_runs = start_coordinator(tmp_path, heartbeat_interval_ms=400)
    coordinator = next(coordinator_runs)
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                              str(tmp_path / "rogue.key"), "secagg-quit-after", stage],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1)
        out, err = rogue.communicate(timeout=30)
        assert rogue.returncode == -9, err  # killed by its own SIGKILL at the stage
        printed = json.loads(out.splitlines()[0])
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        in_sum = stage in ("mask", "sign")
        assert entry["contributors"] == sorted(survivors + [printed["device_id"]] * in_sum), entry
        assert entry["missing"] == ([] if in_sum else [printed["device_id"]]), entry
        check_round(coordinator, tmp_path, entry, survivors, INITIAL, [printed["quantised"]] * in_sum)
    finally:
        if rogue.poll() is None:
            rogue.kill()
            rogue.wait()
        next(coordinator_runs, None)


def test_a_device_that_leaves_the_round_alive_is_given_up_without_waiting_for_the_stage_deadline(coordinator,
                                                                                              tmp_path):
    """federated_rogue_device secagg-leave-after share: after sharing its keys it checks in again,
    alive and heartbeating, as a device whose stage failed does; back in a CheckIn, it is given up at
    once, not at the masked input stage's deadline (round_timeout_ms 20 s, past this test's 15 s
    wait), and the round completes over the other four."""
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                              str(tmp_path / "rogue.key"), "secagg-leave-after", "share"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1, timeout=15)
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == survivors and len(entry["missing"]) == 1, entry
        assert rogue.poll() is None  # alive all along
        dropped = log_events(coordinator["log"], "device_dropped")
        assert [(d["device"], d["stage"]) for d in dropped] == [(entry["missing"][0], "masked input")], dropped
        check_round(coordinator, tmp_path, entry, survivors, INITIAL)
    finally:
        rogue.kill()
        rogue.wait()


def test_a_masked_input_one_word_too_long_is_refused_naming_the_device_and_left_out_of_the_sum(coordinator,
                                                                                             tmp_path):
    """federated_rogue_device secagg-long-input: honest until its masked input, whose last message
    carries a 17th word for the 16 the round's layout has. The coordinator refuses it by name
    (INVALID_ARGUMENT, and an update_refused event naming the device), leaves the device out as one
    that shared its keys and masked nothing (its pairwise masks rebuilt from its neighbours' shares),
    and the round completes over the other four, bit for bit."""
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                              str(tmp_path / "rogue.key"), "secagg-long-input"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1)
        out, err = rogue.communicate(timeout=30)
        assert rogue.returncode == 0, err
        answer = json.loads(out.splitlines()[-1])
        assert answer["refused"]["code"] == 3, answer  # INVALID_ARGUMENT
        assert answer["refused"]["message"] == (
            f"SecAggStage from device {answer['device_id']} refused: secure aggregation message: a masked input "
            "message runs to word 17, past the input's 16"), answer
        refused = [e for e in log_events(coordinator["log"], "update_refused")]
        assert [(e["device"], e["transport"]) for e in refused] == [(answer["device_id"], "secagg")], refused
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == survivors and entry["missing"] == [answer["device_id"]], entry
        check_round(coordinator, tmp_path, entry, survivors, INITIAL)
    finally:
        if rogue.poll() is None:
            rogue.kill()
            rogue.wait()


@pytest.mark.parametrize("transport", ["grpc", "data-plane"])
def test_a_100_device_round_with_10_percent_killed_at_each_stage_sums_the_survivors_exactly(tmp_path, transport):
    """Issue 20's round: 100 devices, 10 killed after each of advertising, sharing, masking and
    signing (federated_rogue_device), 60 honest (one torchnative-device process): the round completes
    with the 80 whose inputs were masked, its model bit for bit their words summed and dequantised.
    Every device over gRPC, or every device on the data plane (the model by the hub's broadcast, the
    masked inputs into its reduce; those killed after masking die once the reduce took their words).
    Heartbeats every 500 ms: at 200 ms, 100 processes starting on two cores made honest devices miss
    the 600 ms liveness window and be given up."""
    coordinator_runs = start_coordinator(tmp_path, heartbeat_interval_ms=500)
    coordinator = next(coordinator_runs)
    task = create_secure_task(coordinator, tmp_path, rounds=1, devices=100, min_updates=50, dropout_fraction=0.45)
    stages = ["advertise", "share", "mask", "sign"]
    rogues = {(stage, i): subprocess.Popen(
        [rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
         str(tmp_path / f"rogue-{stage}{i}.key"), "--secagg-transport", transport, "secagg-quit-after", stage],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for stage in stages for i in range(10)}
    try:
        (entry,), honest = run_devices(coordinator, tmp_path, task, 60, timeout=60, transport=transport)
        printed = {}
        for (stage, _), rogue in rogues.items():
            out, err = rogue.communicate(timeout=30)
            assert rogue.returncode == -9, err
            printed.setdefault(stage, []).append(json.loads(out.splitlines()[0]))
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        masked = [p for stage in ("mask", "sign") for p in printed[stage]]
        assert entry["contributors"] == sorted(honest + [p["device_id"] for p in masked]), entry
        assert entry["missing"] == sorted(p["device_id"] for stage in ("advertise", "share") for p in printed[stage])
        check_round(coordinator, tmp_path, entry, honest, INITIAL, [p["quantised"] for p in masked])
    finally:
        for process in rogues.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        next(coordinator_runs, None)


def test_too_few_devices_left_at_a_stage_abandon_the_secure_round_by_name(tmp_path):
    """Four of the five die once they have advertised: one device alone shares its keys, below the
    threshold 2, so the attempt is abandoned naming the stage (and retried, with the same model)."""
    coordinator_runs = start_coordinator(tmp_path, heartbeat_interval_ms=400)
    coordinator = next(coordinator_runs)
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    rogues = [subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                                str(tmp_path / f"rogue{i}.key"), "secagg-quit-after", "advertise"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    devices = start_devices(coordinator, tmp_path, 1, rounds=1)
    try:
        entry = closed_rounds(coordinator, task, 1, 30)[0]
        assert entry["state"] == "ROUND_STATE_FAILED", entry
        assert entry["contributors"] == [] and len(entry["missing"]) == DEVICES, entry
        why = log_events(coordinator["log"], "round_failed")[0]["message"]
        assert why.startswith("at its share keys stage: secure aggregation: round task-1/1: 1 devices shared their "
                              "keys, below the threshold 2"), why
        for rogue in rogues:
            rogue.wait(timeout=30)
            assert rogue.returncode == -9, rogue.stderr.read()
    finally:
        kill_all(rogues + [devices])
        next(coordinator_runs, None)


def test_robust_strategies_and_central_dp_are_refused_with_secure_aggregation(coordinator, tmp_path):
    krum = create_task(coordinator, tmp_path, *SECURE, "--params", '{"f": 1}', strategy="krum")
    assert krum.returncode == 1 and "secure_aggregation with strategy 'krum'" in krum.stderr, krum.stderr
    def dp(z):
        return ["--dp-noise-multiplier", str(z), "--dp-clip-norm", "1", "--dp-delta", "1e-5",
                "--dp-epsilon-budget", "100"]
    dp_flags = dp(1)
    adaptive = create_task(coordinator, tmp_path, *SECURE, *dp_flags, "--dp-target-quantile", "0.5",
                           "--dp-clip-learning-rate", "0.2", "--dp-count-stddev", "5")
    assert adaptive.returncode == 1 and "secure_aggregation with central_dp" in adaptive.stderr, adaptive.stderr
    # Without adaptive clipping, the --dp-* flags beside --secagg-* are distributed DP's.
    weighted = create_task(coordinator, tmp_path, *SECURE, "--secagg-levels", "65536", *dp_flags)
    assert weighted.returncode == 1, weighted.stderr
    assert "secure_aggregation.distributed_dp needs max_weight 1, not 100" in weighted.stderr, weighted.stderr
    distributed = SECURE[:-1] + ["1", "--secagg-levels", "65536", "--secagg-bits", "24"]
    assert create_task(coordinator, tmp_path, *distributed, *dp_flags).returncode == 0
    # At z 8 the 4-coordinate model's noise margin (14 sd of 5 shares calibrated for min_updates 3:
    # 14 x 8 x (2^17 + 2) x sqrt(5 / 3) = 1.9e7) passes the 2^23 - 1 that 24 bits hold beside
    # 5 x 65,536 levels.
    loud = create_task(coordinator, tmp_path, *distributed, *dp(8))
    assert loud.returncode == 1, loud.stderr
    assert "secure_aggregation.distributed_dp for 4 coordinates:" in loud.stderr and "headroom" in loud.stderr, (
        loud.stderr)
    few = create_task(coordinator, tmp_path, *SECURE, "--secagg-bits", "8")
    assert few.returncode == 1 and "headroom" in few.stderr, few.stderr


def test_a_partial_secure_aggregation_block_is_a_usage_error_naming_the_missing_flag(coordinator, tmp_path):
    partial = create_task(coordinator, tmp_path, "--secagg-clip-range", "0.5", "--secagg-max-weight", "10")
    assert partial.returncode == 2, partial.stderr
    assert "secure aggregation needs --secagg-corrupt-fraction" in partial.stderr.splitlines()[0], partial.stderr


# Distributed DP's tasks below: noise multiplier Z, clip norm C, a range of DP_RANGE in DP_LEVELS
# steps, max_weight 1, DEVICES devices a round of which DP_MIN_UPDATES are needed, delta DP_DELTA.
Z, C, DP_RANGE, DP_LEVELS, DP_MIN_UPDATES, DP_DELTA = 1.0, 1.0, 0.05, 1024, 3, 1e-5


def create_distributed_dp_task(coordinator, tmp_path, initial, rounds, epsilon_budget):
    write_safetensors(tmp_path / "initial.safetensors", initial)
    return admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", str(rounds),
                      "--devices-per-round", str(DEVICES), "--min-available", str(DEVICES), "--min-updates",
                      str(DP_MIN_UPDATES), "--round-timeout-ms", "20000", "--model",
                      str(tmp_path / "initial.safetensors"), "--secagg-corrupt-fraction", "0.05",
                      "--secagg-dropout-fraction", "0.33", "--secagg-clip-range", str(DP_RANGE),
                      "--secagg-max-weight", "1", "--secagg-levels", str(DP_LEVELS), "--dp-noise-multiplier",
                      str(Z), "--dp-clip-norm", str(C), "--dp-delta", str(DP_DELTA), "--dp-epsilon-budget",
                      str(epsilon_budget))["task_id"]


def share_variance(d):
    """Each device's noise share for a model of d coordinates, in quantised units, as docs/privacy.md
    calibrates it: (Z (C / step + sqrt(d)))^2 over DP_MIN_UPDATES shares, rounded up to the sampler's
    rational a / 2^k (the largest k <= 20 with a <= 2^40). Also its sensitivity C / step + sqrt(d)."""
    sensitivity = C / (DP_RANGE / DP_LEVELS) + math.sqrt(d)
    variance = (Z * sensitivity) ** 2 / DP_MIN_UPDATES
    k = next(k for k in range(20, -1, -1) if math.ceil(variance * 2**k) <= 2**40)
    return math.ceil(variance * 2**k) / 2**k, sensitivity


def gaussian_epsilon(multiplier, rounds):
    """Epsilon at DP_DELTA after `rounds` Gaussian mechanisms of this multiplier, unsampled: RDP
    rounds alpha / (2 multiplier^2) at order alpha, converted by Mironov's bound (rdp + log(1 / delta)
    / (alpha - 1)) at the best of the orders 1.1, 1.2, ..., 10.9, 12, ..., 63, 128, 256, 512."""
    orders = [1 + k / 10 for k in range(1, 100)] + list(range(12, 64)) + [128, 256, 512]
    return min(rounds * alpha / (2 * multiplier**2) + math.log(1 / DP_DELTA) / (alpha - 1) for alpha in orders)


def test_a_distributed_dp_round_stores_the_sum_plus_noise_of_the_calibrated_variance(coordinator, tmp_path):
    """secure_aggregation.distributed_dp (z 1, C 1, range 0.05, 1024 levels, max_weight 1, 5
    devices, min_updates 3): each device adds its discrete Gaussian share to its quantised words
    before masking, so the stored model is the devices' noiseless sum (their reported words) plus
    noise. Over the 20,003 coordinates the noise's measured variance, in quantised units, is the
    calibration worked out here: 5 shares of (z (C / step + sqrt(d)))^2 / 3 each (rounded up by the
    sampler's rational by under 1e-6), within 5 standard deviations of the variance estimator
    (sqrt(2 / d): 5 x 1.0% = 5%); its mean within 5 standard deviations of 0."""
    initial = {"weight": np.linspace(-1, 1, 20000, dtype=np.float32).reshape(100, 200),
               "bias": np.array([0.5, -0.25, 1.0], dtype=np.float32), "batches_seen": np.array([41], dtype=np.int64)}
    task = create_distributed_dp_task(coordinator, tmp_path, initial, rounds=1, epsilon_budget=100)
    (entry,), registered = run_devices(coordinator, tmp_path, task, DEVICES)
    assert entry["state"] == "ROUND_STATE_COMPLETED" and entry["contributors"] == registered, entry
    reports = [json.loads((tmp_path / "reports" / f"{device}-round1.json").read_text())
               for device in entry["contributors"]]
    noiseless = sum(signed(report["quantised"]) for report in reports)
    weight, step = noiseless[-1], DP_RANGE / DP_LEVELS
    assert weight == DEVICES
    admin_json(coordinator, "fetch-model", entry["output_model_version"], "--out", str(tmp_path / "out.safetensors"))
    model = read_safetensors(tmp_path / "out.safetensors")
    stored = np.concatenate([model[name].astype(np.float64).ravel() for name in FLOATING])
    start = np.concatenate([initial[name].astype(np.float64).ravel() for name in FLOATING])
    noise = (stored - start) * weight / step - noiseless[:-1]
    d = noise.size
    share = (Z * (C / step + np.sqrt(d))) ** 2 / DP_MIN_UPDATES
    calibrated = DEVICES * share
    measured = float(np.mean(noise ** 2))
    assert abs(measured / calibrated - 1) < 5 * np.sqrt(2 / d), (measured, calibrated)
    assert abs(float(np.mean(noise))) < 5 * np.sqrt(calibrated / d), np.mean(noise)
    print(f"distributed DP noise: measured variance {measured:.6g}, calibrated {calibrated:.6g}, d {d}")


def test_distributed_dp_rounds_are_charged_and_the_task_stops_before_the_round_past_its_budget(coordinator,
                                                                                            tmp_path):
    """Two secure rounds of 5 devices (min_updates 3) on the 15-coordinate model, the budget halfway
    between the epsilons of 2 and 3 rounds: each completed round is charged the Gaussian mechanism at
    the multiplier that min_updates shares carry, sqrt(3 share) / sensitivity (worked out here from
    the calibration; the 5 shares the sum holds would give sqrt(5/3) times it and a smaller epsilon),
    and the task stops before round 3 by name. Epsilon as the admin status, the round_completed
    events and /metrics give it, against gaussian_epsilon; the task_created event's plan for its 4
    rounds, past the budget, too."""
    d = sum(INITIAL[name].size for name in FLOATING)
    share, sensitivity = share_variance(d)
    multiplier = math.sqrt(DP_MIN_UPDATES * share) / sensitivity
    epsilon = {rounds: gaussian_epsilon(multiplier, rounds) for rounds in (1, 2, 3)}
    budget = (epsilon[2] + epsilon[3]) / 2
    task = create_distributed_dp_task(coordinator, tmp_path, INITIAL, rounds=4, epsilon_budget=budget)
    # The task_created event states what the 4 planned rounds would spend, as central DP's does.
    (created,) = log_events(coordinator["log"], "task_created")
    assert created["message"].endswith(
        f"; each round charged at the multiplier of min_updates shares, {multiplier:.6g}; the 4 planned rounds "
        f"would spend epsilon {gaussian_epsilon(multiplier, 4):.6g}, so the task stops at its budget before them"
    ), created
    rounds, registered = run_devices(coordinator, tmp_path, task, DEVICES, rounds=2)
    assert [(r["state"], r["contributors"]) for r in rounds] == [("ROUND_STATE_COMPLETED", registered)] * 2, rounds

    def ended():
        status = admin_json(coordinator, "status", task)
        return status if status["state"] != "TASK_STATE_RUNNING" else None
    status = wait_for("the task to end", ended, 30)
    assert (status["state"], status["rounds_completed"]) == ("TASK_STATE_STOPPED", 2), status
    assert status["state_reason"] == (
        f"the privacy budget: round 3 would take epsilon from {epsilon[2]:.6g} to {epsilon[3]:.6g} at delta "
        f"{DP_DELTA:.6g}, past the budget {budget:.6g}"), status
    privacy = status["privacy"]
    assert privacy["epsilon"] == pytest.approx(epsilon[2], rel=1e-9), (privacy, epsilon)
    assert (privacy["rounds_charged"], privacy["delta"], privacy["epsilon_budget"]) == (2, DP_DELTA, budget)
    completed = log_events(coordinator["log"], "round_completed")
    assert [e["privacy"]["rounds_charged"] for e in completed] == [1, 2], completed
    assert [e["privacy"]["epsilon"] for e in completed] == pytest.approx([epsilon[1], epsilon[2]], rel=1e-9)
    _, metrics = http_get(coordinator, "/metrics")
    series = f'torchnative_task_privacy_epsilon{{task="{task}"}} '
    charged = float(next(line for line in metrics.splitlines() if line.startswith(series)).split()[1])
    assert charged == pytest.approx(epsilon[2], rel=1e-9), metrics
    print(f"distributed DP: multiplier {multiplier!r}, epsilon after 1, 2 rounds {epsilon[1]!r}, {epsilon[2]!r}; "
          f"reported {privacy['epsilon']!r}; budget {budget!r}")


def test_a_secure_round_with_too_few_masked_inputs_is_abandoned_unmasked_and_charges_nothing(tmp_path):
    """Distributed DP, 5 devices, min_updates 3, threshold 2: three devices die once they have shared
    their keys (federated_rogue_device secagg-quit-after share), so two masked inputs come in. The
    round is abandoned at the masked input stage, before anything is unmasked (a sum of two shares
    would carry less noise than the calibration's three), and charges nothing: epsilon 0, no round
    charged."""
    coordinator_runs = start_coordinator(tmp_path, heartbeat_interval_ms=400)
    coordinator = next(coordinator_runs)
    task = create_distributed_dp_task(coordinator, tmp_path, INITIAL, rounds=1, epsilon_budget=100)
    rogues = [subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                                str(tmp_path / f"rogue{i}.key"), "secagg-quit-after", "share"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    devices = start_devices(coordinator, tmp_path, 2, rounds=1)
    try:
        entry = closed_rounds(coordinator, task, 1, 30)[0]
        assert entry["state"] == "ROUND_STATE_FAILED", entry
        why = log_events(coordinator["log"], "round_failed")[0]["message"]
        assert why == ("at its masked input stage: secure aggregation: 2 devices sent their masked inputs, fewer "
                       "than min_updates 3; nothing was unmasked"), why
        privacy = admin_json(coordinator, "status", task)["privacy"]
        assert (privacy["epsilon"], privacy["rounds_charged"]) == (0, 0), privacy
        for rogue in rogues:
            rogue.wait(timeout=30)
            assert rogue.returncode == -9, rogue.stderr.read()
    finally:
        kill_all(rogues + [devices])
        next(coordinator_runs, None)


def test_without_a_data_plane_devices_that_ask_for_it_are_not_selected_for_a_secure_task(tmp_path):
    """A coordinator without a data plane (data_plane.enabled false) puts a plaintext round's devices
    on gRPC whatever they asked, but not a secure task's: five devices that check in with
    --round-transport data-plane are not selected, and the round_waiting line names the conflict and
    the flag that resolves it."""
    for coordinator in start_coordinator(tmp_path, data_plane_enabled=False):
        task = create_secure_task(coordinator, tmp_path, rounds=1)
        with open(tmp_path / "devices.log", "w") as log:
            devices = subprocess.Popen(device_command(coordinator, tmp_path, DEVICES, 1, transport="data-plane"),
                                       stderr=log)
        try:
            def waiting_for_all():
                lines = [line for line in log_events(coordinator["log"], "round_waiting")
                         if line["available"] == DEVICES]
                return lines[-1] if lines else None
            waiting = wait_for("a round_waiting line with the 5 devices", waiting_for_all, 20)
            assert (waiting["task"], waiting["eligible"]) == (task, 0), waiting
            assert waiting["why"] == (
                "waiting for 5 eligible devices (the larger of min_available 5 and min_updates 3): 0 eligible of 5 "
                "waiting; 5 asked for the hub's data plane (round_transport data-plane), which this coordinator runs "
                "without (data_plane.enabled false): a secure aggregation task's masked words then go over gRPC "
                "alone, and a device takes part only when it checks in with round_transport grpc "
                "(torchnative-device --round-transport grpc)"), waiting
            assert admin_json(coordinator, "rounds", task) == [], "a round started"
        finally:
            kill_all([devices])


def test_devices_on_the_data_plane_sum_their_masked_inputs_in_the_hubs_reduce(coordinator, tmp_path):
    """Three of a round's five devices check in for the data plane (torchnative-device's default),
    two for gRPC: the three receive the model by the hub's broadcast and send their masked inputs
    into its reduce of integer vectors (int32 words summed modulo 2^32), the two by SecAggStage.
    Over two rounds each stored model has the bits of the five's quantised updates summed
    (check_round), and each round's round_data_plane line counts the three on the data plane, to
    whom the model went by the broadcast."""
    task = create_secure_task(coordinator, tmp_path, rounds=2)
    plane = start_devices(coordinator, tmp_path, 3, 2, transport="data-plane", keys="plane-keys")
    try:
        rounds, over_grpc = run_devices(coordinator, tmp_path, task, 2, rounds=2, timeout=60)
        _, log = plane.communicate(timeout=30)
        assert plane.returncode == 0, log
    finally:
        kill_all([plane])
    everyone = sorted(registered_ids(log) + over_grpc)
    assert len(everyone) == DEVICES
    round_model = INITIAL
    for entry in rounds:
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == everyone and entry["missing"] == [], entry
        round_model = check_round(coordinator, tmp_path, entry, everyone, round_model)
    hosted = log_events(coordinator["log"], "round_data_plane")
    assert [(line["data_plane_devices"], "broadcast_seconds" in line) for line in hosted] == [(3, True)] * 2, hosted


# A Python device (torchnative.device, the device side of nn.federated.Engine) on the data plane,
# Device's default round_transport: its training adds a fixed update to the round's model (some
# coordinates past CLIP, to be clamped) and reports 73 examples (capped at MAX_WEIGHT); prints its
# round's report as JSON in the form of torchnative-device's --report-dir files (check_quantised).
PYTHON_SECURE_DEVICE = r'''
import json, sys
import numpy as np
import torch
from torchnative.device import Device
device = Device(sys.argv[1], sys.argv[2], check_in_wait=1.0)
trained = {}
def train(state, config):
    for scale, name in enumerate(("weight", "bias"), start=1):
        values = state[name].numpy()
        values = values + scale * np.linspace(-0.03, 0.02, values.size, dtype=np.float32).reshape(values.shape)
        state[name] = torch.from_numpy(values)
        trained[name] = {"values": values.ravel().tolist()}
    return state, 73
(report,) = device.run(train, rounds=1)
print(json.dumps({"device_id": device.device_id, "contributed": report.contributed, "error": report.error,
                  "num_examples": report.num_examples, "quantised": report.quantised.tolist(), "tensors": trained}))
'''


def test_a_python_device_takes_part_in_a_secure_round_on_the_data_plane(coordinator, tmp_path):
    """A torchnative.device.Device with its default transport beside four torchnative-devices, all
    on the data plane: it receives the model by the hub's broadcast, quantises its update, masks
    it and sends the words into the hub's reduce; the round completes with the five as
    contributors, the Python device's reported words (RoundReport.quantised) within one step of its
    capped weight times its clamped update, and the stored model bit for bit the five's quantised
    updates summed and dequantised (check_round)."""
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    python = subprocess.Popen([PYTHON, "-c", PYTHON_SECURE_DEVICE, f"127.0.0.1:{coordinator['grpc_port']}",
                               str(tmp_path / "python.key")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), others = run_devices(coordinator, tmp_path, task, DEVICES - 1, transport="data-plane")
        out, err = python.communicate(timeout=30)
    finally:
        kill_all([python])
    assert python.returncode == 0, err
    report = json.loads(out)
    assert report["contributed"] and report["error"] == "" and report["num_examples"] == 73, report
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    assert entry["contributors"] == sorted(others + [report["device_id"]]) and entry["missing"] == [], entry
    check_quantised(report, INITIAL)
    check_round(coordinator, tmp_path, entry, others, INITIAL, [report["quantised"]])
    hosted = log_events(coordinator["log"], "round_data_plane")
    assert [line["data_plane_devices"] for line in hosted] == [DEVICES], hosted


@pytest.mark.parametrize("stage", ["share", "mask"])
def test_a_data_plane_device_killed_before_or_after_its_masked_input_reached_the_hub(tmp_path, stage):
    """federated_rogue_device --secagg-transport data-plane secagg-quit-after STAGE beside four honest
    devices on the data plane. Killed after sharing its keys, before its masked input went into the
    hub's reduce: the reduce lists it missing, and the sum is the four's (its pairwise masks rebuilt
    from its neighbours' shares). Killed once the reduce took its masked input whole, before it could
    say so by SecAggStage: the reduce lists it a contributor, and the sum holds its words (its self
    mask rebuilt). The unmask stage goes by exactly the devices whose words the reduce added."""
    coordinator_runs = start_coordinator(tmp_path, heartbeat_interval_ms=400)
    coordinator = next(coordinator_runs)
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                              str(tmp_path / "rogue.key"), "--secagg-transport", "data-plane", "secagg-quit-after",
                              stage], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1, transport="data-plane")
        out, err = rogue.communicate(timeout=30)
        assert rogue.returncode == -9, err  # killed by its own SIGKILL
        printed = json.loads(out.splitlines()[0])
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        in_sum = stage == "mask"
        assert entry["contributors"] == sorted(survivors + [printed["device_id"]] * in_sum), entry
        assert entry["missing"] == ([] if in_sum else [printed["device_id"]]), entry
        check_round(coordinator, tmp_path, entry, survivors, INITIAL, [printed["quantised"]] * in_sum)
    finally:
        kill_all([rogue])
        next(coordinator_runs, None)


def test_a_masked_input_one_word_too_long_on_the_data_plane_is_refused_naming_the_device(coordinator, tmp_path):
    """federated_rogue_device --secagg-transport data-plane secagg-long-input sends 17 words into the
    hub's reduce of the layout's 16: the hub refuses it as it announces itself (a collective
    mismatch, the device disconnected), the update_refused event names the device, and the round
    completes over the other four, bit for bit, the rogue out as a device that shared its keys and
    masked nothing."""
    task = create_secure_task(coordinator, tmp_path, rounds=1)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                              str(tmp_path / "rogue.key"), "--secagg-transport", "data-plane", "secagg-long-input"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1, transport="data-plane")
        rogue.communicate(timeout=30)
        refused = log_events(coordinator["log"], "update_refused")
        assert len(refused) == 1 and refused[0]["transport"] == "data-plane", refused
        (rogue_id,) = set(entry["missing"])
        assert refused[0]["device"] == rogue_id and "int32, 17 elements" in refused[0]["message"], refused
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == survivors, entry
        check_round(coordinator, tmp_path, entry, survivors, INITIAL)
    finally:
        kill_all([rogue])


def test_devices_refuse_by_name_a_round_asking_for_less_noise_than_their_floor(coordinator, tmp_path):
    """The coordinator's round asks each device for the share of a sum of min_updates 3 devices at
    multiplier Z; devices whose own floor is multiplier Z for sums of 2 devices (a share sqrt(3/2)
    larger) refuse it before training, naming both, so the round fails and nothing is charged."""
    task = create_distributed_dp_task(coordinator, tmp_path, INITIAL, rounds=1, epsilon_budget=100)
    with open(tmp_path / "devices.log", "w") as log:
        devices = subprocess.Popen(device_command(coordinator, tmp_path, DEVICES, 1) +
                                   ["--min-noise-multiplier", str(Z), "--max-noise-devices", "2"], stderr=log)
    try:
        entry = closed_rounds(coordinator, task, 1, 30)[0]
        assert entry["state"] == "ROUND_STATE_FAILED" and entry["contributors"] == [], entry
        def round_1_lines():
            lines = [json.loads(line) for line in (tmp_path / "devices.log").read_text().splitlines()]
            lines = [line for line in lines if line.get("round") == 1]
            return lines if len(lines) == DEVICES else None
        lines = wait_for("each device's line for round 1", round_1_lines, 30)
        assert not any(line["trained"] for line in lines), lines
        assert {line["error"] for line in lines} == {
            f"round 1 of task {task} asks each device for noise of multiplier 1 for sums of 3 devices (a share of "
            f"{1 / math.sqrt(3):.6g} sensitivities), below this device's noise floor, multiplier 1 for sums of 2 "
            f"devices (a share of {1 / math.sqrt(2):.6g} sensitivities)"}, lines
        privacy = admin_json(coordinator, "status", task)["privacy"]
        assert (privacy["epsilon"], privacy["rounds_charged"]) == (0, 0), privacy
    finally:
        devices.kill()
        devices.wait()


# A Python device (torchnative.device) over gRPC with the noise floor of the arguments Z, M; prints
# its id and its one round's report as JSON.
FLOORED_DEVICE = r'''
import json, sys
from torchnative.device import Device
server, key_file, multiplier, devices = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
device = Device(server, key_file, check_in_wait=1.0, round_transport="grpc", min_noise_multiplier=multiplier,
                max_noise_devices=devices)
(report,) = device.run(lambda state, config: (state, 1), rounds=1)
print(json.dumps({"device_id": device.device_id, "contributed": report.contributed, "error": report.error}))
'''


def test_a_python_device_refuses_by_name_a_round_asking_for_less_noise_than_its_floor(coordinator, tmp_path):
    """Device(min_noise_multiplier=Z, max_noise_devices=2) holds the floor of torchnative-device's
    --min-noise-multiplier Z --max-noise-devices 2: of the round's 5 devices, the Python one refuses
    the share of min_updates 3 devices by name before training, and the round completes over the
    other four (without the floor it would be a contributor)."""
    task = create_distributed_dp_task(coordinator, tmp_path, INITIAL, rounds=1, epsilon_budget=100)
    python = subprocess.Popen([PYTHON, "-c", FLOORED_DEVICE, f"127.0.0.1:{coordinator['grpc_port']}",
                               str(tmp_path / "python.key"), str(Z), "2"], stdout=subprocess.PIPE, text=True)
    try:
        (entry,), registered = run_devices(coordinator, tmp_path, task, DEVICES - 1)
        out, _ = python.communicate(timeout=30)
    finally:
        kill_all([python])
    assert python.returncode == 0, out
    report = json.loads(out)
    assert (entry["state"], entry["contributors"], entry["missing"]) == (
        "ROUND_STATE_COMPLETED", registered, [report["device_id"]]), entry
    assert report["contributed"] is False, report
    assert report["error"] == (
        f"round 1 of task {task} asks each device for noise of multiplier 1 for sums of 3 devices (a share of "
        f"{1 / math.sqrt(3):.6g} sensitivities), below this device's noise floor, multiplier 1 for sums of 2 "
        f"devices (a share of {1 / math.sqrt(2):.6g} sensitivities)"), report


def test_a_masked_word_past_the_modulus_on_the_data_plane_is_refused_naming_the_device(coordinator, tmp_path):
    """Sums modulo 2^24 (30,000 levels: 5 x 50 x 30,000 fits 23 bits): federated_rogue_device
    --secagg-transport data-plane secagg-wide-word sends 2^24 as its first masked word into the hub's
    reduce, a word no honest device sends (SecAggStage refuses it too). The hub's check refuses it as
    it lands, naming the device and the word (an update_refused event); the rogue's SecAggStage saying
    its words went is refused with that reason; the round completes over the other four, the rogue
    missing (without the check it would be a contributor, checked)."""
    task = create_secure_task(coordinator, tmp_path, rounds=1, bits=24, levels=30000)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key",
                              str(tmp_path / "rogue.key"), "--secagg-transport", "data-plane", "secagg-wide-word"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (entry,), survivors = run_devices(coordinator, tmp_path, task, DEVICES - 1, transport="data-plane")
        out, err = rogue.communicate(timeout=30)
        assert rogue.returncode == 0, err
        answer = json.loads(out.splitlines()[-1])
        why = "masked input word 0 is 16777216, not below 2^24"
        assert answer["refused"] == {"code": 9, "message": (  # FAILED_PRECONDITION
            f"SecAggStage from device {answer['device_id']} refused: the hub's reduce of the masked inputs did not "
            f"count this device's: {why}")}, answer
        refused = log_events(coordinator["log"], "update_refused")
        assert [(e["device"], e["transport"], e["message"]) for e in refused] == [
            (answer["device_id"], "data-plane", why)], refused
        assert entry["state"] == "ROUND_STATE_COMPLETED", entry
        assert entry["contributors"] == survivors and entry["missing"] == [answer["device_id"]], entry
    finally:
        kill_all([rogue])
