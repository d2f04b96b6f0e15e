"""A torchnative-coordinator process on loopback and the administrator's calls to it
(torchnative-admin: create-task, rounds, fetch-model)."""
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from torchnative import model_files
from torchnative.nn import federated

# The venv's bin (`make setup` links the CLIs beside its python), else PATH.
BIN = Path(sys.executable).parent


def tool(name):
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is neither in {BIN} nor on PATH: run `make setup`")
    return found


class Coordinator:
    """A coordinator whose state, keys and log live in `directory`; stopped on leaving a with block."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        key = self.directory / "admin.key"
        public_key = subprocess.run([tool("torchnative-admin"), "--key", str(key), "public-key"],
                                    check=True, capture_output=True, text=True).stdout.strip()
        config = self.directory / "coordinator.json"
        # A check-in held 2 s at most: a device between two check-ins when a round starts waits no longer.
        config.write_text(json.dumps({
            "listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0", "state_directory": str(self.directory / "state"),
            "admin_public_keys": [public_key], "check_in_wait_bound_ms": 2000, "data_plane": {"host": "127.0.0.1"}}))
        self.log = self.directory / "coordinator.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen([tool("torchnative-coordinator"), "--config", str(config)], stderr=log)
        self.address = f"127.0.0.1:{self.listening_port()}"
        self.admin_command = [tool("torchnative-admin"), "--server", self.address, "--key", str(key)]

    def listening_port(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log.read_text().splitlines():
                event = json.loads(line)
                if event.get("event") == "listening":
                    return event["grpc_port"]
            if self.process.poll() is not None:
                raise RuntimeError(f"torchnative-coordinator exited ({self.process.returncode}): {self.log.read_text()}")
            time.sleep(0.1)
        raise TimeoutError(f"torchnative-coordinator did not listen within {timeout} s (log: {self.log})")

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.process.terminate()
        self.process.wait(timeout=30)

    def admin(self, *arguments):
        result = subprocess.run(self.admin_command + list(arguments), capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"torchnative-admin {' '.join(arguments)}: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def create_fedavg_task(self, model, rounds, devices, round_timeout_s):
        """A FedAvg task from model's weights: `rounds` rounds of all `devices` devices; its id."""
        initial = self.directory / "initial.safetensors"
        federated.save_initial_model(model, initial)
        return self.admin("create-task", "--strategy", "fedavg", "--rounds", str(rounds),
                          "--devices-per-round", str(devices), "--min-updates", str(devices),
                          "--min-available", str(devices), "--round-timeout-ms", str(round_timeout_s * 1000),
                          "--model", str(initial))["task_id"]

    def rounds(self, task):
        return self.admin("rounds", task)

    def fetch_model(self, version):
        """The stored model version's state dict (torch tensors), through the safetensors file
        fetch-model writes."""
        path = self.directory / (version.replace("/", "-") + ".safetensors")
        self.admin("fetch-model", version, "--out", str(path))
        return model_files.load(path)
