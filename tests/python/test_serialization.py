"""torch.save / torch.load in the default zip format and the legacy one: files written by the
shim load in upstream torch and the other way round, with the same values, dtypes, shapes and
shared storages; damaged files are refused by name."""
import io
import subprocess
import sys
import zipfile

import pytest

SHIM_PYTHON = sys.executable  # the venv running pytest: .venv, or .venv-asan under make asan-test
UPSTREAM_PYTHON = "/usr/bin/python3"

SCRIPT = r'''
import io, sys, torch
mode, path, legacy = sys.argv[1], sys.argv[2], sys.argv[3] == "legacy"

def sample():
    torch.manual_seed(0)
    w = torch.arange(12.).reshape(3, 4)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    return {"w": w, "row": w[1], "column": w[:, 2], "int16": torch.tensor([1, -2, 3], dtype=torch.int16),
            "bool": torch.tensor([True, False]), "half": torch.tensor([1.5, -0.25], dtype=torch.float16),
            "bfloat16": torch.tensor([2.5], dtype=torch.bfloat16), "empty": torch.zeros(0, 3),
            "scalar": torch.tensor(7), "uint8": torch.arange(5, dtype=torch.uint8),
            "float64": torch.tensor([1 / 3], dtype=torch.float64), "model": model.state_dict(), "meta": [1, "x"]}

def describe(value):
    if isinstance(value, torch.Tensor):
        return (str(value.dtype), tuple(value.shape), value.stride(), value.storage_offset(), value.tolist())
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items()}
    return value

if mode == "save":
    kwargs = {"_use_new_zipfile_serialization": False} if legacy else {}
    torch.save(sample(), path, **kwargs)
    buffer = io.BytesIO()
    torch.save(sample(), buffer, **kwargs)
    with open(path + ".from_buffer", "wb") as f:
        f.write(buffer.getvalue())
else:
    for source in (path, io.BytesIO(open(path + ".from_buffer", "rb").read())):
        loaded = torch.load(source)
        print(describe(loaded))
        loaded["row"][0] = 99  # views saved together still share their storage
        print(loaded["w"][1, 0].item(), loaded["column"][1].item())
'''


def run(python, *args):
    process = subprocess.run([python, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    return process.stdout


@pytest.mark.parametrize("format_", ["zip", "legacy"])
@pytest.mark.parametrize("writer,reader", [("shim", "upstream"), ("upstream", "shim"), ("shim", "shim")])
def test_files_load_on_the_other_side(tmp_path, format_, writer, reader):
    pythons = {"shim": SHIM_PYTHON, "upstream": UPSTREAM_PYTHON}
    path = str(tmp_path / "sample.pt")
    run(pythons[writer], "save", path, format_)
    run(UPSTREAM_PYTHON, "save", str(tmp_path / "reference.pt"), format_)
    loaded = run(pythons[reader], "load", path, format_)
    reference = run(UPSTREAM_PYTHON, "load", str(tmp_path / "reference.pt"), format_)
    assert loaded == reference
    assert "99.0 6.0" in loaded  # w[1,0] written through row; column untouched


def shim_load_error(path):
    code = "import sys, torch\ntry:\n    torch.load(sys.argv[1])\nexcept Exception as e:\n" \
           "    print(type(e).__name__, e)\nelse:\n    print('loaded')"
    return subprocess.run([SHIM_PYTHON, "-c", code, str(path)], capture_output=True, text=True,
                          timeout=120).stdout.strip()


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.pt"
    run(UPSTREAM_PYTHON, "save", str(path), "zip")
    return path


def test_truncated_file_is_refused(saved, tmp_path):
    data = saved.read_bytes()
    for keep in (len(data) - 10, len(data) // 2, 100):
        cut = tmp_path / f"cut{keep}.pt"
        cut.write_bytes(data[:keep])
        message = shim_load_error(cut)
        assert message.startswith("RuntimeError") and "PytorchStreamReader" in message, message


def test_corrupt_tensor_bytes_are_refused_by_crc(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("model/data/0")
    # the record's data follows its local header; flip a bit in the middle of it
    name_and_extra = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little") + \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    data[info.header_offset + 30 + name_and_extra + info.file_size // 2] ^= 1
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(bytes(data))
    message = shim_load_error(damaged)
    assert message.startswith("RuntimeError") and "data/0: CRC-32 mismatch" in message, message


def rewrite(saved, target, **options):
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w", **options) as out:
        for info in source.infolist():
            with out.open(info.filename, "w", force_zip64=True) as record:
                record.write(source.read(info.filename))


def test_zip64_records_are_read(saved, tmp_path):
    target = tmp_path / "zip64.pt"
    rewrite(saved, target, compression=zipfile.ZIP_STORED)
    code = "import sys, torch; print(torch.load(sys.argv[1])['w'].sum().item())"
    out = subprocess.run([SHIM_PYTHON, "-c", code, str(target)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "66.0", out.stderr


def test_compressed_records_are_refused_by_name(saved, tmp_path):
    target = tmp_path / "deflated.pt"
    rewrite(saved, target, compression=zipfile.ZIP_DEFLATED)
    message = shim_load_error(target)
    assert "is compressed (method 8)" in message, message
