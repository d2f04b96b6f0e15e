"""The coordinator's model files from and to a torch state_dict.

    model_files.save(model.state_dict(), "initial.safetensors")  # for create-task --model
    state = model_files.load("task-1-3.safetensors")             # what fetch-model wrote
    model.load_state_dict(state)

The coordinator takes and gives models as safetensors files (https://github.com/huggingface/safetensors):
an 8-byte little-endian header length, a JSON header {name: {"dtype", "shape", "data_offsets"}}
padded with spaces to a multiple of 8, then each tensor's row-major little-endian bytes. `save`
writes what the coordinator writes (compact JSON, the state_dict's order), so equal models give
identical files; `load` reads any valid file, keeping its header's order. Dtypes, shapes (0-dim
and empty tensors included) and bytes round-trip exactly; no safetensors package is needed.

From the command line, for torch.save files and the digest `fetch-model` prints:

    python -m torchnative.model_files to-torch model.safetensors model.pt
    python -m torchnative.model_files from-torch model.pt model.safetensors
    python -m torchnative.model_files digest model.safetensors
"""
import argparse
import hashlib
import json
import os
import pickle
import struct
import sys

import torch

# The dtypes the coordinator's models have, as safetensors names them, with their codes in
# tensor.proto's DType (upstream's c10::ScalarType numbers), which the digest hashes.
DTYPES = {torch.uint8: ("U8", 0), torch.int8: ("I8", 1), torch.int16: ("I16", 2), torch.int32: ("I32", 3),
          torch.int64: ("I64", 4), torch.float16: ("F16", 5), torch.float32: ("F32", 6),
          torch.float64: ("F64", 7), torch.bool: ("BOOL", 11), torch.bfloat16: ("BF16", 15)}
DTYPE_OF_NAME = {name: dtype for dtype, (name, _) in DTYPES.items()}
METADATA_KEY = "__metadata__"
DIGEST_DOMAIN = b"torchnative.federated.v1/model\0"


def tensor_bytes(name, tensor):
    """tensor's row-major bytes; refuses (TypeError, naming it) a dtype the coordinator has not."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"model_files: '{name}' is a {type(tensor).__name__}, not a tensor")
    if tensor.dtype not in DTYPES:
        supported = ", ".join(str(dtype) for dtype in DTYPES)
        raise TypeError(f"model_files: '{name}' is {tensor.dtype}; the coordinator's models take {supported}")
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits, as int16
        tensor = tensor.view(torch.int16)
    return tensor.numpy().tobytes()


def encode(state_dict):
    """The safetensors file of state_dict ({name: tensor}), as bytes."""
    header, data = {}, bytearray()
    for name, tensor in state_dict.items():
        if name == METADATA_KEY:
            raise ValueError(f"model_files: a tensor may not be named {METADATA_KEY}")
        raw = tensor_bytes(name, tensor)
        header[name] = {"dtype": DTYPES[tensor.dtype][0], "shape": list(tensor.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    # As the coordinator writes it (nlohmann's dump): compact, names as UTF-8 rather than escaped.
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)  # the format's alignment of the data
    return struct.pack("<Q", len(text)) + text + bytes(data)


def save(state_dict, path):
    """Writes state_dict as the safetensors file `create-task --model FILE` takes; written aside
    and renamed, so a reader never sees half a file."""
    data, partial = encode(state_dict), f"{path}.partial"  # a refused state_dict leaves no file
    with open(partial, "wb") as out:
        out.write(data)
    os.replace(partial, path)


def entries(path):
    """[(name, dtype, shape, raw bytes)] of a safetensors file, in its header's order."""
    with open(path, "rb") as file:
        content = file.read()
    if len(content) < 8:
        raise ValueError(f"{path}: not a safetensors file: {len(content)} bytes, shorter than its header length")
    (length,) = struct.unpack_from("<Q", content)
    if length > len(content) - 8:
        raise ValueError(f"{path}: not a safetensors file: its header length {length} runs past the end")
    data = memoryview(content)[8 + length:]
    result = []
    for name, entry in json.loads(content[8:8 + length]).items():
        if name == METADATA_KEY:
            continue
        if entry.get("dtype") not in DTYPE_OF_NAME:
            raise ValueError(f"{path}: tensor '{name}' has the dtype {entry.get('dtype')!r}, "
                             f"not one of {', '.join(DTYPE_OF_NAME)}")
        begin, end = entry["data_offsets"]
        dtype, shape = DTYPE_OF_NAME[entry["dtype"]], tuple(entry["shape"])
        expected = torch.empty(shape, dtype=dtype).element_size() * torch.Size(shape).numel()
        if end - begin != expected or end > len(data):
            raise ValueError(f"{path}: tensor '{name}' spans bytes {begin}..{end} of {len(data)}, "
                             f"its dtype and shape make {expected}")
        result.append((name, dtype, shape, bytes(data[begin:end])))
    return result


def load(path):
    """The state_dict ({name: tensor}, in the file's order) of a safetensors file."""
    state_dict = {}
    for name, dtype, shape, raw in entries(path):
        if raw:
            state_dict[name] = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
        else:  # frombuffer refuses an empty buffer
            state_dict[name] = torch.empty(shape, dtype=dtype)
    return state_dict


def digest(path):
    """The model's content digest in hex, as `fetch-model` prints it (its "blake2b_256") and
    `--digest` checks it: BLAKE2b-256 over the table and data (tensor.proto's ModelHeader), not
    over the file, so it does not depend on the file's JSON spelling or the model version's name."""
    table = entries(path)
    hasher = hashlib.blake2b(digest_size=32)
    hasher.update(DIGEST_DOMAIN + struct.pack(">Q", len(table)))
    for name, dtype, shape, _ in table:
        encoded = name.encode()
        hasher.update(struct.pack(">I", len(encoded)) + encoded)
        hasher.update(struct.pack(f">iI{len(shape)}q", DTYPES[dtype][1], len(shape), *shape))
    for _, _, _, raw in table:
        hasher.update(raw)
    return hasher.hexdigest()


def read_torch(path):
    """The state_dict in a torch.save file, refused (ValueError) when it holds something else.
    Loaded with weights_only: a file from elsewhere runs none of its pickled code."""
    not_a_state_dict = (f"{path}: not a state_dict ({{}}); "
                        "save model.state_dict() rather than the model")
    try:
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(not_a_state_dict.format(str(error).rsplit("WeightsUnpickler error: ", 1)[-1])) from error
    if not isinstance(state_dict, dict):
        raise ValueError(not_a_state_dict.format(f"a {type(state_dict).__name__}"))
    return state_dict


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torchnative.model_files",
                                     description="The coordinator's model files (safetensors) and torch.save files.")
    commands = parser.add_subparsers(dest="command", required=True)
    to_torch = commands.add_parser("to-torch", help="writes a safetensors file's state_dict with torch.save")
    from_torch = commands.add_parser("from-torch",
                                     help="writes a torch.save file's state_dict as safetensors (create-task --model)")
    for command in (to_torch, from_torch):
        command.add_argument("source")
        command.add_argument("destination")
    commands.add_parser("digest", help="prints the model's BLAKE2b-256, as fetch-model prints it").add_argument("file")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "to-torch":
            torch.save(load(arguments.source), arguments.destination)
        elif arguments.command == "from-torch":
            save(read_torch(arguments.source), arguments.destination)
        else:
            print(digest(arguments.file))
    except (OSError, ValueError, TypeError) as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
