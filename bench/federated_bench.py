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

usage: federated_bench.py [--bin DIR] [--quick]
"""
import argparse
import json
import os
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

# (devices, model bytes, rounds, rounds with --quick or None to skip it then, strategy, its parameters,
# how the devices take part: torchnative-device --round-transport)
CASES = [(10, MiB, 5, 2, "fedavg", {}, "data-plane"), (100, MiB, 3, 2, "fedavg", {}, "data-plane"),
         (1000, MiB, 3, None, "fedavg", {}, "data-plane"), (10, 100 * MiB, 2, 1, "fedavg", {}, "data-plane"),
         (10, 1024 * MiB, 1, None, "fedavg", {}, "data-plane"), (10, 100 * MiB, 2, None, "fedmedian", {}, "data-plane"),
         (10, 100 * MiB, 2, None, "multi_krum", {"f": 2, "m": 4}, "data-plane"),
         (100, MiB, 3, 2, "fedavg", {}, "grpc"), (10, 100 * MiB, 2, None, "fedavg", {}, "grpc")]
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


def run_case(binaries, workdir, devices, model_bytes, rounds, strategy, params, log_progress, transport="data-plane"):
    admin_key = workdir / "admin.key"
    public_key = subprocess.run([binaries / "torchnative-admin", "--key", admin_key, "public-key"], check=True,
                                capture_output=True, text=True).stdout.strip()
    config = workdir / "coordinator.json"
    config.write_text(json.dumps({
        "listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0", "state_directory": str(workdir / "state"),
        "admin_public_keys": [public_key], "check_in_wait_bound_ms": 20000,
        "data_plane": {"host": "127.0.0.1", "join_window_ms": 60000}}))
    model = workdir / "model.safetensors"
    write_model(model, model_bytes)
    log_path = workdir / "coordinator.log"
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
        command = [binaries / "torchnative-device", "--server", server, "--key-dir", workdir / "keys",
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
        admin = [binaries / "torchnative-admin", "--server", server, "--key", admin_key]
        subprocess.run(admin + ["create-task", "--strategy", strategy, "--params", json.dumps(params),
                                "--rounds", str(rounds),
                                "--devices-per-round", str(devices), "--min-updates", str(devices),
                                "--min-available", str(devices), "--round-timeout-ms", "900000",
                                "--model", model], check=True, capture_output=True)
        started, walls, cpus, phases = {}, [], [], []
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
        if device_process.wait(timeout=120) != 0:
            raise RuntimeError(f"the devices exited with {device_process.returncode}")
        return {"walls": walls, "cpus": cpus, "phases": phases, "coordinator_peak": coordinator_peak,
                "device_peak": device_peak, "ready_seconds": ready_seconds, "coordinator_threads": threads.finish()}
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


def log_seconds(stamp):
    """The log's time stamp ("2026-12-01T01:02:35.961Z") in seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def spread(values, scale=1.0, digits=2):
    median = statistics.median(values) * scale
    return f"{median:.{digits}f} [{min(values) * scale:.{digits}f}..{max(values) * scale:.{digits}f}]"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(REPO / ".venv" / "bin"), help="where the torchnative executables are")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--devices", type=int, help="only the cases with this many devices")
    args = parser.parse_args()
    binaries = Path(args.bin)
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC  command: {' '.join(sys.argv)}")
    bandwidth = memory_bandwidth()
    print(f"memory bandwidth (numpy copy of 512 MiB, median of 5): {bandwidth / 1e9:.2f} GB/s copied")
    rows = []
    for devices, model_bytes, rounds, quick_rounds, strategy, params, transport in CASES:
        if args.devices is not None and devices != args.devices:
            continue
        if args.quick:
            if quick_rounds is None:
                continue
            rounds = quick_rounds
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
    largest = max(rows, key=lambda row: row[2])
    if largest[2] >= 1 << 30:
        print(f"\nissue 4's bar, coordinator peak RSS under 3x the model in a 1 GB model round: the {human(largest[2])}"
              f" model's round ({largest[0]}, {largest[3]}) peaked at {largest[4]['coordinator_peak'] / largest[2]:.2f}x")


if __name__ == "__main__":
    main()
