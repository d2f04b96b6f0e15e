"""A task's model in and out through torchnative.model_files, over a real coordinator: the file
model_files.save writes is the file fetch-model writes back, byte for byte, and the digest
fetch-model prints is model_files.digest of either (`python -m torchnative.model_files digest
FILE`, docs/federated.md "Model files"), which --digest then accepts."""
import json
import subprocess

import pytest
import torch

from federation import PYTHON, REPO, admin_json
from torchnative import model_files


def state_dict():
    """Every dtype the coordinator has, 0-dim and empty tensors among them."""
    torch.manual_seed(0)
    state = dict(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)).state_dict())
    state.update({"half": torch.tensor([0.5, -2.0], dtype=torch.float16),
                  "brain": torch.tensor(1.5, dtype=torch.bfloat16), "double": torch.tensor([1 / 3], dtype=torch.float64),
                  "mask": torch.tensor([True, False]), "bytes": torch.arange(3, dtype=torch.uint8),
                  "small": torch.tensor([-5], dtype=torch.int8), "short": torch.tensor(-300, dtype=torch.int16),
                  "int": torch.tensor([7], dtype=torch.int32), "empty": torch.zeros(0, 4)})
    return state


def test_fetch_model_gives_back_the_saved_file_and_prints_its_model_files_digest(coordinator, tmp_path):
    initial, fetched = tmp_path / "initial.safetensors", tmp_path / "fetched.safetensors"
    model_files.save(state_dict(), initial)
    task = admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", "1", "--devices-per-round",
                      "1", "--min-updates", "1", "--round-timeout-ms", "60000", "--model", str(initial))
    version = task["initial_model_version"]
    printed = admin_json(coordinator, "fetch-model", version, "--out", str(fetched))

    assert fetched.read_bytes() == initial.read_bytes()
    assert printed["blake2b_256"] == model_files.digest(initial)
    command = subprocess.run([PYTHON, "-m", "torchnative.model_files", "digest", str(fetched)], capture_output=True,
                             text=True, timeout=60, check=True)
    assert command.stdout == printed["blake2b_256"] + "\n"
    again = tmp_path / "again.safetensors"
    admin_json(coordinator, "fetch-model", version, "--out", str(again), "--digest", printed["blake2b_256"])
    loaded = model_files.load(again)
    assert {name: (tensor.dtype, tensor.shape) for name, tensor in loaded.items()} == \
        {name: (tensor.dtype, tensor.shape) for name, tensor in state_dict().items()}
    assert all(torch.equal(loaded[name], tensor) for name, tensor in state_dict().items())


def test_the_digest_covers_names_and_shapes_not_the_files_spelling(tmp_path):
    """Equal data under another name or shape is another model; the same model written with its
    header spelled otherwise (escaped names, metadata) is the same one."""
    weight = torch.arange(6.0)
    digests = {}
    for label, state in {"model": {"w": weight}, "renamed": {"v": weight},
                         "reshaped": {"w": weight.reshape(2, 3)}}.items():
        model_files.save(state, tmp_path / f"{label}.safetensors")
        digests[label] = model_files.digest(tmp_path / f"{label}.safetensors")
    assert len(set(digests.values())) == 3
    header = b'{"__metadata__":{"format":"pt"},"\\u0077":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}'
    (tmp_path / "spelled.safetensors").write_bytes(len(header).to_bytes(8, "little") + header +
                                                   weight.numpy().tobytes())
    assert model_files.digest(tmp_path / "spelled.safetensors") == digests["model"]


def create_task_with(coordinator, model):
    return subprocess.run(coordinator["admin"] + ["create-task", "--strategy", "fedavg", "--rounds", "1",
                                                  "--devices-per-round", "1", "--min-updates", "1",
                                                  "--round-timeout-ms", "60000", "--model", str(model)],
                          capture_output=True, text=True, errors="replace", timeout=60)


