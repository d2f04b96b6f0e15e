"""Failures over real processes on loopback: a device killed mid-round (left out when the others
still make min_updates, the attempt abandoned and retried when they do not, and listed gone once
it has missed its heartbeats, while one training for longer stays alive), the coordinator
killed mid-round and restarted on its state directory, and devices that send what the real client
never would (a NaN or a wrong-length contribution past the client's checks, a garbage or an
oversized gRPC message, a replayed request after a restart, gRPC updates of another version,
table or digest, without examples, with a NaN, twice, replayed or late). A device frozen mid-round
is dropped once its heartbeats lapse, on the data plane and over gRPC.

Every completed round's model is recomputed here from what its contributors report they trained
(float64 products and sums in device-id order, one rounding to float32) and compared bit for bit.
"""
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from federation import (PythonDevices, admin_json, assert_weight_bits, checked_in, closed_rounds, create_fedavg_task,
                        fedavg, fetch_model, http_get, launch_coordinator, log_events, rogue_device, start_coordinator,
                        tool, wait_for)

# A Python device (federation.PythonDevices' command line and files) that in round SLEEP_ROUND
# first touches LABEL-training<R> and sleeps SLEEP_SECONDS, which is when a test kills or freezes
# it or kills its coordinator. TRANSPORT: how it takes part in rounds (Device's round_transport).
DEVICE_SCRIPT = r'''
import json, pathlib, sys, time
import numpy as np, torch
from torchnative.device import Device
server, key_file, directory, label = sys.argv[1:5]
shift, examples, rounds, sleep_round, sleep_seconds = float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9])
directory = pathlib.Path(directory)
device = Device(server, key_file, check_in_wait=1.0, round_transport=sys.argv[10])
(directory / f"{label}.id").write_text(device.device_id)
def train(state, config):
    round_id = config["round_id"]
    trained = {name: (t + shift * round_id if t.dtype == torch.float32 else t.clone()) for name, t in state.items()}
    np.save(directory / f"{label}-round{round_id}.npy", trained["weight"].numpy())
    if round_id == sleep_round:
        (directory / f"{label}-training{round_id}").touch()
        time.sleep(sleep_seconds)
    return trained, examples
reports = device.run(train, rounds=rounds)
print(json.dumps([[r.round_id, r.contributed, r.error] for r in reports]))
'''
INITIAL = {"weight": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "steps": np.array([7], dtype=np.int64)}


class SleepingDevices(PythonDevices):
    """Devices running DEVICE_SCRIPT."""

    script = DEVICE_SCRIPT

    def start(self, label, *, shift, examples, rounds, sleep_round=0, sleep_seconds=0.0, transport="data_plane"):
        return self.launch(label, shift, examples, rounds, sleep_round, sleep_seconds, transport)


def create_task(coordinator, tmp_path, *, timeout_ms=30000, **sizes):
    return create_fedavg_task(coordinator, tmp_path, INITIAL, timeout_ms=timeout_ms, **sizes)


def test_a_device_killed_mid_round_is_left_out_and_the_next_round_goes_on(coordinator, tmp_path):
    devices = SleepingDevices(coordinator, tmp_path)
    try:
        devices.start("a", shift=0.5, examples=10, rounds=2)
        devices.start("b", shift=-0.25, examples=30, rounds=2)
        victim = devices.start("victim", shift=1.0, examples=5, rounds=1, sleep_round=1, sleep_seconds=120)
        # All three wait before the task exists, so its first round selects all three; the
        # second needs only the two survivors (min_available 2).
        wait_for("three devices to check in", lambda: checked_in(coordinator) == 3, 30)
        task = create_task(coordinator, tmp_path, rounds=2, per_round=3, min_updates=2, min_available=2)
        wait_for("the victim to be training", lambda: devices.training("victim", 1), 30)
        victim.kill()
        assert victim.wait() == -9
        reports = {label: devices.reports(label) for label in ("a", "b")}
        rounds = closed_rounds(coordinator, task, 2, 45)
    finally:
        devices.kill_all()

    a, b, dead = (devices.device_id(label) for label in ("a", "b", "victim"))
    assert reports == {"a": [[1, True, ""], [2, True, ""]], "b": [[1, True, ""], [2, True, ""]]}
    first, second = rounds
    assert (first["round_id"], first["state"]) == (1, "ROUND_STATE_COMPLETED"), first
    assert first["selected"] == sorted([a, b, dead]) and first["missing"] == [dead], first
    assert first["contributors"] == sorted([a, b]), first
    assert (second["round_id"], second["state"]) == (2, "ROUND_STATE_COMPLETED"), second
    assert second["selected"] == second["contributors"] == sorted([a, b]) and second["missing"] == [], second
    assert [first["input_model_version"], first["output_model_version"], second["output_model_version"]] == [
        f"{task}/0", f"{task}/1", f"{task}/2"]
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/1")[1], devices.fedavg(["a", "b"], 1), [7])
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/2")[1], devices.fedavg(["a", "b"], 2), [7])


