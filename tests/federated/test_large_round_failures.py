"""Devices killed in the middle of a round's large transfers, as real processes on loopback: one
`kill -9`'d while the hub broadcasts a model of several pieces, and one `kill -9`'d while the hub
is receiving its contribution into the spool file.

Neither moment can be hit by sleeping and hoping, so the victim is stopped (SIGSTOP) at a moment
the test can see, and killed while it is stopped:
- in the broadcast, by a thread of its own that stops the process once its resident memory has
  grown by a quarter of the model: the device allocates (and zero-fills) its broadcast buffer
  only after joining the hub, and holding two of the model's three pieces would take growth of
  nearly the whole model, so it stops after the join and before it has the second piece whole;
  as the hub sends a piece only once it has gone out to every device, no device can have
  the whole model while it is stopped (the test checks that none is training);
- in the reduce, by its trainer, which stops its own process before returning its model; the
  test then lets it run a millisecond at a time until the coordinator's spool file (read through
  /proc/<coordinator>/fd, as the file is unlinked) holds some but not all of its contribution.

Every completed round's model is recomputed with numpy from what the surviving devices saved
they trained (float64 products and sums in device-id order, one rounding to float32) and compared
bit for bit.
"""
import os
import re
import signal
import time

import numpy as np
import pytest

import federation
from federation import (OPEN_ROUND, REPO, PythonDevices, admin_json, assert_weight_bits, checked_in, closed_rounds,
                        create_fedavg_task, fetch_model, http_get, log_events, wait_for)


def broadcast_piece_bytes():
    """The coordinator's kBroadcastPieceBytes, read from its source so that the model below keeps
    needing three pieces if the constant changes."""
    source = (REPO / "server" / "coordinator" / "src" / "task_runner.cpp").read_text()
    found = re.search(r"kBroadcastPieceBytes = uint64_t\{(\d+)\} << (\d+);", source)
    assert found, "kBroadcastPieceBytes is no longer defined as this test expects"
    return int(found.group(1)) << int(found.group(2))


PIECE_BYTES = broadcast_piece_bytes()
# The data plane's segments (dist::ProcessGroupOptions::segment_bytes, which the coordinator
# leaves at its default): a contribution streams to the hub in segments of this size.
SEGMENT_BYTES = 1 << 20

# A Python device (federation.PythonDevices' command line and files) that touches
# LABEL-training<R> as it starts training. MODE:
#   "honest": nothing else;
#   "stop-in-broadcast:<bytes>": a thread stops the process (SIGSTOP) once its resident memory
#       has grown by <bytes> since it registered, touching LABEL-stopping first;
#   "stop-after-training": the trainer stops the process before it returns the trained model.
DEVICE_SCRIPT = r'''
import json, os, pathlib, signal, sys, threading, time
import numpy as np, torch
from torchnative.device import Device
server, key_file, directory, label = sys.argv[1:5]
shift, examples, rounds, mode = float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
directory = pathlib.Path(directory)
device = Device(server, key_file, check_in_wait=60.0)
(directory / f"{label}.id").write_text(device.device_id)

def resident_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

if mode.startswith("stop-in-broadcast:"):
    growth = int(mode.split(":")[1])
    def stop_once_the_broadcast_buffer_grows():
        baseline = resident_bytes()
        while resident_bytes() - baseline < growth:
            time.sleep(0.001)
        (directory / f"{label}-stopping").touch()
        os.kill(os.getpid(), signal.SIGSTOP)
    threading.Thread(target=stop_once_the_broadcast_buffer_grows, daemon=True).start()

def train(state, config):
    round_id = config["round_id"]
    (directory / f"{label}-training{round_id}").touch()
    trained = {name: (t + shift * round_id if t.dtype == torch.float32 else t.clone()) for name, t in state.items()}
    np.save(directory / f"{label}-round{round_id}.npy", trained["weight"].numpy())
    if mode == "stop-after-training":
        os.kill(os.getpid(), signal.SIGSTOP)
    return trained, examples
reports = device.run(train, rounds=rounds)
print(json.dumps([[r.round_id, r.contributed, r.error] for r in reports]))
'''