TORCH_SAVE = r'''
import sys, torch
torch.manual_seed(0)
state = dict(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)).state_dict())
base = torch.arange(12.0).reshape(3, 4)
state.update({"transposed": base.t(), "row": base[1], "column": base[:, 2], "scalar_view": base[2, 3],
              "parameter": torch.nn.Parameter(torch.ones(2, dtype=torch.float64)),
              "brain": torch.tensor([1.5, -2.0], dtype=torch.bfloat16), "half": torch.tensor(0.5, dtype=torch.float16),
              "mask": torch.tensor([True, False]), "bytes": torch.arange(3, dtype=torch.uint8),
              "small": torch.tensor([-5], dtype=torch.int8), "short": torch.tensor(-300, dtype=torch.int16),
              "int": torch.tensor([7], dtype=torch.int32), "long": torch.tensor([-2 ** 63]), "empty": torch.zeros(0, 4)})
torch.save(state, sys.argv[1] + ".pt")
torch.save({name: tensor.detach().contiguous() for name, tensor in state.items()}, sys.argv[1] + ".contiguous.pt")
'''


@pytest.mark.parametrize("python", [PYTHON, "/usr/bin/python3"], ids=["shim", "upstream"])
def test_create_task_takes_a_torch_save_file_of_a_state_dict(coordinator, tmp_path, python):
    """Views of one storage (transposed, a row, a column, a 0-dim element), a Parameter, every
    dtype: the fetched model is model_files.save of the tensors made contiguous, byte for byte."""
    subprocess.run([python, "-c", TORCH_SAVE, str(tmp_path / "model")], check=True, timeout=60,
                   env={"PYTHONPATH": str(REPO / "python")})
    created = create_task_with(coordinator, tmp_path / "model.pt")
    assert created.returncode == 0, created.stderr
    fetched, expected = tmp_path / "fetched.safetensors", tmp_path / "expected.safetensors"
    admin_json(coordinator, "fetch-model", json.loads(created.stdout)["initial_model_version"], "--out", str(fetched))
    model_files.save(torch.load(tmp_path / "model.contiguous.pt", weights_only=True), expected)
    assert fetched.read_bytes() == expected.read_bytes()