def test_a_device_killed_below_min_updates_abandons_the_attempt_and_a_replacement_completes_the_retry(
        coordinator, tmp_path):
    devices = SleepingDevices(coordinator, tmp_path)
    try:
        devices.start("a", shift=0.5, examples=10, rounds=2)
        devices.start("b", shift=-0.25, examples=30, rounds=2)
        victim = devices.start("victim", shift=1.0, examples=5, rounds=1, sleep_round=1, sleep_seconds=120)
        task = create_task(coordinator, tmp_path, rounds=1, per_round=3, min_updates=3, min_available=3)
        wait_for("the victim to be training", lambda: devices.training("victim", 1), 30)
        victim.kill()
        assert victim.wait() == -9
        abandoned = closed_rounds(coordinator, task, 1, 45)[0]
        # The retry waits for a third device: the replacement arrives only now.
        devices.start("replacement", shift=2.0, examples=7, rounds=1)
        reports = {label: devices.reports(label) for label in ("a", "b", "replacement")}
        rounds = closed_rounds(coordinator, task, 2, 45)
    finally:
        devices.kill_all()

    a, b, dead, new = (devices.device_id(label) for label in ("a", "b", "victim", "replacement"))
    assert abandoned == rounds[0]
    assert (abandoned["round_id"], abandoned["state"]) == (1, "ROUND_STATE_FAILED"), abandoned
    assert abandoned["selected"] == sorted([a, b, dead]) and abandoned["missing"] == [dead], abandoned
    assert abandoned["contributors"] == sorted([a, b]) and abandoned["output_model_version"] == "", abandoned
    failed = log_events(coordinator["log"], "round_failed")
    assert [event["round"] for event in failed] == [1]
    assert failed[0]["message"] == f"2 of the 3 contributions required arrived by the deadline; missing: {dead}"

    retry = rounds[1]
    assert (retry["round_id"], retry["state"]) == (2, "ROUND_STATE_COMPLETED"), retry
    assert retry["selected"] == retry["contributors"] == sorted([a, b, new]) and retry["missing"] == [], retry
    assert (retry["input_model_version"], retry["output_model_version"]) == (f"{task}/0", f"{task}/1")
    assert reports == {"a": [[1, True, ""], [2, True, ""]], "b": [[1, True, ""], [2, True, ""]],
                       "replacement": [[2, True, ""]]}
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/1")[1], devices.fedavg(["a", "b", "replacement"], 2), [7])
    _, metrics = http_get(coordinator, "/metrics")
    assert 'torchnative_rounds_total{outcome="abandoned"} 1' in metrics
    assert 'torchnative_rounds_total{outcome="completed"} 1' in metrics


