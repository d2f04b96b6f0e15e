"""torchnative-device as a daemon: it prints its id once registered and a line per round it was
selected for; it exits with a stated status once no task is running (or waits for the next task
with --when-no-task wait); it retries registration while its coordinator cannot be reached, within
--register-timeout-ms; SIGTERM and SIGINT end it at once, even while a CheckIn is held."""
import json
import signal
import subprocess
import threading
import time
from collections import Counter
from datetime import datetime

import numpy as np
import pytest

from federation import (PYTHON, admin_json, checked_in, communicate_within, create_fedavg_task, free_port,
                        launch_coordinator, log_events, start_coordinator, tool, wait_for)

MODEL = {"weight": np.zeros(4, dtype=np.float32), "steps": np.array([0], dtype=np.int64)}
MODEL_BYTES = 4 * 4 + 8
CONTRIBUTION_BYTES = (4 + 1) * 8  # float64: every floating element, then the example count
EXIT_WORK_ENDED_FIRST = 3


class Device:
    """A torchnative-device process whose stderr lines (JSON) are collected as they come, each with
    the wall-clock time it arrived (arrived_at, in step with lines)."""

    def __init__(self, server, tmp_path, *flags, keys="keys"):
        self.process = subprocess.Popen(
            [tool("torchnative-device"), "--server", server, "--key-dir", str(tmp_path / keys), *flags],
            stderr=subprocess.PIPE, text=True)
        self.lines, self.arrived_at = [], []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for text in self.process.stderr:
            self.arrived_at.append(time.time())
            self.lines.append(json.loads(text))

    def arrival(self, key):
        """When the first line with `key` arrived (time.time())."""
        return next(at for line, at in zip(list(self.lines), list(self.arrived_at)) if key in line)

    def having(self, key):
        return [line for line in list(self.lines) if key in line]

    def wait_for_line(self, key, timeout=30):
        return wait_for(f"a device line with {key!r}", lambda: self.having(key), timeout)

    def exit_status(self, timeout=60):
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return self.process.returncode

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def coordinator(tmp_path):
    yield from start_coordinator(tmp_path)


def grpc_address(coordinator):
    return f"127.0.0.1:{coordinator['grpc_port']}"


def test_devices_selected_for_fewer_rounds_than_asked_exit_3_once_the_task_has_ended(coordinator, tmp_path):
    # Three rounds of two devices out of three: six selections, so at least one device takes part
    # in fewer than the three rounds it asks for, and is told when the task has completed.
    devices = Device(grpc_address(coordinator), tmp_path, "--devices", "3", "--rounds", "3",
                     "--check-in-wait-ms", "2000")
    try:
        task = create_fedavg_task(coordinator, tmp_path, MODEL, rounds=3, per_round=2, min_updates=2,
                                  min_available=3, timeout_ms=20000)
        assert devices.exit_status() == EXIT_WORK_ENDED_FIRST, devices.lines
    finally:
        devices.kill()

    registered = {line["device"] for line in devices.having("registered_with")}
    assert len(registered) == 3, devices.lines
    rounds = devices.having("round")
    assert sorted(line["round"] for line in rounds) == [1, 1, 2, 2, 3, 3], rounds
    for line in rounds:
        assert line["device"] in registered and line["task"] == task, line
        assert (line["selected"], line["trained"], line["contributed"], line["error"]) == (True, True, True, ""), line
        assert (line["bytes_received"], line["bytes_sent"]) == (MODEL_BYTES, CONTRIBUTION_BYTES), line
    exiting = devices.having("exiting")
    assert exiting and all(line["contributed_rounds"] < 3 for line in exiting), devices.lines
    for line in exiting:
        ended = [e for e in devices.having("ended") if e["device"] == line["device"]]
        assert ended == [{"device": line["device"], "task": task, "ended": "completed", "reason": "all 3 rounds completed"}], devices.lines


def test_with_when_no_task_wait_a_device_takes_part_in_the_next_task(coordinator, tmp_path):
    device = Device(grpc_address(coordinator), tmp_path, "--when-no-task", "wait", "--check-in-wait-ms", "1000")
    try:
        first = create_fedavg_task(coordinator, tmp_path, MODEL, rounds=1, per_round=1, min_updates=1,
                                   min_available=1, timeout_ms=20000)
        device.wait_for_line("round")
        # Once the first task has ended, a CheckIn answered without work says no task is running;
        # the device says so and waits on, and the next task's round finds it.
        (waiting, *_) = device.wait_for_line("waiting")
        assert (waiting["waiting"], waiting["contributed_rounds"]) == ("no task is running", 1), waiting
        assert [line["task"] for line in device.having("ended")] == [first], device.lines
        second = create_fedavg_task(coordinator, tmp_path, MODEL, rounds=1, per_round=1, min_updates=1,
                                    min_available=1, timeout_ms=20000)
        wait_for("a round of the second task", lambda: any(
            line["task"] == second and line["contributed"] for line in device.having("round")), 30)
        device.process.send_signal(signal.SIGTERM)
        assert device.exit_status() == 0, device.lines
    finally:
        device.kill()
    assert not device.having("exiting"), device.lines
    # Said once per wait: a device told of the end by one CheckIn and held by its next through the
    # same end said it twice under load (CI of 2026-12-06 20:24; client_test's WorkEnd tests replay
    # it), when the coordinator recorded the end in its store before it counted it on its board;
    # since ca9e166 it counts the end in the store's critical section that records it.
    said = Counter(line["contributed_rounds"] for line in device.having("waiting"))
    assert said[1] == 1 and set(said.values()) == {1}, device.lines