def test_create_task_refuses_what_is_no_state_dict_it_reads_by_name(coordinator, tmp_path):
    """The legacy torch.save format, with the conversion that reads it; a saved module."""
    state = state_dict()
    torch.save(state, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    refused = create_task_with(coordinator, tmp_path / "legacy.pt")
    assert refused.returncode == 1
    assert f"model: {tmp_path / 'legacy.pt'} is a torch.save file in the legacy format, not read here: convert it " \
        f"with python -m torchnative.model_files from-torch {tmp_path / 'legacy.pt'} MODEL.safetensors" \
        in refused.stderr, refused.stderr
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    refused = create_task_with(coordinator, tmp_path / "module.pt")
    assert refused.returncode == 1
    assert f"model: {tmp_path / 'module.pt'}: not a torch.save file of a state_dict read here: pickle opcode 0x81, " \
        "which a state_dict's pickle has not (save model.state_dict(), not the model)" in refused.stderr, \
        refused.stderr

    converted = tmp_path / "converted.safetensors"
    subprocess.run([PYTHON, "-m", "torchnative.model_files", "from-torch", str(tmp_path / "legacy.pt"),
                    str(converted)], check=True, timeout=60)
    created = create_task_with(coordinator, converted)
    assert created.returncode == 0, created.stderr
    fetched = tmp_path / "fetched.safetensors"
    admin_json(coordinator, "fetch-model", json.loads(created.stdout)["initial_model_version"], "--out", str(fetched))
    assert fetched.read_bytes() == converted.read_bytes()
    assert all(torch.equal(model_files.load(fetched)[name], tensor) for name, tensor in state.items())


def test_damaged_torch_files_are_refused_not_crashed_on(coordinator, tmp_path):
    """Cut at 64 places, and each byte of the pickle flipped: refused (status 1) or, where the
    damage left a state_dict, taken; never a crash."""
    torch.save(state_dict(), tmp_path / "model.pt")
    whole = (tmp_path / "model.pt").read_bytes()
    pickle_at = whole.index(b"data.pkl") + len(b"data.pkl")
    damaged = [whole[:cut] for cut in range(0, len(whole), max(1, len(whole) // 64))]
    damaged += [whole[:at] + bytes([whole[at] ^ 0xff]) + whole[at + 1:] for at in range(pickle_at, pickle_at + 200)]
    statuses = set()
    for index, content in enumerate(damaged):
        (tmp_path / "damaged.pt").write_bytes(content)
        result = create_task_with(coordinator, tmp_path / "damaged.pt")
        assert result.returncode in (0, 1) and (result.returncode == 0 or "damaged.pt" in result.stderr), \
            (index, result.returncode, result.stderr)
        statuses.add(result.returncode)
    assert 1 in statuses


UPSTREAM_COMPARE = r'''
import sys, torch
sys.path.insert(0, sys.argv[1])
import model_files  # the module alone: torchnative's package needs the shim
expected = model_files.load(sys.argv[2])
for path in sys.argv[3:]:
    for weights_only in (True, False):
        loaded = torch.load(path, weights_only=weights_only)
        assert type(loaded).__name__ == "OrderedDict", type(loaded)
        assert list(loaded) == list(expected), (list(loaded), list(expected))
        for name, tensor in expected.items():
            got = loaded[name]
            assert got.dtype == tensor.dtype and got.shape == tensor.shape and got.is_contiguous(), name
            assert torch.equal(got, tensor) or (got.numel() == 0), name
            assert got.view(-1).view(torch.uint8).tolist() == tensor.reshape(-1).view(torch.uint8).tolist(), name
    torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)).load_state_dict(
        {name: loaded[name] for name in list(loaded)[:7]})
print("agree")
'''


def test_fetch_model_writes_a_torch_file_upstream_torch_loads(coordinator, tmp_path):
    """fetch-model writes a torch.save file of the state_dict for --out FILE.pt, FILE.pth or
    --format torch, and safetensors otherwise (or for --format safetensors): upstream torch.load
    (weights_only or not) reads every dtype, 0-dim and empty tensors with the model's bits and in
    its order; create-task takes the file back, and the printed digest is the same either way."""
    initial = tmp_path / "initial.safetensors"
    model_files.save(state_dict(), initial)
    version = json.loads(create_task_with(coordinator, initial).stdout)["initial_model_version"]
    written = {}
    for out, flags, format in [("model.pt", [], "torch"), ("model.pth", [], "torch"),
                               ("model.bin", ["--format", "torch"], "torch"),
                               ("model.safetensors", [], "safetensors"),
                               ("other.pt", ["--format", "safetensors"], "safetensors")]:
        printed = admin_json(coordinator, "fetch-model", version, "--out", str(tmp_path / out), *flags)
        assert printed["format"] == format and printed["blake2b_256"] == model_files.digest(initial), printed
        written[out] = tmp_path / out
        assert not (tmp_path / (out + ".partial")).exists()
    assert written["model.safetensors"].read_bytes() == initial.read_bytes()
    assert written["other.pt"].read_bytes() == initial.read_bytes()
    assert written["model.pt"].read_bytes() == written["model.pth"].read_bytes() == written["model.bin"].read_bytes()
    assert written["model.pt"].read_bytes()[:4] == b"PK\x03\x04"
    compared = subprocess.run(["/usr/bin/python3", "-c", UPSTREAM_COMPARE, str(REPO / "python" / "torchnative"),
                               str(initial), str(written["model.pt"]), str(written["model.bin"])],
                              capture_output=True, text=True, timeout=120, env={})
    assert compared.returncode == 0 and compared.stdout.strip() == "agree", compared.stderr
    # The coordinator's own reader of torch files takes it back as the same model.
    again = create_task_with(coordinator, written["model.pt"])
    assert again.returncode == 0, again.stderr
    back = tmp_path / "back.safetensors"
    admin_json(coordinator, "fetch-model", json.loads(again.stdout)["initial_model_version"], "--out", str(back))
    assert back.read_bytes() == initial.read_bytes()
    refused = subprocess.run(coordinator["admin"] + ["fetch-model", version, "--out", str(tmp_path / "x"),
                                                     "--format", "pickle"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "--format: expected safetensors or torch, got 'pickle'" in refused.stderr, \
        refused.stderr


def test_the_admin_help_says_how_to_convert_and_what_the_digest_is(coordinator):
    def help_of(command):
        return subprocess.run(coordinator["admin"] + ["help", command], capture_output=True, text=True,
                              timeout=30, check=True).stdout
    assert "torch.save file of a state_dict" in " ".join(help_of("create-task").split())
    fetch = " ".join(help_of("fetch-model").split())
    assert "python -m torchnative.model_files digest FILE" in fetch
    assert "torch.save file of its state_dict" in fetch and "--format FORMAT" in fetch and ".pt or .pth" in fetch
