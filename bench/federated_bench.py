"""Federated rounds on loopback, one coordinator and one device process per case, in one run.

torchnative-coordinator hosts the rounds; torchnative-device runs N devices as threads of one
process (one shared gRPC channel, each device its own identity, store connection and connection
to the hub). Cases, FedAvg: 10, 100 and 1,000 devices with a 1 MiB float32 model, 10 devices
with 100 MiB and 1 GiB models; the robust strategies, which read each kept contribution apart
instead of a sum: fedmedian and multi_krum with 10 devices and 100 MiB (--quick: 10 and 100
devices with 1 MiB, 10 with 100 MiB, fewer rounds).

Per case: round wall time (the coordinator's round_started to round_completed log lines),
median [min..max] over the rounds; the hub's phases from its round_data_plane lines (join =
rendezvous of the data plane, broadcast, reduce = deadline reduce until the last contribution
landed, aggregate = the strategy's pass, which folds the kept contributions as it reads the sum,
fold = the folding alone); coordinator CPU seconds per round (utime + stime from
/proc/<pid>/stat, read when this script sees each round start and end in the log) and peak RSS
(VmHWM) against the model size; the device process's peak RSS (its VmHWM, last read while it
ran). Aggregation throughput = contribution bytes the hub folded / fold seconds, next to this
machine's memory bandwidth measured in the same run (a numpy copy of 512 MiB: bytes copied per
second). Not a test: nothing here asserts a time.

Secure aggregation (issue 20 point 6, SECURE_CASES; --secure runs them alone): a plaintext FedAvg
round against a secure one (SecAgg+) at 10, 100 and 500 devices with 1 MiB, 10 with 100 MiB, on
the data plane, and 10 and 100 devices with 1 MiB over gRPC alone: round wall time, coordinator
CPU s per round, device-process CPU s per device and round (wait4's rusage from every device
waiting in CheckIn to the process's exit), TCP payload bytes per device and round on the devices'
connections (WireBytes: the kernel's per-socket counters), each as a ratio to plaintext, and how
the per-device figures grow from the fewest devices to the most.

usage: federated_bench.py [--bin DIR] [--quick] [--devices N] [--secure]
"""
import argparse
import json
import math
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20
TENSOR_BYTES = 64 * MiB  # the models are layers of at most this many bytes, as real ones are
TICKS = os.sysconf("SC_CLK_TCK")
# The coordinator's address for the devices (loopback, as 127.0.0.1; WireBytes counts its sockets).
DEVICE_HOST = "127.0.0.2"

# (devices, model bytes, rounds, rounds with --quick or None to skip it then, strategy, its parameters,
# how the devices take part: torchnative-device --round-transport)
CASES = [(10, MiB, 5, 2, "fedavg", {}, "data-plane"), (100, MiB, 3, 2, "fedavg", {}, "data-plane"),
         (1000, MiB, 3, None, "fedavg", {}, "data-plane"), (10, 100 * MiB, 2, 1, "fedavg", {}, "data-plane"),
         (10, 1024 * MiB, 1, None, "fedavg", {}, "data-plane"), (10, 100 * MiB, 2, None, "fedmedian", {}, "data-plane"),
         (10, 100 * MiB, 2, None, "multi_krum", {"f": 2, "m": 4}, "data-plane"),
         (100, MiB, 3, 2, "fedavg", {}, "grpc"), (10, 100 * MiB, 2, None, "fedavg", {}, "grpc")]
# Secure aggregation (issue 20 point 6): each case runs a plaintext FedAvg task and then a secure one
# (SecAgg+, docs/secure_aggregation.md) over the same devices, model and transport:
# (devices, model bytes, rounds, rounds with --quick or None to skip it then, transport).
SECURE_CASES = [(10, MiB, 3, 2, "data-plane"), (100, MiB, 3, 2, "data-plane"), (500, MiB, 2, None, "data-plane"),
                (10, 100 * MiB, 2, 1, "data-plane"), (10, MiB, 3, None, "grpc"), (100, MiB, 2, None, "grpc")]
