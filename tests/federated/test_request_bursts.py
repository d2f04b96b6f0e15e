"""A burst of device requests is not a burst of coordinator threads. Every signed request waits
until its nonce is durable (one sync per batch); the unary device methods (Register, CheckIn,
FetchTask, Heartbeat) wait for it without holding a server thread, so hundreds of devices
registering, checking in and heartbeating at once leave the coordinator's thread count where it
was. (Served synchronously, each request held a thread while its batch was written: a thousand
devices starting together once reached about 750 threads.)
"""
import subprocess
import time
from pathlib import Path

from federation import admin_json, http_get, start_coordinator, tool

DEVICES = 300
# Far more threads than the coordinator's own and gRPC's pollers and executors, far fewer than
# one per device.
EXTRA_THREADS_ALLOWED = 32


def thread_count(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no thread count for process {pid}")


def registered(coordinator):
    _, metrics = http_get(coordinator, "/metrics")
    return int(next(line.split()[1] for line in metrics.splitlines()
                    if line.startswith("torchnative_devices_registered ")))


def test_hundreds_of_devices_registering_and_checking_in_at_once_add_no_thread_per_device(tmp_path):
    # Checking in and heartbeating every half second: 300 devices make about 1,200 signed
    # requests a second once registered.
    for coordinator in start_coordinator(tmp_path, check_in_wait_bound_ms=500, heartbeat_interval_ms=500):
        pid = coordinator["process"].pid
        idle = thread_count(pid)
        devices = subprocess.Popen(
            [tool("torchnative-device"), "--server", f"127.0.0.1:{coordinator['grpc_port']}",
             "--key-dir", str(tmp_path / "keys"), "--devices", str(DEVICES), "--check-in-wait-ms", "500"],
            stderr=subprocess.PIPE, text=True)
        peak = idle
        try:
            deadline = time.monotonic() + 120
            all_registered_at = None
            next_look = 0.0
            # Sampled every 5 ms from the devices' start until 3 s after the last one registered.
            while all_registered_at is None or time.monotonic() < all_registered_at + 3:
                peak = max(peak, thread_count(pid))
                now = time.monotonic()
                if all_registered_at is None and now >= next_look:
                    next_look = now + 0.1
                    assert devices.poll() is None, devices.communicate()[1][-3000:]
                    assert now < deadline, f"{registered(coordinator)} of {DEVICES} devices registered in 120 s"
                    if registered(coordinator) == DEVICES:
                        all_registered_at = now
                time.sleep(0.005)
            assert devices.poll() is None, devices.communicate()[1][-3000:]
        finally:
            devices.kill()
            devices.wait()
        assert len(admin_json(coordinator, "devices")) == DEVICES
        assert peak - idle <= EXTRA_THREADS_ALLOWED, f"{idle} threads idle, {peak} at the peak"
        assert coordinator["process"].poll() is None
