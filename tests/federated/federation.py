"""What the federated tests share: the executables, safetensors files written and read with
numpy alone, bounded waits, a running coordinator with an administrator key, and Python device
processes whose training a test can recompute.

The executables come from .venv/bin (`make setup`), or from $TORCHNATIVE_BIN (e.g. a directory
of links to the sanitizer build's); the test-only rogue device from the build tree, or from
$TORCHNATIVE_TEST_BIN.
"""
import json
import os
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("TORCHNATIVE_BIN", REPO / ".venv" / "bin"))
PYTHON = str(REPO / ".venv" / "bin" / "python")  # with torchnative.device installed (`make setup`)
TEST_BIN = Path(os.environ.get("TORCHNATIVE_TEST_BIN", REPO / "build" / "tests" / "federated"))
SAFETENSORS_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64}


def tool(name):
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make setup`")
    return str(path)


def rogue_device():
    path = TEST_BIN / "federated_rogue_device"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make setup`")
    return str(path)


def write_safetensors(path, tensors):
    names = {np.dtype(dtype): name for name, dtype in SAFETENSORS_DTYPES.items()}
    header, data = {}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def read_safetensors(path):
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    header.pop("__metadata__", None)
    data = raw[8 + length:]
    return {name: np.frombuffer(data[entry["data_offsets"][0]:entry["data_offsets"][1]],
                                dtype=SAFETENSORS_DTYPES[entry["dtype"]]).reshape(entry["shape"])
            for name, entry in header.items()}