# Threat model gamma 5%, delta 10% (k 4, 16, 32 neighbours at 10, 100, 500 devices; docs/secure_aggregation.md's
# table); updates clamped to +-0.05 (torchnative-device's --step 0.01 moves a value by at most 0.0173),
# example counts (1-97) capped at 100; 32-bit words, the finest step the headroom allows.
SECURE_FLAGS = ["--secagg-corrupt-fraction", "0.05", "--secagg-dropout-fraction", "0.1", "--secagg-clip-range", "0.05",
                "--secagg-max-weight", "100"]
SECURE_STAGES = ["advertise keys", "share keys", "masked input", "consistency check", "unmask"]
# Devices training (and holding a trained model plus its float64 contribution, 3x the model) at
# once, for the models where ten devices doing so together would not fit in this machine.
TRAINING_SLOTS_FROM_BYTES = 100 * MiB


def human(nbytes):
    return f"{nbytes // (1 << 30)} GiB" if nbytes >= 1 << 30 else f"{nbytes // MiB} MiB"


def write_model(path, nbytes):
    """A float32 model of `nbytes` as safetensors, written tensor by tensor (no copy of it in memory)."""
    elements = nbytes // 4
    sizes = [TENSOR_BYTES // 4] * (elements // (TENSOR_BYTES // 4))
    if elements % (TENSOR_BYTES // 4):
        sizes.append(elements % (TENSOR_BYTES // 4))
    header, offset = {}, 0
    for i, size in enumerate(sizes):
        header[f"layer{i}.weight"] = {"dtype": "F32", "shape": [size], "data_offsets": [offset, offset + 4 * size]}
        offset += 4 * size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(2026)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for size in sizes:
            rng.standard_normal(size, dtype=np.float32).tofile(out)


BANDWIDTH_SCRIPT = r"""
import statistics, sys, time
import numpy as np
nbytes, repeat = int(sys.argv[1]), int(sys.argv[2])
source = np.ones(nbytes // 8)
target = np.empty_like(source)
times = []
for _ in range(repeat):
    start = time.perf_counter()
    np.copyto(target, source)
    times.append(time.perf_counter() - start)
print(nbytes / statistics.median(times))
"""


def memory_bandwidth(nbytes=512 * MiB, repeat=5):
    """Bytes copied per second by a numpy copy of a large array (median of `repeat`), in a child
    process: a child forked from a process that once held the arrays would report their size as its
    own peak RSS."""
    return float(subprocess.run([sys.executable, "-c", BANDWIDTH_SCRIPT, str(nbytes), str(repeat)], check=True,
                                capture_output=True, text=True).stdout)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def peak_rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def thread_count(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError(f"no thread count for process {pid}")


class ThreadPeak:
    """The most threads a process had, sampled from /proc every 10 ms on a thread of its own (a
    burst shorter than that can be missed)."""

    def __init__(self, pid):
        self.pid, self.peak = pid, 0
        self.stopped = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()

    def _sample(self):
        while not self.stopped.wait(0.01):
            try:
                self.peak = max(self.peak, thread_count(self.pid))
            except (FileNotFoundError, ProcessLookupError):
                return

    def finish(self):
        self.stopped.set()
        self.sampler.join()
        return self.peak


def host_of(endpoint):
    """The IPv4 address of ss's "127.0.0.2:41234", or of "[::ffff:127.0.0.2]:41234" (gRPC's sockets
    are dual-stack: IPv6 sockets holding IPv4-mapped addresses)."""
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    return host.removeprefix("::ffff:")


class WireBytes:
    """TCP payload bytes between the devices and the coordinator from the kernel's counters of each
    socket (tcp_info's bytes_received, as `ss -i` shows them): the coordinator serves the devices
    at `host` (127.0.0.2, loopback) and nothing else, so the sockets with `host` at either end
    are exactly the devices' connections (gRPC, the round's store and hub) and both their ends;
    each byte is counted once, by the end that received it. Sockets are read as they are destroyed
    (`ss -E`: the kernel's socket-destruction events, which carry the socket's last counters;
    needs CAP_NET_ADMIN, else no figure) and, at start_rounds, as they stand (`ss -tin`); a socket
    open then counts only what it carried after. TCP/IP headers and loopback's framing are not
    counted."""

    def __init__(self, host):
        self.host, self.baseline, self.destroyed, self.started = host, None, [], False
        self.lock = threading.Lock()
        try:
            self.events = subprocess.Popen(["stdbuf", "-oL", "ss", "-E", "-tinH"], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
        except FileNotFoundError:
            self.events = None
            return
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        time.sleep(0.2)  # subscribed before the coordinator opens a socket
        if self.events.poll() is not None:
            print(f"no wire bytes: ss -E exited: {self.events.stderr.read().strip()}", file=sys.stderr)
            self.events = None

    def _sockets(self, lines):
        """(local, peer, bytes_received) of each socket of `host` in ss -tinH's lines (a line for
        the socket, then an indented one for its tcp_info)."""
        endpoints = None
        for line in lines:
            if not line.strip():
                continue
            if not line[0].isspace():
                fields = line.split()
                endpoints = (fields[3], fields[4]) if len(fields) >= 5 else None
                continue
            if endpoints and any(host_of(end) == self.host for end in endpoints):
                received = next((int(f.split(":")[1]) for f in line.split() if f.startswith("bytes_received:")), 0)
                yield endpoints[0], endpoints[1], received
            endpoints = None

    def _read(self):
        pending = []
        for line in self.events.stdout:
            pending.append(line)
            if line[:1].isspace():  # a socket's record is complete with its tcp_info line
                with self.lock:
                    if self.started:
                        self.destroyed.extend(self._sockets(pending))
                pending = []

    def start_rounds(self):
        if self.events is None:
            return
        live = subprocess.run(["ss", "-tinH"], check=True, capture_output=True, text=True).stdout.splitlines()
        with self.lock:
            self.baseline = {(local, peer): received for local, peer, received in self._sockets(live)}
            self.started = True

    def finish(self, quiet=1.0, bound=30.0):
        """Bytes received by either end of the devices' connections since start_rounds, once no
        socket of `host` has been destroyed for `quiet` s (at most `bound` s); None without ss -E."""
        if self.events is None or self.baseline is None:
            if self.events is not None:
                self.events.kill()
            return None
        give_up, seen = time.monotonic() + bound, -1
        while time.monotonic() < give_up:
            with self.lock:
                count = len(self.destroyed)
            if count == seen:
                break
            seen = count
            time.sleep(quiet)
        self.events.kill()
        self.events.wait()
        total = 0
        with self.lock:
            for local, peer, received in self.destroyed:
                total += received - self.baseline.pop((local, peer), 0)
            # Still open (none should be once both processes exited): what they carried until now.
            live = subprocess.run(["ss", "-tinH"], check=True, capture_output=True, text=True).stdout.splitlines()
            for local, peer, received in self._sockets(live):
                total += received - self.baseline.pop((local, peer), 0)
        return total


class Log:
    """The coordinator's JSON-lines log, read as it grows."""

    def __init__(self, path):
        self.file = open(path)
        self.partial = ""

    def new_events(self):
        text = self.partial + self.file.read()
        lines = text.split("\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line]


def run_case(binaries, workdir, devices, model_bytes, rounds, strategy, params, log_progress, transport="data-plane",
             secure=None):
    """One case: `rounds` rounds of `devices` devices on a float32 model of `model_bytes`; `secure`:
    torchnative-admin's --secagg-* flags for a secure aggregation task, or None for plaintext rounds.
    The devices reach the coordinator (gRPC, the round's store and hub) at DEVICE_HOST and the
    administrator at 127.0.0.1, so that WireBytes counts the devices' traffic alone."""
    admin_key = workdir / "admin.key"
    public_key = subprocess.run([binaries / "torchnative-admin", "--key", admin_key, "public-key"], check=True,
                                capture_output=True, text=True).stdout.strip()
    config = workdir / "coordinator.json"
    config.write_text(json.dumps({
        "listen": "0.0.0.0:0", "http_listen": "127.0.0.1:0", "state_directory": str(workdir / "state"),
        "admin_public_keys": [public_key], "check_in_wait_bound_ms": 20000,
        "data_plane": {"host": DEVICE_HOST, "join_window_ms": 60000}}))
    model = workdir / "model.safetensors"
    write_model(model, model_bytes)
    log_path = workdir / "coordinator.log"
    wire = WireBytes(DEVICE_HOST)
    with open(log_path, "w") as log_file:
        coordinator = subprocess.Popen([binaries / "torchnative-coordinator", "--config", config], stderr=log_file)
    log = Log(log_path)
    threads = ThreadPeak(coordinator.pid)
    device_process = None
    try:
        ports = None
        while ports is None:
            ports = next((e for e in log.new_events() if e["event"] == "listening"), None)
            if coordinator.poll() is not None:
                raise RuntimeError(f"the coordinator exited: {log_path.read_text()}")
            time.sleep(0.05)
        server = f"127.0.0.1:{ports['grpc_port']}"
        command = [binaries / "torchnative-device", "--server", f"{DEVICE_HOST}:{ports['grpc_port']}",
                   "--key-dir", workdir / "keys",
                   "--devices", str(devices), "--rounds", str(rounds), "--check-in-wait-ms", "20000",
                   "--round-transport", transport]
        if model_bytes >= TRAINING_SLOTS_FROM_BYTES:
            command += ["--training-slots", "2"]
        devices_started = time.monotonic()
        with open(workdir / "devices.log", "w") as device_log:
            device_process = subprocess.Popen(command, stderr=device_log)
        metrics_url = f"http://127.0.0.1:{ports['http_port']}/metrics"
        while f"torchnative_devices_checked_in {devices}\n" not in urllib.request.urlopen(metrics_url).read().decode():
            if device_process.poll() is not None:
                raise RuntimeError(f"the devices exited: {(workdir / 'devices.log').read_text()[-2000:]}")
            time.sleep(0.2)
        ready_seconds = time.monotonic() - devices_started
        # Every device waits in CheckIn: from here to the device process's exit, its CPU and the
        # bytes on its connections are the rounds' (with the CheckIns and heartbeats between them).
        wire.start_rounds()
        device_cpu_begun = cpu_seconds(device_process.pid)
        admin = [binaries / "torchnative-admin", "--server", server, "--key", admin_key]
        subprocess.run(admin + ["create-task", "--strategy", strategy, "--params", json.dumps(params),
                                "--rounds", str(rounds),
                                "--devices-per-round", str(devices), "--min-updates", str(devices),
                                "--min-available", str(devices), "--round-timeout-ms", "900000",
                                "--model", model] + list(secure or []), check=True, capture_output=True)
        started, walls, cpus, phases, task_created = {}, [], [], [], ""
        device_peak = 0
        while len(walls) < rounds:
            try:
                device_peak = peak_rss(device_process.pid)
            except (FileNotFoundError, ProcessLookupError, RuntimeError):
                pass  # it exits once its devices have contributed to every round
            events = log.new_events()
            if events:
                cpu = cpu_seconds(coordinator.pid)
            for event in events:
                if event["event"] == "round_started":
                    started[event["round"]] = (event["time"], cpu)
                elif event["event"] == "task_created":
                    task_created = event.get("message", "")
                elif event["event"] == "round_data_plane":
                    phases.append(event)
                elif event["event"] == "round_completed":
                    begun, cpu_begun = started[event["round"]]
                    walls.append(log_seconds(event["time"]) - log_seconds(begun))
                    cpus.append(cpu - cpu_begun)
                    log_progress(f"  {strategy}, {devices} devices ({transport}), {human(model_bytes)}: round {event['round']}"
                                 f" in {walls[-1]:.2f} s")
                elif event["event"] == "round_failed":
                    raise RuntimeError(f"round {event['round']} failed: {event.get('message')}")
            if coordinator.poll() is not None:
                raise RuntimeError(f"the coordinator exited: {log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        coordinator_peak = peak_rss(coordinator.pid)
        device_cpu = exit_cpu_seconds(device_process, timeout=120) - device_cpu_begun
        result = {"walls": walls, "cpus": cpus, "phases": phases, "coordinator_peak": coordinator_peak,
                  "device_peak": device_peak, "ready_seconds": ready_seconds, "coordinator_threads": threads.finish(),
                  "device_cpu": device_cpu, "task_created": task_created}
    finally:
        threads.finish()
        for process in (device_process, coordinator):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        wire_bytes = wire.finish()  # every socket closed: each one's last counters are in
    result["wire_bytes"] = wire_bytes
    return result


def exit_cpu_seconds(process, timeout):
    """The CPU seconds (user + system, its threads') `process` used until it exited, from wait4's
    rusage; it must exit with status 0 within `timeout` s."""
    give_up = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > give_up:
            raise RuntimeError(f"the devices did not exit within {timeout} s")
        time.sleep(0.05)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"the devices exited with {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def log_seconds(stamp):
    """The log's time stamp ("2026-12-01T01:02:35.961Z") in seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def spread(values, scale=1.0, digits=2):
    median = statistics.median(values) * scale
    return f"{median:.{digits}f} [{min(values) * scale:.{digits}f}..{max(values) * scale:.{digits}f}]"


def per_device(result, devices, key):
    """A case's device-process CPU s or wire bytes per device and round."""
    value = result[key]
    return None if value is None else value / len(result["walls"]) / devices


def ratio(secure, plain):
    return "-" if secure is None or not plain else f"{secure / plain:.2f}"


def graph_of(result):
    """The secure task's neighbours k and threshold t, from its task_created line."""
    found = re.search(r"(\d+) neighbours each, threshold (\d+)", result.get("task_created", ""))
    return f"{found[1]}/{found[2]}" if found else "-"


def print_secure_rows(pairs):
    print("\nSecure aggregation (SecAgg+, gamma 5%, delta 10%) against plaintext FedAvg, the same devices, model"
          " and transport;\neach figure plain / secure / ratio. wall: the round's s (median); coord CPU: the"
          " coordinator's s per round\n(median); dev CPU: the device process's CPU s (utime + stime, from every"
          " device waiting in CheckIn to its\nexit, wait4's rusage) / rounds / devices, in ms; wire: TCP payload"
          " bytes received by either end of the\ndevices' connections (kernel socket counters, ss -E / ss -tin;"
          " gRPC, store and hub) / rounds / devices, KiB;\nk/t: neighbours and threshold; stages: the secure"
          " round's stages, medians s (advertise includes the broadcast\nand training, mask the reduce)")
    print(f"{'devices':>7} {'via':>10} {'model':>7} {'rounds':>6} {'k/t':>5} {'wall s':>19} {'coord CPU s':>19}"
          f" {'dev CPU ms':>21} {'wire KiB':>23}  stages adv/share/mask/check/unmask")
    for devices, model_bytes, transport, plain, secure in pairs:
        wall = [statistics.median(r["walls"]) for r in (plain, secure)]
        cpu = [statistics.median(r["cpus"]) for r in (plain, secure)]
        dev = [per_device(r, devices, "device_cpu") for r in (plain, secure)]
        wire = [per_device(r, devices, "wire_bytes") for r in (plain, secure)]
        stages = "/".join(f"{statistics.median(p.get(stage + ' seconds', 0.0) for p in secure['phases']):.2f}"
                          for stage in SECURE_STAGES) if secure["phases"] else "-"
        print(f"{devices:>7} {transport:>10} {human(model_bytes):>7} {len(secure['walls']):>6} {graph_of(secure):>5}"
              f" {wall[0]:>6.2f} {wall[1]:>6.2f} {ratio(wall[1], wall[0]):>5}"
              f" {cpu[0]:>6.2f} {cpu[1]:>6.2f} {ratio(cpu[1], cpu[0]):>5}"
              f" {dev[0] * 1e3:>7.1f} {dev[1] * 1e3:>7.1f} {ratio(dev[1], dev[0]):>5}"
              f" {kib(wire[0]):>8} {kib(wire[1]):>8} {ratio(wire[1], wire[0]):>5}  {stages}")
    print_secure_growth(pairs)


def kib(value, digits=0):
    return "-" if value is None else f"{value / 1024:.{digits}f}"


def print_secure_growth(pairs):
    """Per device and round, how a secure round's cost grows with the devices (1 MiB, data plane):
    its CPU, its CPU beyond the plaintext round's, its bytes, and its bytes beyond the model's
    broadcast and the masked words (2 x the model: the protocol's own messages)."""
    growth = sorted(((devices, model_bytes, plain, secure) for devices, model_bytes, transport, plain, secure in pairs
                     if model_bytes == MiB and transport == "data-plane"), key=lambda row: row[0])
    if len(growth) < 2:
        return
    print("\nper device and round, secure rounds of 1 MiB on the data plane: dev CPU ms, its extra over plaintext"
          " (secure - plain),\nwire KiB, and the protocol's bytes beyond the broadcast model and the masked words"
          " (wire - 2 x 1 MiB), KiB")
    print(f"{'devices':>7} {'k/t':>5} {'dev CPU ms':>10} {'extra ms':>8} {'wire KiB':>9} {'protocol KiB':>12}")
    figures = []
    for devices, model_bytes, plain, secure in growth:
        cpu, plain_cpu = per_device(secure, devices, "device_cpu"), per_device(plain, devices, "device_cpu")
        wire = per_device(secure, devices, "wire_bytes")
        protocol = None if wire is None else wire - 2 * model_bytes
        figures.append((devices, cpu, cpu - plain_cpu, wire, protocol))
        print(f"{devices:>7} {graph_of(secure):>5} {cpu * 1e3:>10.1f} {(cpu - plain_cpu) * 1e3:>8.1f}"
              f" {kib(wire):>9} {kib(protocol, 1):>12}")
    (few, *first), (many, *last) = figures[0], figures[-1]
    print(f"from {few} to {many} devices (x{many / few:.0f}; ln n x{math.log(many) / math.log(few):.2f}): dev CPU"
          f" x{ratio(last[0], first[0])}, its extra x{ratio(last[1], first[1])}, wire x{ratio(last[2], first[2])},"
          f" protocol bytes x{ratio(last[3], first[3])}")


def selected(cases, args):
    """The cases that --devices and --quick keep, as (devices, model bytes, rounds, the rest), with
    --quick's rounds when given."""
    for devices, model_bytes, rounds, quick_rounds, *rest in cases:
        if args.devices is not None and devices != args.devices:
            continue
        if args.quick and quick_rounds is None:
            continue
        yield (devices, model_bytes, quick_rounds if args.quick else rounds, *rest)


def run_secure_cases(binaries, args):
    pairs = []
    for devices, model_bytes, rounds, transport in selected(SECURE_CASES, args):
        results = []
        for secure in (None, SECURE_FLAGS):
            with tempfile.TemporaryDirectory(prefix="federated_bench_") as work:
                results.append(run_case(binaries, Path(work), devices, model_bytes, rounds, "fedavg", {},
                                        lambda line, secure=secure: print(line + (" (secure)" if secure else ""),
                                                                          file=sys.stderr, flush=True),
                                        transport, secure))
        pairs.append((devices, model_bytes, transport, *results))
    return pairs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(REPO / ".venv" / "bin"), help="where the torchnative executables are")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--devices", type=int, help="only the cases with this many devices")
    parser.add_argument("--secure", action="store_true",
                        help="only the secure aggregation cases (SECURE_CASES: secure against plaintext rounds)")
    args = parser.parse_args()
    binaries = Path(args.bin)
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC  command: {' '.join(sys.argv)}")
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if args.secure:
        print_secure_rows(run_secure_cases(binaries, args))
        print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
        return
    bandwidth = memory_bandwidth()
    print(f"memory bandwidth (numpy copy of 512 MiB, median of 5): {bandwidth / 1e9:.2f} GB/s copied")
    rows = []
    for devices, model_bytes, rounds, strategy, params, transport in selected(CASES, args):
        with tempfile.TemporaryDirectory(prefix="federated_bench_") as work:
            result = run_case(binaries, Path(work), devices, model_bytes, rounds, strategy, params,
                              lambda line: print(line, file=sys.stderr, flush=True), transport)
        rows.append((strategy, devices, model_bytes, transport, result))

    print("\nready: s from starting the device process until every device waits in CheckIn; round: wall s,"
          " median [min..max]\nover the rounds; phases (medians, s): join = data-plane rendezvous, bcast, reduce ="
          " until the last\ncontribution landed, grpc = waiting for the SubmitUpdates of devices over gRPC alone"
          " (FetchModel and\ntraining included), agg = aggregation, folding the kept contributions as the strategy"
          " reads them (fold);\nCPU: coordinator s per round; RSS: peak (VmHWM) MiB; thr: the coordinator's peak thread"
          " count\n(sampled every 10 ms from its start to the last round); fold GB/s: contribution bytes"
          " folded / fold s")
    print(f"{'strategy':>10} {'devices':>7} {'via':>10} {'model':>7} {'ready':>6} {'rounds':>6} {'round wall s':>22}"
          f" {'join':>6} {'bcast':>6} {'reduce':>7} {'grpc':>6} {'agg':>6} {'fold':>6} {'CPU s':>6} {'coord RSS':>9} {'RSS/model':>9} {'dev RSS':>8}"
          f" {'thr':>5} {'fold GB/s':>9} {'/copy':>6}")
    for strategy, devices, model_bytes, transport, result in rows:
        phases = result["phases"]
        median = lambda key: statistics.median(p.get(key, 0.0) for p in phases)
        aggregation = statistics.median(p["bytes_reduced"] / p["fold_seconds"] for p in phases)
        print(f"{strategy:>10} {devices:>7} {transport:>10} {human(model_bytes):>7} {result['ready_seconds']:>6.1f}"
              f" {len(result['walls']):>6} {spread(result['walls']):>22} {median('join_seconds'):>6.2f}"
              f" {median('broadcast_seconds'):>6.2f} {median('reduce_seconds'):>7.2f}"
              f" {median('grpc_wait_seconds'):>6.2f} {median('aggregate_seconds'):>6.2f} {median('fold_seconds'):>6.2f}"
              f" {statistics.median(result['cpus']):>6.2f} {result['coordinator_peak'] / MiB:>9.0f}"
              f" {result['coordinator_peak'] / model_bytes:>9.2f} {result['device_peak'] / MiB:>8.0f}"
              f" {result['coordinator_threads']:>5} {aggregation / 1e9:>9.2f} {aggregation / bandwidth:>6.2f}")
    largest = max(rows, key=lambda row: row[2], default=(None, None, 0))
    if largest[2] >= 1 << 30:
        print(f"\nissue 4's bar, coordinator peak RSS under 3x the model in a 1 GB model round: the {human(largest[2])}"
              f" model's round ({largest[0]}, {largest[3]}) peaked at {largest[4]['coordinator_peak'] / largest[2]:.2f}x")
    print_secure_rows(run_secure_cases(binaries, args))


if __name__ == "__main__":
    main()
