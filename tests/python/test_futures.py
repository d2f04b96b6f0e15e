"""torch.futures (torch._C.Future, _collect_all) and Work.get_future on our shim against upstream.

futures_script.py runs under both, each in its own interpreter: the Future cases alone, then
torch.distributed at world 2 with backend "local" on ours and gloo upstream. Every recorded value
and exception (type and first line of its message) must agree.
"""
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SHIM_PYTHON = sys.executable  # the venv running pytest: .venv, or .venv-asan under make asan-test
UPSTREAM_PYTHON = "/usr/bin/python3"
SCRIPT = str(Path(__file__).with_name("futures_script.py"))
WORLD = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(python, *args):
    process = subprocess.run([python, SCRIPT, *args], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, f"{python} {args} failed:\n{process.stdout}\n{process.stderr}"
    return process


def compare(ours, upstream):
    shared = [name for name in upstream if not name.startswith("local only/")]
    assert sorted(name for name in ours if not name.startswith("local only/")) == sorted(shared)
    differences = {name: (ours[name], upstream[name]) for name in shared if ours[name] != upstream[name]}
    assert differences == {}


def test_futures_agree_with_upstream(tmp_path):
    run(SHIM_PYTHON, "futures", str(tmp_path / "ours.pkl"))
    run(UPSTREAM_PYTHON, "futures", str(tmp_path / "upstream.pkl"))
    compare(pickle.loads((tmp_path / "ours.pkl").read_bytes()),
            pickle.loads((tmp_path / "upstream.pkl").read_bytes()))


def test_raising_done_callback_is_reported_on_stderr(tmp_path):
    # Upstream logs it through glog; ours writes the same line to sys.stderr.
    process = run(SHIM_PYTHON, "futures", str(tmp_path / "ours.pkl"))
    assert "Got the following error when running the callback: ZeroDivisionError: division by zero" in process.stderr


@pytest.fixture(scope="module")
def distributed_records(tmp_path_factory):
    records = {}
    for name, python, backend in (("ours", SHIM_PYTHON, "local"), ("upstream", UPSTREAM_PYTHON, "gloo")):
        out = tmp_path_factory.mktemp(name)
        run(python, "distributed", backend, str(WORLD), f"tcp://127.0.0.1:{free_port()}", str(out))
        records[name] = [pickle.loads((out / f"rank{rank}.pkl").read_bytes()) for rank in range(WORLD)]
    return records


@pytest.mark.parametrize("rank", range(WORLD))
def test_work_futures_agree_with_gloo(distributed_records, rank):
    compare(distributed_records["ours"][rank], distributed_records["upstream"][rank])


def test_point_to_point_futures(distributed_records):
    sent = ("value", ("list", [("tensor", "torch.float32", (3,), [1.0, 2.0, 3.0])]))
    assert [records["local only/point to point"] for records in distributed_records["ours"]] == [sent, sent]


def test_pending_future_fails_when_its_group_is_destroyed(distributed_records):
    outcome = distributed_records["ours"][0]["local only/pending future of a destroyed group"]
    assert outcome[:2] == ("error", "RuntimeError"), outcome