def test_the_coordinator_killed_mid_round_resumes_from_its_last_committed_version(coordinator, tmp_path):
    server = f"127.0.0.1:{coordinator['grpc_port']}"
    # A signed request from before the crash, to replay after it: used nonces are durable.
    saved = tmp_path / "check-in.request"
    earlier = subprocess.run([rogue_device(), "--server", server, "--key", str(tmp_path / "rogue.key"),
                              "check-in", str(saved)], capture_output=True, text=True, timeout=60)
    assert earlier.returncode == 0 and json.loads(earlier.stdout)["code"] == 0, earlier

    devices = SleepingDevices(coordinator, tmp_path)
    restarted = None
    try:
        devices.start("a", shift=0.5, examples=10, rounds=0, sleep_round=2, sleep_seconds=2)
        devices.start("b", shift=-0.25, examples=30, rounds=0, sleep_round=2, sleep_seconds=2)
        task = create_task(coordinator, tmp_path, rounds=2, per_round=2, min_updates=2, min_available=2)
        closed_rounds(coordinator, task, 1, 45)
        (tmp_path / "before").mkdir()
        before = {version: fetch_model(coordinator, tmp_path / "before", version)[0] for version in (f"{task}/0", f"{task}/1")}
        wait_for("round 2 to be training", lambda: devices.training("a", 2) and devices.training("b", 2), 30)
        coordinator["process"].kill()
        assert coordinator["process"].wait() == -9

        restarted = launch_coordinator(tmp_path, grpc_port=coordinator["grpc_port"], log_name="restarted.log")
        wait_for("the task to finish", lambda: log_events(restarted["log"], "task_finished"), 45)
        rounds = admin_json(restarted, "rounds", task)
        (tmp_path / "after").mkdir()
        after = {version: fetch_model(restarted, tmp_path / "after", version) for version in [*before, f"{task}/2"]}
        replayed = subprocess.run([rogue_device(), "--server", server, "--key", str(tmp_path / "rogue.key"),
                                   "replay", str(saved)], capture_output=True, text=True, timeout=60)
        assert http_get(restarted, "/healthz") == (200, "ok\n")
    finally:
        devices.kill_all()
        if restarted and restarted["process"].poll() is None:
            restarted["process"].kill()
            restarted["process"].wait()

    assert [(r["round_id"], r["state"]) for r in rounds] == [
        (1, "ROUND_STATE_COMPLETED"), (2, "ROUND_STATE_INTERRUPTED"), (3, "ROUND_STATE_COMPLETED")], rounds
    a, b = devices.device_id("a"), devices.device_id("b")
    interrupted, resumed = rounds[1], rounds[2]
    assert interrupted["selected"] == sorted([a, b]) and interrupted["output_model_version"] == "", interrupted
    assert interrupted["contributors"] == [] and interrupted["input_model_version"] == f"{task}/1", interrupted
    assert (resumed["input_model_version"], resumed["output_model_version"]) == (f"{task}/1", f"{task}/2")
    assert resumed["contributors"] == sorted([a, b]), resumed
    assert [(e["task"], e["round"]) for e in log_events(restarted["log"], "round_interrupted")] == [(task, 2)]
    assert [(e["task"], e["model_version"], e["next_round"]) for e in log_events(restarted["log"], "task_resumed")] \
        == [(task, 1, 3)]
    assert log_events(restarted["log"], "task_finished")[0]["message"] == "completed: all 2 rounds completed"
    for version, stored in before.items():
        assert after[version][0] == stored, f"{version} changed across the restart"
    assert_weight_bits(after[f"{task}/2"][1], devices.fedavg(["a", "b"], 3), [7])
    outcome = json.loads(replayed.stdout)
    assert outcome["code"] == 16 and "was used before (a replay)" in outcome["message"], outcome