def logged_at(coordinator, event):
    """When the coordinator logged its one `event` line (time.time())."""
    (entry,) = log_events(coordinator["log"], event)
    return datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("ending", ["completed", "stopped"])
def test_devices_learn_that_their_task_ended_at_once_not_when_their_check_in_wait_passes(tmp_path, ending):
    # CheckIns are held for a minute: a device that learned of the end only when its wait passed
    # would still be waiting long after the bound below.
    for coordinator in start_coordinator(tmp_path, check_in_wait_bound_ms=60000):
        server = grpc_address(coordinator)
        exiting = Device(server, tmp_path, "--devices", "3", "--check-in-wait-ms", "60000")
        waiting = Device(server, tmp_path, "--when-no-task", "wait", "--check-in-wait-ms", "60000", keys="waiting")
        try:
            wait_for("4 devices held in a CheckIn", lambda: checked_in(coordinator) == 4, 30)
            if ending == "completed":
                # One round of 2 of the 4 devices: 2 are held through it, 2 check in again as it ends.
                create_fedavg_task(coordinator, tmp_path, MODEL, rounds=1, per_round=2, min_updates=2,
                                   min_available=4, timeout_ms=20000)
                wait_for("the task to complete", lambda: log_events(coordinator["log"], "task_finished"), 30)
            else:
                # A round of 5 never starts: every device is held through the task until it is stopped.
                task = create_fedavg_task(coordinator, tmp_path, MODEL, rounds=1, per_round=5, min_updates=5,
                                          min_available=5, timeout_ms=20000)
                admin_json(coordinator, "stop-task", task)
                wait_for("the task to stop", lambda: log_events(coordinator["log"], "task_stopped"), 30)
            ended = logged_at(coordinator, "task_finished" if ending == "completed" else "task_stopped")
            assert exiting.exit_status(timeout=15) == 0, exiting.lines
            exited = time.time()
            waiting.wait_for_line("waiting", timeout=15)
            said_waiting = waiting.arrival("waiting")
        finally:
            exiting.kill()
            waiting.kill()
    print(f"task {ending}: the devices exited {exited - ended:.3f} s after its end, "
          f"the --when-no-task wait device said so after {said_waiting - ended:.3f} s")
    assert len(exiting.having("exiting")) == 3, exiting.lines
    # Generous for a loaded machine; the figure is recorded in docs/measurements.md.
    assert exited - ended < 5 and said_waiting - ended < 5, (exited - ended, said_waiting - ended)


def test_a_device_between_two_check_ins_when_the_task_ends_learns_of_it_at_its_next_one(tmp_path):
    """A device told a task was running, never selected, that is between two CheckIns when the
    task ends (no hold for the end to answer): its next CheckIn says it saw a task running, and is
    answered at once that none is. Frozen (SIGSTOP) once told, through the end, so it is certainly
    between two CheckIns then; before CheckInPayload.saw_running_task it was held for its whole
    wait (4 s here) before it learned, and exited 4.0 s after it was resumed."""
    wait_ms = 4000
    for coordinator in start_coordinator(tmp_path, check_in_wait_bound_ms=60000):
        device = Device(grpc_address(coordinator), tmp_path, "--check-in-wait-ms", str(wait_ms))
        try:
            wait_for("the device held in a CheckIn", lambda: checked_in(coordinator) == 1, 30)
            # A round of 5 never starts, so the task runs until it is stopped.
            task = create_fedavg_task(coordinator, tmp_path, MODEL, rounds=1, per_round=5, min_updates=5,
                                      min_available=5, timeout_ms=20000)
            # Its hold from before the task has passed and it holds another: it has been told a task runs.
            time.sleep(wait_ms / 1000 + 0.5)
            device.process.send_signal(signal.SIGSTOP)
            # That hold passes too, answered "a task is running" into the frozen device's socket.
            wait_for("the frozen device's hold to pass", lambda: checked_in(coordinator) == 0, wait_ms / 1000 + 10)
            admin_json(coordinator, "stop-task", task)
            wait_for("the task to stop", lambda: log_events(coordinator["log"], "task_stopped"), 30)
            resumed = time.time()
            device.process.send_signal(signal.SIGCONT)
            assert device.exit_status(timeout=30) == 0, device.lines
            exited = time.time()
        finally:
            device.process.send_signal(signal.SIGCONT)
            device.kill()
    print(f"the device exited {exited - resumed:.3f} s after it was resumed")
    assert device.having("exiting") and not device.having("round"), device.lines
    assert exited - resumed < wait_ms / 2000, exited - resumed


