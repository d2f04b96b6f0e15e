"""torch.distributed with backend="local" on our shim against upstream torch with gloo.

collectives_script.py runs under both at world 2, 3 and 4 (with tcp://, env:// and file://
rendezvous). Every output is compared: integers and data movement bit for bit with gloo;
floating reductions bit for bit with a reduction in ascending rank order computed here with
numpy, independently of both.
"""
import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM_PYTHON = str(ROOT / ".venv" / "bin" / "python")
UPSTREAM_PYTHON = "/usr/bin/python3"
SCRIPT = str(Path(__file__).with_name("collectives_script.py"))
NUMPY_DTYPES = {"torch.float32": np.float32, "torch.float64": np.float64, "torch.int64": np.int64,
                "torch.int32": np.int32, "torch.uint8": np.uint8}
# gloo in torch 1.13 lacks these (it raises); ours is checked against the reference alone.
GLOO_LACKS = {"reduce_scatter", "reduce_scatter_tensor", "all_gather_into_tensor", "all_to_all"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_script(python, backend, world, init, tmp_path):
    out = tmp_path / f"{backend}-{world}"
    out.mkdir()
    if init == "file":
        init_method = f"file://{tmp_path / f'rendezvous-{backend}'}"
    else:
        init_method = f"{init}://127.0.0.1:{free_port()}"
    proc = subprocess.run([python, SCRIPT, backend, str(world), init_method, str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, f"{backend} world {world} failed:\n{proc.stdout}\n{proc.stderr}"
    return [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(world)]


def data(rank, n, dtype, salt=0):
    raw = (np.arange(n, dtype=np.int64) * 37 + rank * 11 + salt * 5) % 101
    if np.issubdtype(dtype, np.floating):
        return (raw.astype(np.float64) / 7.0 + 0.1).astype(dtype)
    return (raw % 13 + 1).astype(dtype)


def ascending(values, op):
    combine = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
               "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op]
    acc = values[0].copy()
    with np.errstate(over="ignore"):
        for value in values[1:]:
            acc = combine(acc, value).astype(values[0].dtype)
    return acc


def as_array(entry):
    dtype, shape, raw = entry
    return np.frombuffer(raw, dtype=NUMPY_DTYPES[dtype]).reshape(shape)


def reference(name, rank, world):
    """What `name` must hold on `rank`, for reductions and for what gloo lacks; None otherwise."""
    parts = name.split("/")
    if parts[0] == "all_reduce":
        op, dtype, n = parts[1], NUMPY_DTYPES[parts[2]], int(parts[3])
        return [ascending([data(r, n, dtype) for r in range(world)], op)]
    if parts[0] == "reduce":
        dtype, n = NUMPY_DTYPES[parts[1]], int(parts[2])
        return [ascending([data(r, n, dtype) for r in range(world)], "SUM")]
    if name == "reduce_scatter":
        return [ascending([data(r, 9, np.float32, salt=rank) for r in range(world)], "SUM")]
    if name == "reduce_scatter_tensor":
        return [ascending([data(r, 4 * world, np.int64)[4 * rank:4 * rank + 4] for r in range(world)], "SUM")]
    if parts[0] == "all_gather_into_tensor":
        dtype, n = NUMPY_DTYPES[parts[1]], int(parts[2])
        return [np.concatenate([data(r, n, dtype) for r in range(world)])]
    if name == "all_to_all":
        return [np.full(2, 10 * q + rank, dtype=np.int64) for q in range(world)]
    if name == "subgroup_all_reduce":
        return [ascending([data(r, 10, np.int64) for r in range(0, world, 2)], "SUM")]
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    results = {}
    for world, init in ((2, "tcp"), (3, "env"), (4, "file")):
        tmp = tmp_path_factory.mktemp(f"world{world}")
        results[world] = (run_script(SHIM_PYTHON, "local", world, init, tmp),
                          run_script(UPSTREAM_PYTHON, "gloo", world, init, tmp))
    return results


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_output_agrees(runs, world):
    ours, gloo = runs[world]
    compared = 0
    for rank in range(world):
        assert sorted(ours[rank]) == sorted(gloo[rank]), f"rank {rank} recorded different operations"
        for name, theirs in gloo[rank].items():
            mine = ours[rank][name]
            where = f"{name} on rank {rank} at world {world}"
            assert not (isinstance(mine, tuple) and mine[:1] == ("error",)), f"{where}: ours raised {mine}"
            want = reference(name, rank, world)
            if want is not None:
                got = [as_array(entry) for entry in mine]
                assert [g.dtype for g in got] == [w.dtype for w in want], where
                for g, w in zip(got, want):
                    assert g.tobytes() == w.tobytes(), f"{where}: differs from the ascending-rank reduction"
                if name.split("/")[0] in GLOO_LACKS:
                    assert theirs[0] == "error", f"{where}: gloo now supports it; compare with it too"
                else:
                    is_integer = not np.issubdtype(want[0].dtype, np.floating)
                    if is_integer:
                        assert mine == theirs, f"{where}: integers differ from gloo"
            else:
                assert name.split("/")[0] not in GLOO_LACKS, f"{where}: needs a reference"
                assert mine == theirs, f"{where}: differs from gloo"
            compared += 1
    assert compared > 100 * world


def test_gloo_is_not_claimed():
    code = ("import torch.distributed as d; print(d.is_available(), d.is_gloo_available(), "
            "d.is_nccl_available(), d.is_mpi_available())")
    out = subprocess.run([SHIM_PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False", "False"]
