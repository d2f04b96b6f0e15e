"""The c10d stores of our shim against upstream's: the same operations, the same results."""
import json
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(Path(__file__).with_name("stores_script.py"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(python, tmp_path):
    workdir = tmp_path / Path(python).parent.parent.name
    workdir.mkdir()
    out = subprocess.run([python, SCRIPT, str(workdir), str(free_port())], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_stores_agree_with_upstream(tmp_path):
    ours = record(str(ROOT / ".venv" / "bin" / "python"), tmp_path)
    theirs = record("/usr/bin/python3", tmp_path)
    assert ours.keys() == theirs.keys()
    for kind in theirs:
        for mine, upstream in zip(ours[kind], theirs[kind]):
            assert mine == upstream, f"{kind}: ours {mine}, upstream {upstream}"
        assert len(ours[kind]) == len(theirs[kind])
