"""A task's model in and out through torchnative.model_files, over a real coordinator: the file
model_files.save writes is the file fetch-model writes back, byte for byte, and the digest
fetch-model prints is model_files.digest of either (`python -m torchnative.model_files digest
FILE`, docs/federated.md "Model files"), which --digest then accepts."""
import json
import subprocess

import torch

from federation import PYTHON, admin_json
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
                          capture_output=True, text=True, timeout=60)


def test_create_task_names_a_torch_file_and_the_conversion_it_needs(coordinator, tmp_path):
    """Both torch.save formats are refused by name, pointing at from-torch, whose file is taken."""
    state = state_dict()
    for legacy in (False, True):
        saved = tmp_path / f"model{'-legacy' if legacy else ''}.pt"
        torch.save(state, saved, _use_new_zipfile_serialization=not legacy)
        refused = create_task_with(coordinator, saved)
        assert refused.returncode == 1
        assert f"model: {saved} is a torch.save file, not safetensors: convert it with python -m " \
            f"torchnative.model_files from-torch {saved} MODEL.safetensors" in refused.stderr, refused.stderr
    converted = tmp_path / "converted.safetensors"
    subprocess.run([PYTHON, "-m", "torchnative.model_files", "from-torch", str(saved), str(converted)], check=True,
                   timeout=60)
    created = create_task_with(coordinator, converted)
    assert created.returncode == 0, created.stderr
    fetched = tmp_path / "fetched.safetensors"
    admin_json(coordinator, "fetch-model", json.loads(created.stdout)["initial_model_version"], "--out", str(fetched))
    assert fetched.read_bytes() == converted.read_bytes()
    assert all(torch.equal(model_files.load(fetched)[name], tensor) for name, tensor in state.items())


def test_the_admin_help_says_how_to_convert_and_what_the_digest_is(coordinator):
    def help_of(command):
        return subprocess.run(coordinator["admin"] + ["help", command], capture_output=True, text=True,
                              timeout=30, check=True).stdout
    assert "python -m torchnative.model_files from-torch" in help_of("create-task")
    fetch = " ".join(help_of("fetch-model").split())
    assert "to-torch" in fetch and "python -m torchnative.model_files digest FILE" in fetch