def wait_for(what, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


# The signal lines of /proc/PID/status: which signals are blocked, ignored, pending for the thread
# (SigPnd) and for the process (ShdPnd), and caught.
SIGNAL_LINES = ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
GDB = "/usr/bin/gdb"


def signal_state_and_stacks(pid):
    """Why process `pid` did not end at a signal: the signal lines of its status and of each of
    its threads', and every thread's native backtrace (gdb, bounded). A blocked or ignored signal
    is inherited across fork and exec, so a test's process can be deaf to one that its test sends."""
    lines = []
    try:
        for task in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{task}/status") as status:
                fields = dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
            lines.append(f"thread {task} ({fields.get('Name', '?')}): " +
                         " ".join(f"{name} {fields.get(name, '?')}" for name in SIGNAL_LINES))
    except OSError as error:
        lines.append(f"/proc/{pid}: {error}")
    try:
        # Attaching to a device took about 4 s (2026-12-07); 40 s leaves a test that waited 30 s
        # for its process within pytest.ini's 120 s.
        gdb = subprocess.run([GDB, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=40)
        lines.append(gdb.stdout + gdb.stderr)
    except (OSError, subprocess.TimeoutExpired) as error:
        lines.append(f"gdb: {error}")
    return "\n".join(lines)


def communicate_within(process, timeout, what):
    """process.communicate(timeout=timeout): (stdout, stderr) once it has ended. If it has not by
    then, the test fails with `what`, the process's signal state and stacks
    (signal_state_and_stacks) and what it wrote; it is killed either way."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        state = signal_state_and_stacks(process.pid)
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"{what}: still running after {timeout} s\n{state}\nstdout: {out}\nstderr: {err}")


def admin_json(coordinator, *arguments):
    result = subprocess.run(coordinator["admin"] + list(arguments), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def run_device_rounds(coordinator, tmp_path, task, devices, rounds, grpc_devices=0):
    """Runs `devices` torchnative-devices (reports in tmp_path/reports) until the task has `rounds`
    completed rounds; returns the task's rounds once it has. `grpc_devices` of them take part over
    gRPC alone (--round-transport grpc, a process of their own), the others over the data plane."""
    fleets = [(devices - grpc_devices, "data-plane", "keys"), (grpc_devices, "grpc", "keys-grpc")]
    processes = [
        subprocess.Popen(
            [tool("torchnative-device"), "--server", f"127.0.0.1:{coordinator['grpc_port']}",
             "--key-dir", str(tmp_path / keys), "--devices", str(count), "--rounds", str(rounds),
             "--report-dir", str(tmp_path / "reports"), "--check-in-wait-ms", "2000", "--round-transport", transport],
            stderr=subprocess.PIPE, text=True)
        for count, transport, keys in fleets if count > 0]
    try:
        def completed_rounds():
            listed = admin_json(coordinator, "rounds", task)
            done = [r for r in listed if r["state"] == "ROUND_STATE_COMPLETED"]
            return listed if len(done) == rounds else None

        listed = wait_for(f"{rounds} completed rounds", completed_rounds, 40)
        for process in processes:
            _, device_log = process.communicate(timeout=20)
            assert process.returncode == 0, device_log
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return listed


def free_port():
    """A loopback port free now, for a process that must be told its port before it starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_get(coordinator, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{coordinator['http_port']}{path}", timeout=10) as response:
        return response.status, response.read().decode()


def launch_coordinator(tmp_path, grpc_port=0, log_name="coordinator.log", spool_bytes=None,
                       heartbeat_interval_ms=None, tls=None, spool_directory=None, check_in_wait_bound_ms=2000,
                       data_plane_enabled=True, transfer_limits=None):
    """Starts a coordinator on tmp_path's state directory and administrator key (both made on first
    use, so a second launch resumes the first's state); returns its admin command line, ports,
    process and log. spool_bytes: the hub's data_plane.spool_bytes (past it, contributions are
    spooled to disk); heartbeat_interval_ms: what devices are told to keep to (a device silent for
    three intervals is presumed gone); tls: the configuration's "tls" object
    ({"certificate_chain": PEM file, "private_key": PEM file}), which makes the gRPC port TLS only
    (the admin command line returned is then plaintext: add "--tls-ca FILE" to it);
    spool_directory: the hub's data_plane.spool_directory; check_in_wait_bound_ms: how long a
    CheckIn is held (a device between two check-ins when a task starts misses its first round);
    data_plane_enabled: False puts every device of every round on gRPC alone; transfer_limits: the
    configuration's "transfer_limits" object (max_message_bytes, max_chunk_bytes, ...)."""
    admin_key = tmp_path / "admin.key"
    public_key = subprocess.run([tool("torchnative-admin"), "--key", str(admin_key), "public-key"],
                                check=True, capture_output=True, text=True).stdout.strip()
    config = tmp_path / "coordinator.json"
    data_plane = {"host": "127.0.0.1", "join_window_ms": 10000, "enabled": data_plane_enabled}
    if spool_bytes is not None:
        data_plane["spool_bytes"] = spool_bytes
    if spool_directory is not None:
        data_plane["spool_directory"] = str(spool_directory)
    settings = {
        "listen": f"127.0.0.1:{grpc_port}", "http_listen": "127.0.0.1:0", "state_directory": str(tmp_path / "state"),
        "admin_public_keys": [public_key], "check_in_wait_bound_ms": check_in_wait_bound_ms,
        "data_plane": data_plane}
    if heartbeat_interval_ms is not None:
        settings["heartbeat_interval_ms"] = heartbeat_interval_ms
    if tls is not None:
        settings["tls"] = tls
    if transfer_limits is not None:
        settings["transfer_limits"] = transfer_limits
    config.write_text(json.dumps(settings))
    log_path = tmp_path / log_name
    with open(log_path, "w") as log:
        process = subprocess.Popen([tool("torchnative-coordinator"), "--config", str(config)], stderr=log)

    def listening():
        entries = log_events(log_path, "listening")
        if entries:
            return entries[0]
        assert process.poll() is None, f"the coordinator exited: {log_path.read_text()}"
        return None

    ports = wait_for("the coordinator to listen", listening, 10)
    admin = [tool("torchnative-admin"), "--server", f"127.0.0.1:{ports['grpc_port']}", "--key", str(admin_key)]
    return {"admin": admin, "grpc_port": ports["grpc_port"], "http_port": ports["http_port"],
            "process": process, "log": log_path}


def start_coordinator(tmp_path, **options):
    """Starts a coordinator (launch_coordinator's options); yields what launch_coordinator returns
    and kills it afterwards."""
    coordinator = launch_coordinator(tmp_path, **options)
    yield coordinator
    process = coordinator["process"]
    if process.poll() is None:
        process.kill()
        process.wait()


OPEN_ROUND = "ROUND_STATE_TRAINING"  # how ListRounds shows a round whose devices are training
# How ListRounds shows a round that has closed (an open one is TRAINING, then AGGREGATING).
CLOSED_ROUND_STATES = ("ROUND_STATE_COMPLETED", "ROUND_STATE_FAILED", "ROUND_STATE_INTERRUPTED")


def create_fedavg_task(coordinator, tmp_path, initial, *, rounds, per_round, min_updates, min_available,
                       timeout_ms):
    """A FedAvg task from the tensors `initial` (written to tmp_path); its id."""
    write_safetensors(tmp_path / "initial.safetensors", initial)
    return admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", str(rounds),
                      "--devices-per-round", str(per_round), "--min-updates", str(min_updates),
                      "--min-available", str(min_available), "--round-timeout-ms", str(timeout_ms),
                      "--model", str(tmp_path / "initial.safetensors"))["task_id"]


def closed_rounds(coordinator, task, count, timeout):
    """The task's rounds (ListRounds) once at least `count` of them have closed."""
    def closed():
        rounds = admin_json(coordinator, "rounds", task)
        done = [r for r in rounds if r["state"] in CLOSED_ROUND_STATES]
        return rounds if len(done) >= count else None
    return wait_for(f"{count} closed rounds of {task}", closed, timeout)


def fetch_model(coordinator, directory, version):
    """The stored model version's bytes as the admin CLI writes them into `directory`, and its tensors."""
    path = directory / (version.replace("/", "-") + ".safetensors")
    assert admin_json(coordinator, "fetch-model", version, "--out", str(path))["model_version"] == version
    return path.read_bytes(), read_safetensors(path)


def checked_in(coordinator):
    """How many devices wait in a CheckIn now (/metrics)."""
    _, metrics = http_get(coordinator, "/metrics")
    return int(next(line.split()[1] for line in metrics.splitlines()
                    if line.startswith("torchnative_devices_checked_in ")))


def log_events(log, name):
    """The coordinator log's `name` events, in order; every line of the log must be JSON (gRPC's
    own diagnostics included). A last line without its newline is still being written."""
    lines = log.read_text().split("\n")[:-1]
    return [entry for entry in map(json.loads, lines) if entry["event"] == name]


def fedavg(contributions):
    """FedAvg as the hub must compute it: float64 products and sums over (examples, values) in
    device-id order (the hub's ascending ranks), divided and rounded to float32 once."""
    weighted, total = None, np.float64(0)
    for examples, values in contributions:
        product = np.float64(examples) * np.asarray(values, dtype=np.float64)
        weighted = product if weighted is None else weighted + product
        total += np.float64(examples)
    return (weighted / total).astype(np.float32)


def assert_weight_bits(model, expected, steps):
    """The stored float32 `weight` has exactly the bits of `expected`; the integer `steps` keeps the
    global's values."""
    assert model["weight"].dtype == np.float32 and model["weight"].shape == expected.shape
    assert np.array_equal(model["weight"].view(np.uint32), expected.view(np.uint32)), (
        f"{np.count_nonzero(model['weight'].view(np.uint32) != expected.view(np.uint32))} elements differ")
    assert model["steps"].tolist() == steps


class PythonDevices:
    """Python devices (torchnative.device.Device), each a process of `script` under a label, sharing
    one directory for keys, ids, markers and what they trained. A subclass sets `script` and starts
    devices with `launch`, which runs it as
        python -c SCRIPT SERVER KEY_FILE DIRECTORY LABEL SHIFT EXAMPLES ROUNDS OPTION...
    The script writes its device id to LABEL.id, trains weight + SHIFT * round_id (integer tensors
    unchanged) on EXAMPLES examples, saves the weight it trained in round R to LABEL-round<R>.npy
    before contributing it, touches LABEL-training<R> when a test is to see it training round R,
    and once it has taken part in ROUNDS rounds (0: until killed) prints its round reports as JSON
    [[round_id, contributed, error], ...]."""

    reports_timeout = 60  # seconds for a device to finish its rounds once a test waits for them

    def __init__(self, coordinator, tmp_path):
        self.server = f"127.0.0.1:{coordinator['grpc_port']}"
        self.directory = tmp_path / "devices"
        self.directory.mkdir()
        self.examples, self.processes = {}, {}

    def launch(self, label, shift, examples, rounds, *options):
        """Starts device `label`, with the script's own `options` after ROUNDS; returns its process."""
        self.examples[label] = examples
        self.processes[label] = subprocess.Popen(
            [PYTHON, "-c", self.script, self.server, str(self.directory / f"{label}.key"), str(self.directory),
             label, str(shift), str(examples), str(rounds), *map(str, options)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return self.processes[label]

    def device_id(self, label):
        path = self.directory / f"{label}.id"
        return wait_for(f"device {label} to register", lambda: path.exists() and path.read_text(), 30)

    def training(self, label, round_id):
        return (self.directory / f"{label}-training{round_id}").exists()

    def reports(self, label):
        process = self.processes[label]
        out, err = process.communicate(timeout=self.reports_timeout)
        assert process.returncode == 0, err
        return json.loads(out)

    def trained(self, label, round_id):
        trained = np.load(self.directory / f"{label}-round{round_id}.npy")
        assert trained.dtype == np.float32
        return trained

    def fedavg(self, labels, round_id):
        """The weighted average of what `labels` trained in the round, as the hub must compute it."""
        return fedavg((self.examples[label], self.trained(label, round_id))
                      for label in sorted(labels, key=self.device_id))

    def kill_all(self):
        kill_all(self.processes.values())


def kill_all(processes):
    """Ends every process of `processes` still running and reaps it. SIGKILL ends a process a test
    has stopped (SIGSTOP) as well: it needs no SIGCONT first."""
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()