@pytest.mark.slow
def test_sigterm_mid_round_drains_it_and_a_restart_goes_on_from_it(coordinator, tmp_path):
    # SIGTERM while both devices train round 2: no further round starts, round 2 completes and is
    # committed, the daemon exits 0; restarted, the task runs its last round from round 2's model.
    devices = SleepingDevices(coordinator, tmp_path)
    restarted = None
    try:
        devices.start("a", shift=0.5, examples=10, rounds=0, sleep_round=2, sleep_seconds=2)
        devices.start("b", shift=-0.25, examples=30, rounds=0, sleep_round=2, sleep_seconds=2)
        task = create_task(coordinator, tmp_path, rounds=3, per_round=2, min_updates=2, min_available=2)
        wait_for("round 2 to be training", lambda: devices.training("a", 2) and devices.training("b", 2), 45)
        coordinator["process"].send_signal(signal.SIGTERM)
        assert coordinator["process"].wait(timeout=60) == 0
        events = [json.loads(line) for line in coordinator["log"].read_text().splitlines()]

        restarted = launch_coordinator(tmp_path, grpc_port=coordinator["grpc_port"], log_name="restarted.log")
        wait_for("the task to finish", lambda: log_events(restarted["log"], "task_finished"), 45)
        rounds = admin_json(restarted, "rounds", task)
        model = fetch_model(restarted, tmp_path, f"{task}/3")[1]
    finally:
        devices.kill_all()
        if restarted and restarted["process"].poll() is None:
            restarted["process"].kill()
            restarted["process"].wait()

    names = [event["event"] for event in events]
    completed = [event["round"] for event in events if event["event"] == "round_completed"]
    started = [event["round"] for event in events if event["event"] == "round_started"]
    assert completed == [1, 2] and started == [1, 2], names
    assert names.index("signal") < names.index("round_completed", names.index("signal")) and names[-1] == "stopped"
    assert [(r["round_id"], r["state"]) for r in rounds] == [
        (1, "ROUND_STATE_COMPLETED"), (2, "ROUND_STATE_COMPLETED"), (3, "ROUND_STATE_COMPLETED")], rounds
    assert rounds[2]["input_model_version"] == f"{task}/2", rounds[2]
    assert_weight_bits(model, devices.fedavg(["a", "b"], 3), [7])