class SelfStoppingDevices(PythonDevices):
    """Devices running DEVICE_SCRIPT, which a MODE makes stop itself mid-round."""

    script = DEVICE_SCRIPT
    reports_timeout = 120  # rounds of models of tens of MiB

    def start(self, label, *, shift, examples, rounds, mode="honest"):
        return self.launch(label, shift, examples, rounds, mode)

    def stopping(self, label):
        """Whether the device is about to stop itself in the broadcast (it touched LABEL-stopping)."""
        return (self.directory / f"{label}-stopping").exists()


def stopped(pid):
    """Whether every thread of the process is in a group stop (SIGSTOP)."""
    try:
        states = []
        for thread in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{thread}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return False  # a thread came or went meanwhile: look again
    return bool(states) and all(state == "T" for state in states)


def until_stopped(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while not stopped(pid):
        if time.monotonic() > deadline:
            pytest.fail(f"process {pid} did not stop within {timeout} s")
        time.sleep(0.0005)


def spool_files(pid):
    """The coordinator's open spool files: {its fd's /proc path: what the link names}."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue  # closed meanwhile
        if "torchnative-spool-" in target:
            found[f"/proc/{pid}/fd/{fd}"] = target
    return found


def start_coordinator(tmp_path, spool_bytes, spool_directory):
    """federation.start_coordinator with check-ins held for up to a minute instead of 2 s, so that
    devices that have checked in stay available without a gap until a round selects them: with
    2 s, a device between two check-ins when the task starts is left out of its first round."""
    yield from federation.start_coordinator(tmp_path, spool_bytes=spool_bytes, spool_directory=spool_directory,
                                            check_in_wait_bound_ms=60000)


@pytest.fixture
def spool_directory(tmp_path):
    """Where the coordinator started next spools (its data_plane.spool_directory): a directory
    of the test's own."""
    directory = tmp_path / "spool"
    directory.mkdir()
    return directory


# Case 1: a float32 weight just past two pieces, so that the broadcast takes three (the third a
# few KiB), and an integer tensor.
BROADCAST_WEIGHT_SHAPE = (2 * PIECE_BYTES // 4 // 4096 + 1, 4096)
BROADCAST_MODEL_BYTES = 4 * BROADCAST_WEIGHT_SHAPE[0] * BROADCAST_WEIGHT_SHAPE[1] + 8


@pytest.fixture
def broadcast_hub(tmp_path, spool_directory):
    # Each round's two contributions (twice the model each, in float64) stay in the hub's memory.
    yield from start_coordinator(tmp_path, spool_bytes=1 << 30, spool_directory=spool_directory)


@pytest.mark.slow
def test_a_device_killed_mid_broadcast_is_left_out_and_the_rounds_complete_with_the_survivors(
        broadcast_hub, tmp_path):
    coordinator = broadcast_hub
    assert -(-BROADCAST_MODEL_BYTES // PIECE_BYTES) == 3  # pieces the hub broadcasts
    weight = (np.arange(BROADCAST_WEIGHT_SHAPE[0] * BROADCAST_WEIGHT_SHAPE[1], dtype=np.float32) / 7).reshape(
        BROADCAST_WEIGHT_SHAPE)
    initial = {"weight": weight, "steps": np.array([7], dtype=np.int64)}
    devices = SelfStoppingDevices(coordinator, tmp_path)
    try:
        devices.start("a", shift=0.5, examples=10, rounds=2)
        devices.start("b", shift=-0.25, examples=30, rounds=2)
        victim = devices.start("victim", shift=1.0, examples=5, rounds=1,
                               mode=f"stop-in-broadcast:{BROADCAST_MODEL_BYTES // 4}")
        # All three wait before the task exists, so that its first round selects all three; the
        # second needs only the two survivors (min_available 2).
        wait_for("three devices to check in", lambda: checked_in(coordinator) == 3, 60)
        task = create_fedavg_task(coordinator, tmp_path, initial, rounds=2, per_round=3, min_updates=2, min_available=2,
                           timeout_ms=60000)
        wait_for("the victim to stop in the broadcast",
                 lambda: devices.stopping("victim") and stopped(victim.pid), 60)
        # The hub cannot send the second piece whole while the victim is stopped, so nobody has
        # the whole model yet: the round is open and no device is training.
        during = admin_json(coordinator, "rounds", task)
        training = [label for label in ("a", "b", "victim") if devices.training(label, 1)]
        victim.kill()
        assert victim.wait() == -9
        rounds = closed_rounds(coordinator, task, 2, 90)
        reports = {label: devices.reports(label) for label in ("a", "b")}
    finally:
        devices.kill_all()

    a, b, dead = (devices.device_id(label) for label in ("a", "b", "victim"))
    assert [(r["round_id"], r["state"]) for r in during] == [(1, OPEN_ROUND)], during
    assert training == []
    assert coordinator["process"].poll() is None, "the coordinator exited"
    assert http_get(coordinator, "/healthz") == (200, "ok\n")

    # The broadcast goes on to the others past the lost device, which the reduce lists missing:
    # the round completes with the survivors, and the log names the device lost on the way.
    first, second = rounds
    assert (first["round_id"], first["state"]) == (1, "ROUND_STATE_COMPLETED"), first
    assert first["selected"] == sorted([a, b, dead]) and first["missing"] == [dead], first
    assert first["contributors"] == sorted([a, b]), first
    lost = log_events(coordinator["log"], "devices_lost_in_broadcast")
    assert [(event["task"], event["round"], event["devices"]) for event in lost] == [(task, 1, [dead])], lost
    assert log_events(coordinator["log"], "round_failed") == []
    assert log_events(coordinator["log"], "device_dropped") == []  # lost to the kill, not to silence
    assert (second["round_id"], second["state"]) == (2, "ROUND_STATE_COMPLETED"), second
    assert second["selected"] == second["contributors"] == sorted([a, b]) and second["missing"] == [], second
    assert [first["input_model_version"], first["output_model_version"], second["output_model_version"]] == [
        f"{task}/0", f"{task}/1", f"{task}/2"]
    assert reports == {"a": [[1, True, ""], [2, True, ""]], "b": [[1, True, ""], [2, True, ""]]}
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/1")[1], devices.fedavg(["a", "b"], 1), [7])
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/2")[1], devices.fedavg(["a", "b"], 2), [7])

    data_planes = log_events(coordinator["log"], "round_data_plane")
    contribution_bytes = 8 * (BROADCAST_WEIGHT_SHAPE[0] * BROADCAST_WEIGHT_SHAPE[1] + 1)
    assert [(entry["round"], entry["devices"], entry["model_bytes"], entry["bytes_reduced"])
            for entry in data_planes] == [(1, 3, BROADCAST_MODEL_BYTES, 2 * contribution_bytes),
                                          (2, 2, BROADCAST_MODEL_BYTES, 2 * contribution_bytes)], data_planes
    _, metrics = http_get(coordinator, "/metrics")
    # The model went whole to the two survivors in each round; what the victim took is not counted.
    assert f"torchnative_bytes_broadcast_total {4 * BROADCAST_MODEL_BYTES}\n" in metrics
    assert 'torchnative_rounds_total{outcome="completed"} 2' in metrics
    assert 'torchnative_rounds_total{outcome="abandoned"} 0' in metrics


# Case 2: a contribution of exactly 64 segments: the float32 weight's elements and the example
# count, in float64.
REDUCE_WEIGHT_SHAPE = (47, 178481)  # 2**23 - 1 elements
CONTRIBUTION_BYTES = 8 * (REDUCE_WEIGHT_SHAPE[0] * REDUCE_WEIGHT_SHAPE[1] + 1)
CONTRIBUTION_SEGMENTS = CONTRIBUTION_BYTES // SEGMENT_BYTES


@pytest.fixture
def spooling_hub(tmp_path, spool_directory):
    # A one-byte budget: every contribution goes to the spool file, one segment at a time.
    for coordinator in start_coordinator(tmp_path, spool_bytes=1, spool_directory=spool_directory):
        coordinator["spool_directory"] = spool_directory
        yield coordinator


def test_a_device_killed_while_its_spooled_contribution_lands_is_missing_and_its_spool_is_gone(
        spooling_hub, tmp_path):
    coordinator = spooling_hub
    assert CONTRIBUTION_BYTES == 64 * SEGMENT_BYTES
    weight = (1 + np.arange(REDUCE_WEIGHT_SHAPE[0] * REDUCE_WEIGHT_SHAPE[1], dtype=np.float32) / 1024).reshape(
        REDUCE_WEIGHT_SHAPE)
    initial = {"weight": weight, "steps": np.array([3], dtype=np.int64)}
    pid = coordinator["process"].pid
    devices = SelfStoppingDevices(coordinator, tmp_path)
    spool = None
    try:
        devices.start("a", shift=0.5, examples=10, rounds=1)
        devices.start("b", shift=-0.25, examples=30, rounds=1)
        victim = devices.start("victim", shift=1.0, examples=5, rounds=1, mode="stop-after-training")
        task = create_fedavg_task(coordinator, tmp_path, initial, rounds=1, per_round=3, min_updates=2, min_available=3,
                           timeout_ms=60000)
        wait_for("the victim to stop after training",
                 lambda: devices.training("victim", 1) and stopped(victim.pid), 60)
        selected = sorted(devices.device_id(label) for label in ("a", "b", "victim"))
        dead = devices.device_id("victim")
        # The hub's spool file holds contribution r at (r - 1) * CONTRIBUTION_BYTES (rank 0 is the
        # hub, which contributes nothing), each written a segment at a time as it lands.
        region = (selected.index(dead)) * CONTRIBUTION_BYTES
        links = wait_for("the hub's spool file", lambda: spool_files(pid), 30)
        assert len(links) == 1, links
        (link, target), = links.items()
        assert target.startswith(str(coordinator["spool_directory"]) + "/torchnative-spool-"), target
        assert target.endswith(" (deleted)"), target  # unlinked as soon as it was made
        spool = os.open(link, os.O_RDONLY)

        def landed():
            # The victim's values (5 * (weight + 1)) are all non-zero; what has not landed reads as
            # zeros, or not at all past the end of the file.
            return sum(os.pread(spool, 8, region + s * SEGMENT_BYTES).strip(b"\0") != b""
                       for s in range(CONTRIBUTION_SEGMENTS))

        # A millisecond at a time, until the hub holds part of the victim's contribution.
        steps, deadline = 0, time.monotonic() + 60
        while landed() == 0:
            assert time.monotonic() < deadline, f"nothing of the victim's contribution landed in {steps} steps"
            os.kill(victim.pid, signal.SIGCONT)
            time.sleep(0.001)
            os.kill(victim.pid, signal.SIGSTOP)
            until_stopped(victim.pid)
            steps += 1
        landed_segments = landed()
        during = admin_json(coordinator, "rounds", task)
        victim.kill()
        assert victim.wait() == -9
        entry = closed_rounds(coordinator, task, 1, 90)[0]
        reports = {label: devices.reports(label) for label in ("a", "b")}
    finally:
        devices.kill_all()
        if spool is not None:
            os.close(spool)

    assert 0 < landed_segments < CONTRIBUTION_SEGMENTS, (landed_segments, steps)
    assert [(r["round_id"], r["state"]) for r in during] == [(1, OPEN_ROUND)], during
    a, b = devices.device_id("a"), devices.device_id("b")
    assert reports == {"a": [[1, True, ""]], "b": [[1, True, ""]]}
    assert (entry["round_id"], entry["state"]) == (1, "ROUND_STATE_COMPLETED"), entry
    assert entry["selected"] == selected and entry["contributors"] == sorted([a, b]), entry
    assert entry["missing"] == [dead], entry
    assert entry["output_model_version"] == f"{task}/1", entry
    assert_weight_bits(fetch_model(coordinator, tmp_path, f"{task}/1")[1], devices.fedavg(["a", "b"], 1), [3])

    # Every byte counted came through the spool: both survivors' contributions and the part of the
    # victim's that landed before it died, which the round leaves out.
    data_plane, = log_events(coordinator["log"], "round_data_plane")
    assert data_plane["bytes_reduced"] == 2 * CONTRIBUTION_BYTES, data_plane
    assert 2 * CONTRIBUTION_BYTES + landed_segments * SEGMENT_BYTES <= data_plane["spooled_bytes"] \
        < 3 * CONTRIBUTION_BYTES, (data_plane, landed_segments)
    # The kill ended the victim's part, not its liveness window, and nothing was refused.
    assert log_events(coordinator["log"], "device_dropped") == []
    assert log_events(coordinator["log"], "update_refused") == []

    # No spool file outlives the round: the hub closes it (its only name was unlinked at once), and
    # nothing is left in the spool directory or the state directory.
    wait_for("the hub to close its spool file", lambda: not spool_files(pid), 30)
    assert list(coordinator["spool_directory"].iterdir()) == []
    assert [path for path in (tmp_path / "state").rglob("*") if "spool" in path.name] == []
    assert coordinator["process"].poll() is None, "the coordinator exited"
    assert http_get(coordinator, "/healthz") == (200, "ok\n")
