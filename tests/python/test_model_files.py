"""torchnative.model_files: a state_dict written as the coordinator's safetensors file by the shim
loads bit-identically in upstream torch and the other way round (every dtype the coordinator
has, 0-dim and empty tensors, NaN payloads and -0.0), both write identical bytes, and the
module's to-torch / from-torch commands convert between it and torch.save files across the two."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchnative import model_files

SHIM_PYTHON = sys.executable  # the venv running pytest, which has torchnative
UPSTREAM_PYTHON = "/usr/bin/python3"
PYTHON_DIR = str(Path(__file__).resolve().parents[2] / "python")  # torchnative, for upstream
PYTHONS = {"shim": SHIM_PYTHON, "upstream": UPSTREAM_PYTHON}

SCRIPT = r'''
import json, sys, torch
from torchnative import model_files

def sample():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    state = dict(model.state_dict())  # num_batches_tracked: a 0-dim int64
    nan_payload = torch.frombuffer(bytearray(b"\x01\x00\xc0\x7f"), dtype=torch.float32)
    state.update({
        "f64": torch.tensor([1 / 3, -0.0, float("inf")], dtype=torch.float64),
        "f32_scalar": torch.tensor(-0.0), "f32_nan": nan_payload.reshape(()),
        "f16": torch.tensor([65504.0, 6e-8], dtype=torch.float16),
        "bf16": torch.tensor([[1.5, -3e38]], dtype=torch.bfloat16),
        "i64": torch.tensor([-2 ** 63, 2 ** 63 - 1]), "i32": torch.tensor(-7, dtype=torch.int32),
        "i16": torch.tensor([-32768], dtype=torch.int16), "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.arange(5, dtype=torch.uint8), "bool": torch.tensor([True, False]),
        "bool_scalar": torch.tensor(True), "empty": torch.zeros(0, 3), "transposed": torch.arange(6.).reshape(2, 3).t()})
    return state

def describe(state):
    return {name: [str(t.dtype), list(t.shape), model_files.tensor_bytes(name, t).hex()] for name, t in state.items()}

mode, path = sys.argv[1], sys.argv[2]
if mode == "expected":
    print(json.dumps(describe(sample())))
elif mode == "save":
    model_files.save(sample(), path)
elif mode == "torch.save":
    torch.save(sample(), path)
elif mode == "load":
    print(json.dumps(describe(model_files.load(path))))
elif mode == "torch.load":
    print(json.dumps(describe(torch.load(path, weights_only=True))))
'''


def run(python, *args, expect_failure=False):
    process = subprocess.run([python, *args], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert (process.returncode != 0) == expect_failure, process.stderr
    return process


def script(python, mode, path):
    output = run(python, "-c", SCRIPT, mode, str(path)).stdout
    return json.loads(output) if output else None


@pytest.fixture(scope="module")
def expected():
    """The sample as upstream torch holds it in memory: dtype, shape and bytes of each tensor."""
    return script(UPSTREAM_PYTHON, "expected", "-")


def test_a_file_written_by_either_loads_bit_identically_in_both(expected, tmp_path):
    files = {}
    for writer, python in PYTHONS.items():
        files[writer] = tmp_path / f"{writer}.safetensors"
        script(python, "save", files[writer])
    assert files["shim"].read_bytes() == files["upstream"].read_bytes()
    for reader, python in PYTHONS.items():
        assert script(python, "load", files["shim"]) == expected, reader
    assert list(expected)[:4] == ["0.weight", "0.bias", "1.weight", "1.bias"]  # the state_dict's order


@pytest.mark.parametrize("writer, reader", [("shim", "upstream"), ("upstream", "shim")])
def test_torch_files_convert_both_ways_across_the_two(expected, tmp_path, writer, reader):
    """to-torch by one, torch.load by the other; torch.save by one, from-torch by the other."""
    safetensors, converted = tmp_path / "model.safetensors", tmp_path / "converted.pt"
    script(PYTHONS[writer], "save", safetensors)
    run(PYTHONS[reader], "-m", "torchnative.model_files", "to-torch", str(safetensors), str(converted))
    assert script(PYTHONS[writer], "torch.load", converted) == expected

    saved, back = tmp_path / "saved.pt", tmp_path / "back.safetensors"
    script(PYTHONS[writer], "torch.save", saved)
    run(PYTHONS[reader], "-m", "torchnative.model_files", "from-torch", str(saved), str(back))
    assert back.read_bytes() == safetensors.read_bytes()


def test_from_torch_refuses_a_saved_module_by_saying_what_to_save(tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    process = run(UPSTREAM_PYTHON, "-m", "torchnative.model_files", "from-torch", str(tmp_path / "module.pt"),
                  str(tmp_path / "out.safetensors"), expect_failure=True)
    assert "module.pt: not a state_dict (Unsupported class torch.nn.modules.linear.Linear); save " \
        "model.state_dict() rather than the model" in process.stderr, process.stderr
    assert not (tmp_path / "out.safetensors").exists()


def test_a_dtype_the_coordinator_has_not_is_refused_by_name(tmp_path):
    """Upstream's complex64 (the shim has no dtype beyond the coordinator's)."""
    saved, out = tmp_path / "complex.pt", tmp_path / "out.safetensors"
    run(UPSTREAM_PYTHON, "-c", "import sys, torch; torch.save({'w': torch.ones(2), 'z': torch.ones(2, "
        "dtype=torch.complex64)}, sys.argv[1])", str(saved))
    process = run(UPSTREAM_PYTHON, "-m", "torchnative.model_files", "from-torch", str(saved), str(out),
                  expect_failure=True)
    assert "'z' is torch.complex64; the coordinator's models take torch.uint8" in process.stderr, process.stderr
    assert not out.exists() and not Path(f"{out}.partial").exists()


def test_load_skips_metadata_and_keeps_the_files_order(tmp_path):
    """A safetensors file from elsewhere (the safetensors package writes __metadata__ and sorts names)."""
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "b": {"dtype": "I64", "shape": [], "data_offsets": [4, 12]},
                         "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    data = torch.tensor([2.5]).numpy().tobytes() + torch.tensor(9).numpy().tobytes()
    (tmp_path / "m.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + data)
    state = model_files.load(tmp_path / "m.safetensors")
    assert list(state) == ["b", "a"] and state["b"].shape == () and state["b"].item() == 9
    assert state["a"].tolist() == [2.5]
