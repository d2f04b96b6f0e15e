"""docs/federated.md's quick start runs as written: the `sh` blocks of its "Quick start" section,
in order, as one bash script started from the repository's root (so it uses .venv/bin, as the
reader does, whatever $TORCHNATIVE_BIN says), its `mktemp -d` directory made under the test's
tmp_path. The one change: the documented ports, 7400 and 9400, become ports free here."""
import json
import os
import re
import signal
import subprocess

import pytest

from federation import REPO, free_port, log_events, read_safetensors

DOC = REPO / "docs" / "federated.md"
DOC_PORTS = ("127.0.0.1:7400", "127.0.0.1:9400")  # the gRPC and HTTP addresses the quick start uses
DEVICES, ROUNDS = 5, 3


def quick_start_commands():
    """The quick start's `sh` blocks, joined; the section ends at the next second-level heading."""
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", DOC.read_text(), re.MULTILINE | re.DOTALL)
    assert section, f"{DOC} has no '## Quick start' section"
    blocks = re.findall(r"^```sh\n(.*?)^```$", section.group(1), re.MULTILINE | re.DOTALL)
    assert blocks, "the quick start has no sh block"
    return "".join(blocks)


def on_free_ports(script):
    for address in DOC_PORTS:
        assert address in script, f"the quick start no longer uses {address}: update DOC_PORTS"
        script = script.replace(address, f"127.0.0.1:{free_port()}")
    return script


@pytest.mark.slow
def test_the_quick_start_runs_a_three_round_task_with_five_devices(tmp_path):
    script = tmp_path / "quickstart.sh"
    script.write_text(on_free_ports(quick_start_commands()))
    # Output to files, not pipes: the coordinator started in the background would hold a pipe
    # open after a failing command ended the script. A session of its own: what the script left
    # running is killed with it.
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen(["bash", "-e", str(script)], cwd=REPO, env={**os.environ, "TMPDIR": str(tmp_path)},
                                   stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass  # killed below: exit -9
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    out, err = (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()
    made = [path for path in tmp_path.iterdir() if path.is_dir() and path.name.startswith("tmp.")]
    logs = "".join(f"\n--- {path}\n" + path.read_text()
                   for work in made for path in (work / "coordinator.log", work / "devices.log") if path.exists())
    assert process.returncode == 0, f"exit {process.returncode} (-9: still running after 60 s)\n{out}\n{err}{logs}"
    (work,) = made

    # events --follow: a line per round as it closed, then the task's.
    followed = [json.loads(line) for line in out.splitlines() if line.startswith('{"')]
    rounds, (task,) = followed[:-1], followed[-1:]
    assert [(r["round_id"], r["state"], r["selected"], r["contributed"]) for r in rounds] == \
        [(n, "ROUND_STATE_COMPLETED", DEVICES, DEVICES) for n in range(1, ROUNDS + 1)], out
    assert (task["state"], task["rounds_completed"], task["latest_model_version"]) == \
        ("TASK_STATE_COMPLETED", ROUNDS, f"task-1/{ROUNDS}"), out
    assert len(log_events(work / "coordinator.log", "round_completed")) == ROUNDS

    # Every device took part in every round, then exited on its own.
    exits = [line for line in map(json.loads, (work / "devices.log").read_text().splitlines()) if "exiting" in line]
    assert sorted(line["contributed_rounds"] for line in exits) == [ROUNDS] * DEVICES, logs

    # The fetched model is the torch model's state_dict, trained.
    initial, final = read_safetensors(work / "initial.safetensors"), read_safetensors(work / "final.safetensors")
    assert {name: a.shape for name, a in final.items()} == {"weight": (2, 4), "bias": (2,)}
    assert all(not (final[name] == initial[name]).all() for name in final)