def test_a_device_started_before_its_coordinator_registers_once_it_listens(tmp_path):
    port = free_port()
    device = Device(f"127.0.0.1:{port}", tmp_path, "--check-in-wait-ms", "1000")
    coordinator = None
    try:
        failure = device.wait_for_line("register_failed")[0]
        assert "Register failed: 14 " in failure["register_failed"] and failure["retry_in_ms"] >= 0, failure
        coordinator = launch_coordinator(tmp_path, grpc_port=port)
        registered = device.wait_for_line("registered_with", timeout=60)[0]
        assert registered["device"].startswith("dev-") and registered["number"] == 0, registered
        device.process.send_signal(signal.SIGTERM)
        assert device.exit_status() == 0, device.lines
    finally:
        device.kill()
        if coordinator is not None:
            coordinator["process"].kill()
            coordinator["process"].wait()
    failures = [line["failures"] for line in device.having("register_failed")]
    assert failures == list(range(1, len(failures) + 1)), failures


def test_a_device_gives_up_registering_after_register_timeout_ms_with_status_1(tmp_path):
    device = Device(f"127.0.0.1:{free_port()}", tmp_path, "--register-timeout-ms", "1500")
    try:
        assert device.exit_status() == 1, device.lines
    finally:
        device.kill()
    # The first attempt fails at once with the operating system's reason; later ones wait for a
    # connection within what is left of the bound.
    first = device.having("register_failed")[0]["register_failed"]
    assert first.startswith("Register failed: 14 ") and "Connection refused" in first, first
    (fatal,) = device.having("fatal")
    assert fatal["fatal"].startswith("Register failed: "), fatal


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_device_held_in_a_check_in_at_once(tmp_path, signal_number):
    # The coordinator would hold each CheckIn for a minute.
    for coordinator in start_coordinator(tmp_path, check_in_wait_bound_ms=60000):
        device = Device(grpc_address(coordinator), tmp_path, "--check-in-wait-ms", "60000")
        try:
            device.wait_for_line("registered_with")
            wait_for("the device's CheckIn to be held", lambda: checked_in(coordinator) == 1, 30)
            sent = time.monotonic()
            device.process.send_signal(signal_number)
            status = device.exit_status(timeout=30)
            seconds = time.monotonic() - sent
        finally:
            device.kill()
        print(f"{signal.Signals(signal_number).name} to a device held in a CheckIn: exited in {seconds:.3f} s")
        assert status == 0, device.lines
        # The issue asks for 1 s; the bound is generous for a loaded machine, the figure is recorded.
        assert seconds < 5, seconds


# A torchnative.device.Device of SERVER and KEY_FILE, with when_no_task WHEN, asked for 3 rounds of
# training that adds 1 to every float; prints [[round_id, contributed], ...] once run returns.
PYTHON_DEVICE = """
import json, sys
from torchnative.device import Device
server, key_file, when = sys.argv[1:4]
device = Device(server, key_file, check_in_wait=1.0, when_no_task=when)
print(device.device_id, flush=True)
train = lambda state, config: ({name: t + 1 if t.is_floating_point() else t for name, t in state.items()}, 5)
print(json.dumps([[r.round_id, r.contributed] for r in device.run(train, rounds=3)]))
"""


def python_device(coordinator, tmp_path, when):
    return subprocess.Popen([PYTHON, "-c", PYTHON_DEVICE, grpc_address(coordinator), str(tmp_path / "python.key"), when],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_python_device_told_no_task_is_running_returns_the_rounds_it_had(coordinator, tmp_path):
    device = python_device(coordinator, tmp_path, "exit")
    try:
        create_fedavg_task(coordinator, tmp_path, MODEL, rounds=1, per_round=1, min_updates=1, min_available=1,
                           timeout_ms=20000)
        out, err = device.communicate(timeout=60)
    finally:
        device.kill()
        device.wait()
    assert device.returncode == 0, err
    assert json.loads(out.splitlines()[1]) == [[1, True]], out


def test_ctrl_c_ends_a_python_device_held_in_a_check_in_at_once(tmp_path):
    for coordinator in start_coordinator(tmp_path, check_in_wait_bound_ms=60000):
        device = python_device(coordinator, tmp_path, "wait")
        try:
            device.stdout.readline()  # its id: registered
            wait_for("the device's CheckIn to be held", lambda: checked_in(coordinator) == 1, 30)
            sent = time.monotonic()
            device.send_signal(signal.SIGINT)
            _, err = communicate_within(device, 30, "the Python device after SIGINT")
            seconds = time.monotonic() - sent
        finally:
            device.kill()
            device.wait()
        print(f"SIGINT to a Python device held in a CheckIn: exited in {seconds:.3f} s")
        assert "KeyboardInterrupt" in err, err
        assert seconds < 5, seconds


def test_help_states_every_exit_status():
    usage = subprocess.run([tool("torchnative-device"), "--help"], capture_output=True, text=True, timeout=30).stdout
    text = " ".join(usage.split())
    for status in ("Exit status 0 when", "1 when a device gave up", "2 for a usage error", "3 when the work ended first"):
        assert status in text, text