@pytest.mark.slow
def test_poisoned_late_garbage_and_oversized_messages_are_refused_by_name_and_the_daemon_stays_up(
        coordinator, tmp_path):
    server = f"127.0.0.1:{coordinator['grpc_port']}"

    def rogue(key, *mode):
        return subprocess.Popen([rogue_device(), "--server", server, "--key", str(tmp_path / key), *mode],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def outcome(process):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        return json.loads(out)

    def malformed(method):
        return {"code": 3, "message": f"/torchnative.federated.v1.{method}: the request could not be parsed as a "
                                      f"torchnative.federated.v1.{method.split('/')[1]}Request"}

    # A message that does not parse is INVALID_ARGUMENT naming the method and its request type,
    # whether the method is synchronous (Register), a callback (CheckIn) or server-streaming
    # (FetchModel).
    for method in ("Register", "CheckIn", "FetchModel"):
        assert outcome(rogue("garbage.key", "garbage", method)) == malformed(f"DeviceService/{method}")
    # So is one in a client stream (CreateTask, SubmitUpdate), as it arrives: the rogue leaves its
    # stream open, so the answer cannot come from the end of the stream (it would wait out the
    # rogue's 20 s deadline). The garbage is the first message, or a model chunk after a CreateTask
    # header signed by the administrator key.
    for method in ("AdminService/CreateTask", "DeviceService/SubmitUpdate"):
        assert outcome(rogue("garbage.key", "garbage-stream", method)) == malformed(method)
    assert outcome(rogue("admin.key", "garbage-chunk")) == malformed("AdminService/CreateTask")
    # A first message that parses, but is not the signed header a SubmitUpdate must open with, is
    # refused by name while the stream is still open.
    submit = outcome(rogue("garbage.key", "empty-stream", "DeviceService/SubmitUpdate"))
    assert submit == {"code": 3, "message": "SubmitUpdate must open with its signed_header"}, submit
    oversized = outcome(rogue("oversized.key", "oversized", str(5 << 20)))
    assert oversized["code"] == 8, oversized  # RESOURCE_EXHAUSTED, at the configured 4 MiB
    assert oversized["message"].startswith("Received message larger than max (") and \
        oversized["message"].endswith(" vs. 4194304)"), oversized

    reports = tmp_path / "reports"
    honest = subprocess.Popen(
        [tool("torchnative-device"), "--server", server, "--key-dir", str(tmp_path / "keys"), "--devices", "2",
         "--rounds", "1", "--report-dir", str(reports), "--check-in-wait-ms", "1000"],
        stderr=subprocess.PIPE, text=True)
    poisons = {poison: rogue(f"{poison}.key", "contribute", poison) for poison in ("nan", "short", "long")}
    late_devices = SleepingDevices(coordinator, tmp_path)
    late_devices.start("late", shift=1.0, examples=5, rounds=1, sleep_round=1, sleep_seconds=4)  # past the deadline
    try:
        task = create_task(coordinator, tmp_path, rounds=1, per_round=6, min_updates=2, min_available=6,
                           timeout_ms=2500)
        rogues = {poison: outcome(process) for poison, process in poisons.items()}
        _, device_log = honest.communicate(timeout=60)
        assert honest.returncode == 0, device_log
        entry = closed_rounds(coordinator, task, 1, 45)[0]
        late = late_devices.reports("late")
    finally:
        late_devices.kill_all()
        for process in [honest, *poisons.values()]:
            if process.poll() is None:
                process.kill()
                process.wait()

    honest_ids = sorted(path.name.split("-round")[0] for path in reports.glob("*-round1.json"))
    rogue_ids = {poison: result["device_id"] for poison, result in rogues.items()}
    assert len(honest_ids) == 2
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    late_id = late_devices.device_id("late")
    assert entry["contributors"] == honest_ids, entry
    assert entry["missing"] == sorted([*rogue_ids.values(), late_id]), entry
    # Woken past the deadline, the late device finds the round closed, or its hub already gone.
    assert late[0][:2] == [1, False] and late[0][2] in (
        "the hub closed the round before this contribution was delivered",
        "deadline_reduce failed: rank 0 disconnected (End of file)"), late
    # The NaN is refused as its segment lands; a contribution of another length meets the hub's
    # receive with another signature, and its device is disconnected, not the round failed.
    refused = {event["device"]: event["message"] for event in log_events(coordinator["log"], "update_refused")}
    assert set(refused) == set(rogue_ids.values())
    assert refused[rogue_ids["nan"]] == "tensor 'weight' has a non-finite value at index 0"
    ranks = {device: rank for rank, device in enumerate(entry["selected"], start=1)}
    for poison, elements in (("short", 12), ("long", 14)):
        assert refused[rogue_ids[poison]] == (
            f"mismatched collectives: rank {ranks[rogue_ids[poison]]} called deadline_reduce(float64, {elements} "
            "elements, SUM, root 0) as operation #2 of the group, rank 0 called deadline_reduce(float64, "
            "13 elements, SUM, root 0)")
        assert rogues[poison]["delivered"] is False, rogues[poison]
        assert rogues[poison]["error"] == "deadline_reduce failed: rank 0 disconnected (End of file)"
    assert rogues["nan"]["delivered"] is True  # all of it reached the hub, which refused it

    # The two honest devices' FedAvg, from their reports.
    honest_reports = [json.loads((reports / f"{device}-round1.json").read_text()) for device in honest_ids]
    expected = fedavg((report["num_examples"], report["tensors"]["weight"]["values"]) for report in honest_reports)
    assert_weight_bits(fetch_model(coordinator, tmp_path, entry["output_model_version"])[1], expected.reshape(3, 4),
                       [7])

    assert http_get(coordinator, "/healthz") == (200, "ok\n")
    _, metrics = http_get(coordinator, "/metrics")
    assert 'torchnative_requests_refused_total{reason="contribution_refused"} 3' in metrics
    assert 'torchnative_requests_refused_total{reason="malformed_request"} 6' in metrics


HEARTBEAT_INTERVAL_S = 0.4
LIVENESS_WINDOW_S = 3 * HEARTBEAT_INTERVAL_S  # the coordinator's kHeartbeatsUntilGone intervals


@pytest.fixture
def fast_heartbeats(tmp_path):
    yield from start_coordinator(tmp_path, heartbeat_interval_ms=int(HEARTBEAT_INTERVAL_S * 1000))


def listed_devices(coordinator):
    return {device["device_id"]: device for device in admin_json(coordinator, "devices")}


@pytest.mark.slow
def test_a_device_training_past_the_liveness_window_stays_alive_and_a_killed_one_is_gone_after_it(
        fast_heartbeats, tmp_path):
    coordinator = fast_heartbeats
    devices = SleepingDevices(coordinator, tmp_path)
    try:
        # Both sleepers say nothing but their heartbeats while they train, for many windows.
        devices.start("slow", shift=0.5, examples=10, rounds=1, sleep_round=1, sleep_seconds=10)
        victim = devices.start("victim", shift=1.0, examples=5, rounds=1, sleep_round=1, sleep_seconds=120)
        devices.start("quick", shift=-0.25, examples=30, rounds=1)
        wait_for("three devices to check in", lambda: checked_in(coordinator) == 3, 30)
        task = create_task(coordinator, tmp_path, rounds=1, per_round=3, min_updates=2, min_available=3)
        wait_for("the sleepers to be training",
                 lambda: devices.training("slow", 1) and devices.training("victim", 1), 30)
        slow, dead = devices.device_id("slow"), devices.device_id("victim")
        wait_for("their heartbeats to report training", lambda: all(
            listed["last_state"] == "DEVICE_STATE_TRAINING"
            for device, listed in listed_devices(coordinator).items() if device in (slow, dead)), 10)
        observed = set()
        for _ in range(int(3 * LIVENESS_WINDOW_S / 0.2)):
            listed = listed_devices(coordinator)
            observed |= {(label, listed[device]["alive"], listed[device]["last_state"])
                         for label, device in (("slow", slow), ("victim", dead))}
            time.sleep(0.2)
        victim.kill()
        assert victim.wait() == -9
        killed_at = time.monotonic()
        wait_for("the killed device to be listed gone", lambda: not listed_devices(coordinator)[dead]["alive"], 10)
        gone_after = time.monotonic() - killed_at
        slow_after = listed_devices(coordinator)[slow]
        reports = devices.reports("slow")
        entry = closed_rounds(coordinator, task, 1, 45)[0]
    finally:
        devices.kill_all()

    assert observed == {("slow", True, "DEVICE_STATE_TRAINING"), ("victim", True, "DEVICE_STATE_TRAINING")}
    assert (slow_after["alive"], slow_after["last_state"]) == (True, "DEVICE_STATE_TRAINING"), slow_after
    # Gone once the window passed since its last heartbeat (at most an interval before it died).
    assert LIVENESS_WINDOW_S - HEARTBEAT_INTERVAL_S - 0.2 < gone_after < LIVENESS_WINDOW_S + 3, gone_after
    assert reports == [[1, True, ""]]
    quick = devices.device_id("quick")
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    assert entry["contributors"] == sorted([slow, quick]) and entry["missing"] == [dead], entry


@pytest.mark.parametrize("transport", ["data_plane", "grpc"])
def test_a_device_frozen_mid_round_is_dropped_once_its_heartbeats_lapse(fast_heartbeats, tmp_path, transport):
    # SIGSTOP keeps the device's sockets open, so nothing but its silence says it is gone: the
    # round must end with the others once the liveness window passes, not at its 60 s deadline.
    # Over gRPC a device holds no connection open while it trains, so silence is all there is.
    coordinator = fast_heartbeats
    devices = SleepingDevices(coordinator, tmp_path)
    try:
        frozen = devices.start("frozen", shift=1.0, examples=5, rounds=1, sleep_round=1, sleep_seconds=120,
                               transport=transport)
        devices.start("a", shift=0.5, examples=10, rounds=1, transport=transport)
        devices.start("b", shift=-0.25, examples=30, rounds=1, transport=transport)
        wait_for("three devices to check in", lambda: checked_in(coordinator) == 3, 30)
        task = create_task(coordinator, tmp_path, rounds=1, per_round=3, min_updates=2, min_available=3,
                           timeout_ms=60000)
        wait_for("the frozen device to be training", lambda: devices.training("frozen", 1), 30)
        os.kill(frozen.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        entry = closed_rounds(coordinator, task, 1, 45)[0]
        closed_after = time.monotonic() - frozen_at
        dead = devices.device_id("frozen")
        reports = {label: devices.reports(label) for label in ("a", "b")}
    finally:
        devices.kill_all()

    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    assert entry["contributors"] == sorted(devices.device_id(label) for label in ("a", "b")), entry
    assert entry["missing"] == [dead], entry
    assert reports == {"a": [[1, True, ""]], "b": [[1, True, ""]]}
    # The window, and the coordinator's look every heartbeat interval, after its last heartbeat.
    assert closed_after < LIVENESS_WINDOW_S + 5, closed_after
    dropped = [entry for entry in map(json.loads, coordinator["log"].read_text().splitlines())
               if entry["event"] == "device_dropped"]
    assert [(entry["device"], entry["round"]) for entry in dropped] == [(dead, 1)], dropped
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/1")[1], devices.fedavg(["a", "b"], 1), [7])


@pytest.mark.slow
def test_grpc_updates_that_break_the_rules_are_refused_by_name_and_never_counted(coordinator, tmp_path):
    # A device that takes part over gRPC alone submits, in its first round, updates the coordinator
    # must refuse, then an honest one (the global model itself, from one example), then another;
    # an honest data-plane device training slowly keeps that round open meanwhile. In its second
    # round, alone, the rogue submits after the deadline.
    devices = SleepingDevices(coordinator, tmp_path)
    rogue = subprocess.Popen([rogue_device(), "--server", f"127.0.0.1:{coordinator['grpc_port']}",
                              "--key", str(tmp_path / "rogue.key"), "submit-refusals"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        devices.start("slow", shift=0.5, examples=10, rounds=1, sleep_round=1, sleep_seconds=3)
        wait_for("two devices to check in", lambda: checked_in(coordinator) == 2, 30)
        task = create_task(coordinator, tmp_path, rounds=2, per_round=2, min_updates=1, min_available=1,
                           timeout_ms=6000)
        out, err = rogue.communicate(timeout=60)
        assert devices.reports("slow") == [[1, True, ""]]
    finally:
        devices.kill_all()
        if rogue.poll() is None:
            rogue.kill()
            rogue.wait()
    assert rogue.returncode == 0, err
    answers = json.loads(out)
    device, first_round = answers["device_id"], answers["round_id"]
    assert answers["has_data_plane"] is False, answers  # asked for gRPC, given no data plane
    prefix = f"SubmitUpdate for round {first_round} of task '{task}' from device {device} refused: "
    assert answers["other_version"] == {"code": 9, "message": prefix + f"it was trained from model version "
                                        f"'{task}/00', the round's is '{task}/0'"}, answers
    assert answers["other_table"] == {"code": 3, "message": prefix + "the update's tensor 0 is 'weight' float32 "
                                      "[12, 1], the round's model has 'weight' float32 [3, 4] there"}, answers
    assert answers["no_examples"] == {"code": 3, "message": prefix + "example_count 0 is not in [1, 2147483648]"}
    assert answers["nan"] == {"code": 3, "message": prefix + f"update from '{device}': tensor 'weight' element 0 "
                              "(index [0, 0]) is NaN"}, answers
    assert answers["digest"]["code"] == 3 and "digest" in answers["digest"]["message"], answers
    assert answers["honest"] == {"code": 0, "message": ""}, answers
    assert answers["again"] == {"code": 9, "message": prefix + f"device {device}'s update counts in this round "
                                "already"}, answers
    assert answers["replayed_header"]["code"] == 16 and "(a replay)" in answers["replayed_header"]["message"]
    late_round = answers["late_round_id"]
    assert answers["late"] == {"code": 9, "message": f"SubmitUpdate for round {late_round} of task '{task}' from "
                               f"device {device} refused: the device was not selected for it, or it has closed "
                               "(a late or replayed update)"}, answers

    slow = devices.device_id("slow")
    first, second = closed_rounds(coordinator, task, 2, 30)[:2]
    assert (first["round_id"], first["state"], first["contributors"]) == (
        first_round, "ROUND_STATE_COMPLETED", sorted([device, slow])), first
    assert (second["round_id"], second["state"], second["missing"]) == (
        late_round, "ROUND_STATE_FAILED", [device]), second
    # Only the honest update counted, once, with the slow device's, in device-id order.
    updates = {device: (1, INITIAL["weight"]), slow: (10, devices.trained("slow", 1))}
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/1")[1],
                       fedavg(updates[d] for d in sorted(updates)), [7])
    assert http_get(coordinator, "/healthz") == (200, "ok\n")
    _, metrics = http_get(coordinator, "/metrics")
    assert 'torchnative_requests_refused_total{reason="contribution_refused"} 1' in metrics, metrics
    assert [entry["device"] for entry in log_events(coordinator["log"], "update_received")
            if entry["transport"] == "grpc"] == [device]
    assert [(entry["device"], entry["transport"]) for entry in log_events(coordinator["log"], "update_refused")] \
        == [(device, "grpc")]  # the NaN; the other refusals are of the request, not of an update's values
