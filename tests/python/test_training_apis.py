"""What training scripts touch, on our shim against upstream PyTorch.

Each script below runs twice, as its own file: under upstream (Debian's torch, /usr/bin/python3)
and under the shim (the interpreter running pytest, the venv's). A script defines main(), whose
result is written as JSON: tensors by dtype, shape and elements, exceptions by type and the first
line of their message. The two records, and the two processes' stdout, must be identical: floats
bit for bit (the shim computes these small deterministic cases as upstream does, and seeded
randomness comes from a generator that reproduces upstream's), ints never equal to floats.
Upstream must run every script without an uncaught error; the errors a script is about are
recorded as values. Two exceptions: upstream aborts on a second set_num_interop_threads, where the
shim must raise upstream's message instead; and FashionMNIST needs Debian's dataset-fashion-mnist
(the Makefile installs it), skipped when it is not installed.
The scripts needing what the shim does not have yet are listed in NOT_YET with the reason, as
strict expected failures: each shows the gap, and one that starts agreeing fails until it is
unlisted.
"""
import json
import math
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "examples" / "demo"))
import fashion_mnist  # noqa: E402 (the demo's data, shared with it)

UPSTREAM_PYTHON = "/usr/bin/python3"
UPSTREAM_TORCH = "/usr/lib/python3/dist-packages/torch/"
SHIM_PYTHON = sys.executable
TIMEOUT = 120

PRELUDE = r'''
import json
import sys

import torch


def plain(value):
    """value as JSON: tensors by dtype, shape and elements, containers element by element."""
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": value.tolist()}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(item) for item in value]
        if type(value) in (list, tuple):
            return items
        return {"type": f"{type(value).__module__}.{type(value).__name__}", "items": items}
    return value


def outcome(call):
    """What call() returns, or the exception it raises: its type and the first line of its message."""
    try:
        return {"value": plain(call())}
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error).partition("\n")[0]}
'''

EPILOGUE = r'''
if __name__ == "__main__":
    record = {"torch": torch.__file__, "outcome": outcome(main)}
    with open(sys.argv[1], "w") as file:
        # A value JSON cannot hold is named by its type, so a shim returning the wrong kind of object
        # shows up as a difference rather than a crash of the harness.
        json.dump(record, file, default=lambda value: {"unserializable": type(value).__name__})
'''

RECORD_FUNCTION = r'''
from torch.autograd.profiler import record_function


@record_function("decorated")
def decorated(x):
    return x + 1


def handle(value):
    # A legacy handle is a uint8 tensor holding the RecordFunction's bytes: its size and contents
    # are libtorch's layout and addresses, so only its kind is compared.
    if isinstance(value, torch.Tensor):
        return {"type": type(value).__name__, "dtype": str(value.dtype), "dim": value.dim()}
    return {"type": type(value).__name__}


def with_args():
    with record_function("with args", "info") as scope:
        return scope.args


def main():
    with record_function("block") as block:
        inside = torch.ones(2) * 3
    raw = torch.ops.profiler._record_function_enter("raw")
    return {
        "__enter__ returns": type(block).__name__,
        "name": block.name,
        "handle": handle(block.handle),
        "computed inside": inside,
        "decorated": decorated(torch.ones(2)),
        "decorated keeps its name": decorated.__name__,
        "_record_function_enter": handle(raw),
        "_record_function_exit": outcome(lambda: torch.ops.profiler._record_function_exit(raw)),
        "_record_function_exit of a float tensor": outcome(lambda: type(torch.ops.profiler._record_function_exit(torch.ones(1)))),
        "with args": outcome(with_args),
    }
'''

# The TorchScript-era entry point: its handle is a ScriptObject (a custom-class value).
RECORD_FUNCTION_NEW = r'''
def main():
    raw_new = torch.ops.profiler._record_function_enter_new("raw new", None)
    return {
        "_record_function_enter_new": type(raw_new).__name__,
        "_record_function_exit._RecordFunction":
            outcome(lambda: torch.ops.profiler._record_function_exit._RecordFunction(raw_new)),
    }
'''

RECORD_FUNCTION_IN_PROFILER = r'''
from collections import Counter

from torch.autograd.profiler import record_function

LABELS = ("block", "decorated", "nested")


@record_function("decorated")
def decorated(x):
    return x + 1


def labels(events):
    # Only the scopes the script names: which aten:: events a kernel records is the library's business.
    return dict(sorted(Counter(event.name for event in events if event.name in LABELS).items()))


def train_step():
    with record_function("block"):
        with record_function("nested"):
            torch.ones(2) * 3
    decorated(torch.ones(2))


def main():
    with torch.autograd.profiler.profile() as legacy:
        train_step()
        train_step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as kineto:
        train_step()
    return {
        "autograd.profiler.profile": labels(legacy.function_events),
        "its key_averages": sorted((row.key, row.count) for row in legacy.key_averages() if row.key in LABELS),
        "torch.profiler.profile": labels(kineto.events()),
    }
'''

VITALS = r'''
from torch.utils.data import DataLoader, TensorDataset


def main():
    enabled_at_start = torch.vitals_enabled()
    set_result = torch.set_vital("Dataloader", "enabled", "True")
    after_set = torch.read_vitals()
    # Building a DataLoader sets the same vital upstream; a test value shows where it is listed.
    torch.set_vital("Dataloader", "basic_unit_test", "TEST_VALUE_STRING")
    list(DataLoader(TensorDataset(torch.arange(3.))))
    return {
        "vitals_enabled at start": enabled_at_start,
        "set_vital returns": set_result,
        "vitals_enabled after": torch.vitals_enabled(),
        "read_vitals after set_vital": after_set,
        "read_vitals after a DataLoader": torch.read_vitals(),
    }
'''

OUT_NONE = r'''
def main():
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -4.0]])
    # Wrappers forward out=None explicitly (torch.nn.functional, user helpers): it must mean "no out".
    calls = {
        "stack": lambda: torch.stack([a, b], out=None),
        "stack dim=1": lambda: torch.stack((a, b), 1, out=None),
        "add": lambda: torch.add(a, b, out=None),
        "add alpha": lambda: torch.add(a, b, alpha=2, out=None),
        "add scalar": lambda: torch.add(a, 1, out=None),
        "sub": lambda: torch.sub(a, b, out=None),
        "mul": lambda: torch.mul(a, b, out=None),
        "div floor": lambda: torch.div(a, b, rounding_mode="floor", out=None),
        "cat": lambda: torch.cat([a, b], out=None),
        "cat dim=1": lambda: torch.cat((a, b), 1, out=None),
        "sum dim 0": lambda: torch.sum(a, 0, out=None),
        "sum keepdim": lambda: torch.sum(a, 1, keepdim=True, out=None),
        "sum dtype": lambda: torch.sum(a, 0, dtype=torch.float64, out=None),
        "mean": lambda: torch.mean(a, 1, out=None),
        "matmul": lambda: torch.matmul(a, b.t(), out=None),
        "mm": lambda: torch.mm(a, b.t(), out=None),
        "max dim": lambda: torch.max(a, 1, out=None),
        "sort": lambda: torch.sort(b, out=None),
        "argmax": lambda: torch.argmax(b, 1, out=None),
        "clamp": lambda: torch.clamp(a, 2, 5, out=None),
        "where": lambda: torch.where(a > 2, a, b, out=None),
        "exp": lambda: torch.exp(b, out=None),
        "pow": lambda: torch.pow(a, 2, out=None),
        "cumsum": lambda: torch.cumsum(a, 1, out=None),
        "index_select": lambda: torch.index_select(a, 1, torch.tensor([2, 0]), out=None),
        "arange": lambda: torch.arange(5, out=None),
        "zeros": lambda: torch.zeros(2, 3, out=None),
        "full": lambda: torch.full((2,), 3.0, out=None),
    }
    return {name: outcome(call) for name, call in calls.items()}
'''

DTYPE_PREDICATES_PRELUDE = r'''


def predicates(dtype):
    t = torch.zeros(2, dtype=dtype)
    return {
        "torch.is_complex": torch.is_complex(t),
        "Tensor.is_complex": t.is_complex(),
        "torch.is_floating_point": torch.is_floating_point(t),
        "Tensor.is_floating_point": t.is_floating_point(),
        "Tensor.is_signed": t.is_signed(),
        "dtype.is_complex": dtype.is_complex,
        "dtype.is_floating_point": dtype.is_floating_point,
        "dtype.is_signed": dtype.is_signed,
        "torch.is_tensor": torch.is_tensor(t),
        "torch.is_storage": torch.is_storage(t),
    }


def main():
    result = {str(dtype): outcome(lambda: predicates(dtype)) for dtype in DTYPES}
    if COMPLEX:
        return result
    parameter = torch.nn.Parameter(torch.zeros(2))
    result["a Parameter"] = outcome(lambda: [torch.is_tensor(parameter), torch.is_floating_point(parameter)])
    result["torch.is_complex(1.0)"] = outcome(lambda: torch.is_complex(1.0))
    result["torch.is_floating_point([1.0])"] = outcome(lambda: torch.is_floating_point([1.0]))
    result["torch.is_tensor(1.0)"] = outcome(lambda: torch.is_tensor(1.0))
    return result
'''
DTYPE_PREDICATES = """
COMPLEX = False
DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64)
""" + DTYPE_PREDICATES_PRELUDE
COMPLEX_DTYPE_PREDICATES = """
COMPLEX = True
DTYPES = (torch.complex64, torch.complex128)
""" + DTYPE_PREDICATES_PRELUDE

NUM_THREADS = r'''
def main():
    result = {"get_num_threads at start": torch.get_num_threads(),
              "get_num_interop_threads at start": torch.get_num_interop_threads()}
    for count in (1, 3, 0, -1, 1.5, "2"):
        result[f"set_num_threads({count!r})"] = outcome(lambda: torch.set_num_threads(count))
        result[f"get_num_threads after set_num_threads({count!r})"] = torch.get_num_threads()
    # Refused counts do not use up the single set_num_interop_threads call.
    for count in (0, -1, 3):
        result[f"set_num_interop_threads({count!r})"] = outcome(lambda: torch.set_num_interop_threads(count))
    result["get_num_interop_threads after"] = torch.get_num_interop_threads()
    return result
'''

# Upstream splits a large reduction among its intra-op threads, which changes float results.
REDUCTION_WITH_THREADS = r'''
def main():
    torch.set_num_threads(3)
    return {"sum of 100000 floats": torch.arange(100000.).sum()}
'''

SECOND_SET_NUM_INTEROP_THREADS = r'''
def main():
    torch.set_num_interop_threads(2)
    second = outcome(lambda: torch.set_num_interop_threads(3))
    return {"second call": second, "get_num_interop_threads": torch.get_num_interop_threads()}
'''

INFERENCE_MODE = r'''
import numpy as np

@torch.inference_mode()
def decorated(x):
    return x * 2, torch.is_inference_mode_enabled()


@torch.inference_mode(False)
def decorated_off():
    return torch.is_inference_mode_enabled(), torch.ones(1).is_inference()


def main():
    result = {"enabled at start": torch.is_inference_mode_enabled()}
    with torch.inference_mode():
        inference = torch.ones(3)
        result["inside"] = [torch.is_inference_mode_enabled(), inference.is_inference(), torch.is_grad_enabled()]
        with torch.inference_mode(False):
            result["inference_mode(False) inside"] = [torch.is_inference_mode_enabled(),
                                                      torch.ones(1).is_inference(), torch.is_grad_enabled()]
        result["decorated with inference_mode(False)"] = decorated_off()
        result["in-place inside"] = outcome(lambda: inference.add_(1))
    result["after"] = [torch.is_inference_mode_enabled(), inference.is_inference(), torch.ones(1).is_inference()]
    doubled, enabled = decorated(torch.ones(2))
    result["decorated"] = [doubled, doubled.is_inference(), enabled, torch.is_inference_mode_enabled()]
    result["in-place outside"] = outcome(lambda: inference.add_(1))
    result["out-of-place outside"] = outcome(lambda: [inference.mul(2), inference.mul(2).is_inference()])
    result["view outside"] = outcome(lambda: inference.view(3).is_inference())
    result["clone outside"] = outcome(lambda: inference.clone().is_inference())
    result["requires_grad_ outside"] = outcome(lambda: inference.requires_grad_())
    result["_version"] = outcome(lambda: inference._version)
    normal = torch.ones(2)
    weight = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        result["in-place on a normal tensor inside"] = outcome(lambda: normal.add_(1))
        result["view of a normal tensor inside"] = normal.view(2).is_inference()
    result["normal tensor after"] = [normal, normal.is_inference(), normal._version]
    result["writes outside"] = writes_outside()
    result["made inside"] = made_inside()
    result["guard"] = guard()
    return result


def writes_outside():
    # Upstream refuses when the version counter would move, after the write: the values show it.
    result = {}
    with torch.inference_mode():
        inference = torch.arange(6.0).reshape(2, 3)
    writes = {
        "out=": lambda t: torch.add(torch.ones(2, 3), 1, out=t),
        "zero_": lambda t: t.zero_(),
        "index assignment": lambda t: t.__setitem__((0, 1), 5.0),
        "through a view": lambda t: t[:, 1].add_(100),
        "t_": lambda t: t.t_(),
        "set_": lambda t: t.set_(torch.ones(4)),
        "copy_ of another shape": lambda t: t.copy_(torch.ones(5)),
        "resize_": lambda t: t.resize_(4),
        "detach_": lambda t: t.detach_(),
        "requires_grad_(False)": lambda t: t.requires_grad_(False),
        "requires_grad = True": lambda t: setattr(t, "requires_grad", True),
        "share_memory_": lambda t: t.share_memory_(),
    }
    for name, write in writes.items():
        with torch.inference_mode():
            tensor = inference.clone()
        result[name] = [outcome(lambda: write(tensor)), tensor.shape, tensor.is_inference()]
        result[name + " values"] = outcome(lambda: tensor.clone())
    return result


def made_inside():
    normal = torch.ones(2, 3)
    with torch.inference_mode():
        made = {
            "from_numpy": torch.from_numpy(np.ones(2)),
            "tensor()": torch.tensor([1.0]),
            "Tensor()": torch.Tensor(2),
            "view of normal": normal.t(),
            "data of normal": normal.data,
            "op on normal": normal + 1,
            "requires_grad_ inside": torch.ones(2).requires_grad_(),
        }
        version_inside = outcome(lambda: made["op on normal"]._version)
    after = {name: [t.is_inference(), t.requires_grad] for name, t in made.items()}
    after["version inside"] = version_inside
    after["view outside of one made inside"] = made["op on normal"].t().is_inference()
    after["detach outside"] = made["op on normal"].detach().is_inference()
    after["float64 outside"] = made["op on normal"].double().is_inference()
    return after


def guard():
    result = {"defaults": [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]}
    held = torch._C._InferenceMode(True)
    result["held"] = [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
    del held
    result["released"] = [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
    with torch.no_grad():
        with torch.inference_mode(False):
            result["no_grad, then inference_mode(False)"] = torch.is_grad_enabled()
        result["no_grad again"] = torch.is_grad_enabled()
    for name, arguments in {"no argument": (), "1": (1,), "None": (None,), "str": ("x",), "two": (True, False)}.items():
        result["_InferenceMode" + name] = outcome(lambda: type(torch._C._InferenceMode(*arguments)).__name__)
    result["after the constructor calls"] = [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
    result["_set_grad_enabled(1)"] = outcome(lambda: torch._C._set_grad_enabled(1))
    return result
'''

INFERENCE_MODE_AUTOGRAD = r'''
def main():
    with torch.inference_mode():
        inference = torch.ones(3)
    weight = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        product = weight * 2
    return {"saved for backward": outcome(lambda: torch.ones(3, requires_grad=True) * inference),
            "computed from a leaf inside": [product.requires_grad, product.grad_fn is None]}
'''

DIFF = r'''
def main():
    ints = torch.tensor([1, 3, 6, 10, 15])
    floats = torch.tensor([[1.0, 2.5, 4.0], [0.5, -1.0, 8.0]])
    calls = {
        "int": lambda: torch.diff(ints),
        "int n=2": lambda: torch.diff(ints, n=2),
        "int n=0": lambda: torch.diff(ints, n=0),
        "int n past the length": lambda: torch.diff(ints, n=7),
        "int n=-1": lambda: torch.diff(ints, n=-1),
        "float": lambda: torch.diff(floats),
        "float dim=0": lambda: torch.diff(floats, dim=0),
        "float n=2 dim=-1": lambda: torch.diff(floats, n=2, dim=-1),
        "prepend": lambda: torch.diff(ints, prepend=torch.tensor([0])),
        "append": lambda: torch.diff(ints, append=torch.tensor([21, 28])),
        "prepend and append dim=0":
            lambda: torch.diff(floats, dim=0, prepend=torch.zeros(1, 3), append=torch.ones(2, 3)),
        "float prepend to int": lambda: torch.diff(ints, prepend=torch.tensor([0.5])),
        "method": lambda: floats.diff(dim=0),
        "bool": lambda: torch.diff(torch.tensor([True, False, False, True])),
        "uint8 wraps": lambda: torch.diff(torch.tensor([5, 2], dtype=torch.uint8)),
        "out=": lambda: torch.diff(ints, out=torch.empty(0, dtype=torch.int64)),
        "0-dim": lambda: torch.diff(torch.tensor(1.0)),
        "0-dim prepend": lambda: torch.diff(ints, prepend=torch.tensor(0)),
        "prepend of the wrong shape": lambda: torch.diff(floats, dim=0, prepend=torch.ones(1, 2)),
    }
    return {name: outcome(call) for name, call in calls.items()}
'''

OPTIMIZERS = r'''
OPTIMIZERS = {
    "SGD momentum": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "SGD nesterov weight_decay": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True,
                                                    "weight_decay": 0.01}),
    "SGD dampening maximize": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "maximize": True}),
    "Adam": (torch.optim.Adam, {"lr": 0.1}),
    "Adam amsgrad weight_decay": (torch.optim.Adam, {"lr": 0.1, "amsgrad": True, "weight_decay": 0.01}),
    "AdamW": (torch.optim.AdamW, {"lr": 0.1}),
    "AdamW amsgrad": (torch.optim.AdamW, {"lr": 0.1, "amsgrad": True, "weight_decay": 0.1}),
    "RMSprop": (torch.optim.RMSprop, {"lr": 0.01}),
    "RMSprop centered momentum": (torch.optim.RMSprop, {"lr": 0.01, "centered": True, "momentum": 0.9,
                                                        "weight_decay": 0.01}),
    "Adagrad": (torch.optim.Adagrad, {"lr": 0.1}),
    "Adagrad lr_decay weight_decay": (torch.optim.Adagrad, {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.01}),
}


def train(optimizer_class, options):
    # Two parameters of different shapes and dtypes: foreach=True steps lists of both.
    p = torch.nn.Parameter(torch.arange(6.).reshape(2, 3))
    q = torch.nn.Parameter(torch.linspace(-1, 1, 4, dtype=torch.float64))
    optimizer = optimizer_class([p, q], **options)
    for step in range(3):
        # Gradients set by hand, so only the optimizer runs (no autograd); a different one each
        # step so every step's update shows in the result.
        p.grad = torch.full_like(p, 0.5 * (step + 1))
        q.grad = torch.cos(q.detach() * (step + 1))
        optimizer.step()
    result = {"p": p, "q": q, "state_dict": optimizer.state_dict()}
    optimizer.zero_grad()
    result["grad after zero_grad()"] = p.grad
    optimizer.zero_grad(set_to_none=True)
    result["grad after zero_grad(set_to_none=True)"] = p.grad
    return result


def main():
    # foreach=None is the single-tensor path on CPU; True the _foreach_* operators.
    return {f"{name} foreach={foreach}": outcome(lambda: train(optimizer_class, dict(options, foreach=foreach)))
            for name, (optimizer_class, options) in OPTIMIZERS.items() for foreach in (False, None, True)}
'''

DATALOADER_PRELUDE = r'''
from torch.utils.data import DataLoader, Dataset, TensorDataset, get_worker_info

DATASET = TensorDataset(torch.arange(20.).reshape(10, 2), torch.arange(10))


class Noisy(Dataset):
    """Draws from torch's generator in __getitem__, as random augmentations do."""

    def __len__(self):
        return 6

    def __getitem__(self, index):
        worker = get_worker_info()
        return index, torch.rand(()), -1 if worker is None else worker.id, torch.initial_seed()


def shuffled(**options):
    return DataLoader(DATASET, batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(0), **options)


def epochs(loader, count=2):
    # Two epochs: the second one's order comes from the generator's state after the first.
    return [list(loader) for _ in range(count)]
'''

DATALOADER_MAIN_PROCESS = DATALOADER_PRELUDE + r'''
def main():
    torch.manual_seed(0)
    return {
        "shuffled": epochs(shuffled(num_workers=0)),
        "len": len(shuffled()),
        "drop_last": list(shuffled(drop_last=True)),
        "sequential": list(DataLoader(DATASET, batch_size=4)),
        "random in __getitem__": list(DataLoader(Noisy(), batch_size=2)),
    }
'''

DATALOADER_WORKERS = DATALOADER_PRELUDE + r'''
def main():
    return {
        "num_workers=2": epochs(shuffled(num_workers=2)),
        "num_workers=2 persistent_workers": epochs(shuffled(num_workers=2, persistent_workers=True)),
        # Each worker seeds torch with the loader's base seed plus its id.
        "random in __getitem__": list(DataLoader(Noisy(), batch_size=2, num_workers=2,
                                                 generator=torch.Generator().manual_seed(0))),
    }
'''

DATALOADER_WORKER_ERROR = r'''
from torch.utils.data import DataLoader, Dataset


class Faulty(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        if index == 4:
            raise ValueError(f"sample {index} is unreadable")
        return index


def failure(num_workers):
    delivered = []
    try:
        for batch in DataLoader(Faulty(), num_workers=num_workers):
            delivered.append(batch)
    except Exception as error:
        # The rest of a worker's message is its traceback, with upstream's paths.
        return {"delivered before": delivered, "type": type(error).__name__,
                "first line": str(error).partition("\n")[0],
                "has the original message": "sample 4 is unreadable" in str(error)}
    return {"delivered": delivered}


def main():
    return {f"num_workers={count}": failure(count) for count in (0, 2)}
'''

SHARE_MEMORY = r'''
import torch.multiprocessing


def main():
    t = torch.arange(4.)
    view = t[1:]
    before = [t.is_shared(), t.storage().is_shared()]
    returned = t.share_memory_()
    t.add_(1)
    model = torch.nn.Linear(2, 2)
    return {
        "before": before,
        "share_memory_ returns the tensor": returned is t,
        "after": [t.is_shared(), t.storage().is_shared(), view.is_shared()],
        "written after sharing": [t, view],
        "Module.share_memory": [type(model.share_memory()).__name__,
                                [p.is_shared() for p in model.parameters()]],
        "sharing strategy": torch.multiprocessing.get_sharing_strategy(),
        "all strategies": sorted(torch.multiprocessing.get_all_sharing_strategies()),
    }
'''

QUEUE_ROUND_TRIP = r'''
import time

import torch.multiprocessing as mp


def child(strategy, inbox, outbox):
    mp.set_sharing_strategy(strategy)
    # Errors travel back as values, so the parent never waits on a child that gave up.
    outbox.put(outcome(lambda: touch(inbox.get())))
    refusal = outcome(lambda: outbox.put(torch.full((3,), 7.0)))  # a tensor made here travels back too
    if "error" in refusal:
        outbox.put(refusal)
    inbox.get()  # the parent's acknowledgement: a file descriptor needs its sender alive until received


def touch(received):
    received.add_(100)  # in place, through the shared storage
    return {"shared in child": received.is_shared(), "seen by child": received}


def receive(outbox, process):
    while outbox.empty():
        if not process.is_alive():
            return {"child died": process.exitcode}
        time.sleep(0.01)
    return outbox.get()


def round_trip(strategy):
    mp.set_sharing_strategy(strategy)
    context = mp.get_context(START_METHOD)
    # SimpleQueue pickles in put() itself, so a refusal to share raises here, not in a feeder thread.
    inbox, outbox = context.SimpleQueue(), context.SimpleQueue()
    process = context.Process(target=child, args=(strategy, inbox, outbox))
    process.start()
    try:
        sent = torch.arange(4.)
        inbox.put(sent)
        result = {"child": receive(outbox, process)}
        back = receive(outbox, process)
        result["from child"] = [back, back.is_shared()] if isinstance(back, torch.Tensor) else back
        result["sent, after the child's update"] = plain(sent)
        result["sent is shared"] = sent.is_shared()
        inbox.put("done")
        process.join(30)
    finally:
        if process.is_alive():
            process.kill()
            process.join()
    result["child exit code"] = process.exitcode
    return result


def main():
    return {strategy: outcome(lambda: round_trip(strategy)) for strategy in STRATEGIES}
'''

FASHION_MNIST = r'''
import itertools

import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms


def main():
    dataset = torchvision.datasets.FashionMNIST(ROOT, train=True, transform=transforms.ToTensor())
    loader = DataLoader(dataset, batch_size=64, shuffle=False, num_workers=NUM_WORKERS)
    batches = [{"images": [str(images.dtype), list(images.shape), images.to(torch.float64).sum().item()],
                "labels": labels}
               for images, labels in itertools.islice(loader, 3)]
    return {"len": len(dataset), "batches": batches}
'''

# The __torch_function__ protocol: Tensor subclasses keep their type through every kind of call
# (bound operators, hand-written methods, properties, indexing, Python-level functions), an
# override sees upstream's function objects, types and arguments, and the switches agree.
TORCH_FUNCTION = r'''
import warnings

import torch.nn.functional as F

warnings.simplefilter("ignore")  # the plain-method deprecation warning goes to stderr, as upstream's
LOG = []


class Plain(torch.Tensor):
    pass


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append([getattr(func, "__name__", repr(func)), [t.__name__ for t in types], len(args),
                    sorted(kwargs or {})])
        if kwargs and kwargs.get("alpha") == 7:
            return NotImplemented
        return super().__torch_function__(func, types, args, kwargs)


class Child(Logged):
    pass


class Stand_in:
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return ["stand-in", func.__name__, len(args)]


def kinds(values):
    return {key: type(value).__name__ for key, value in values.items()}


def calls(x):
    out = {"add": x + 1, "radd": 1 + x, "torch.add": torch.add(x, 1, alpha=2), "T": x.T, "mT": x.mT,
           "getitem": x[0], "float": x.float(), "to": x.to(torch.float64), "relu": F.relu(x),
           "linear": torch.nn.Linear(3, 2)(x), "sum": x.sum(dim=0), "view": x.view(3, 2), "data": x.data,
           "cat": torch.cat([torch.ones(2, 3), x]), "new_ones": x.new_ones(2), "mm": x @ x.T,
           "norm": torch.linalg.vector_norm(x), "shape": x.shape, "size": x.size(), "dim": x.dim()}
    return kinds(out)


def protocol():
    p = torch.Tensor._make_subclass(Plain, torch.ones(2))
    with torch._C.DisableTorchFunction():
        disabled = [torch._C._is_torch_function_enabled(), type(p + 1).__name__,
                    torch.overrides.has_torch_function((p,))]
        with torch._C.DisableTorchFunction():
            pass
        disabled.append(torch._C._is_torch_function_enabled())
    # A class changed after use: the next call sees the change (the shim remembers answers per type).
    class Late(torch.Tensor):
        pass
    late = torch.Tensor._make_subclass(Late, torch.ones(1))
    changes = [type(late + 1).__name__]
    Late.__torch_function__ = torch._C._disabled_torch_function_impl
    changes.append(type(late + 1).__name__)
    del Late.__torch_function__
    changes.append(type(late + 1).__name__)
    return {"disabled": disabled, "enabled after": torch._C._is_torch_function_enabled(), "changes": changes,
            "has_torch_function": [torch.overrides.has_torch_function((p,)),
                                   torch.overrides.has_torch_function((torch.ones(1),)),
                                   torch.overrides.has_torch_function((torch.nn.Parameter(torch.ones(1)),))]}


def main():
    base = torch.arange(6.).reshape(2, 3)
    plain = torch.Tensor._make_subclass(Plain, base.clone())
    logged = base.clone().as_subclass(Logged)
    child = torch.Tensor._make_subclass(Child, torch.ones(2, 3))
    plain[0] = 5
    logged[1, 1] = -1
    result = {"plain": calls(plain), "logged": calls(logged), "after setitem": [plain, logged.as_subclass(torch.Tensor)]}
    LOG.clear()
    result["mixed"] = kinds({"cat": torch.cat([logged, child]), "mul": torch.ones(2, 3) * child})
    logged.requires_grad_(False)
    _ = logged.grad, logged.requires_grad, logged[0], logged.shape
    result["log"] = list(LOG)
    result["declined"] = outcome(lambda: torch.add(logged, 1, alpha=7))
    result["stand-in"] = [torch.add(Stand_in(), 1), torch.add(torch.ones(1), Stand_in()), torch.cat([Stand_in()])]
    result["parameter"] = kinds({"mul": torch.nn.Parameter(torch.ones(2)) * 2})
    result["as_subclass"] = [outcome(lambda: torch.ones(1).as_subclass(int)),
                             outcome(lambda: torch.ones(1).as_subclass(3)),
                             torch.ones(1, requires_grad=True).as_subclass(Plain).requires_grad,
                             base.as_subclass(Plain).data_ptr() == base.data_ptr()]
    result["protocol"] = protocol()
    return result
'''

# What a script asks before it picks a device: upstream's CPU build answers without CUDA or MPS
# (its torch._C lacks the _cuda_* functions, so torch.cuda reads as not compiled), never a refusal.
DEVICE_PROBES = r'''
def main():
    probes = {
        "cuda.is_available": torch.cuda.is_available, "cuda.device_count": torch.cuda.device_count,
        "cuda.is_initialized": torch.cuda.is_initialized, "backends.cuda.is_built": torch.backends.cuda.is_built,
        "cudnn.is_available": torch.backends.cudnn.is_available, "mps.is_available": torch.backends.mps.is_available,
        "mps.is_built": torch.backends.mps.is_built, "has_cuda": lambda: torch.has_cuda,
        "cuda.manual_seed_all": lambda: torch.cuda.manual_seed_all(0), "cuda.empty_cache": torch.cuda.empty_cache,
        "cuda.memory_allocated": torch.cuda.memory_allocated, "cuda.get_device_name": torch.cuda.get_device_name,
        "cuda.synchronize": torch.cuda.synchronize, "tensor.cuda()": lambda: torch.ones(1).cuda(),
        "tensor.ipu()": lambda: torch.ones(1).ipu(), "tensor.xpu()": lambda: torch.ones(1).xpu(),
        "fork_rng": lambda: torch.random.fork_rng().__enter__() is None,
    }
    return {name: outcome(probe) for name, probe in probes.items()}
'''

# What printing torch.finfo / torch.iinfo shows (logs and error messages print them), and the fields.
DTYPE_INFO = r'''
def main():
    floats = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    ints = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    infos = [torch.finfo(d) for d in floats] + [torch.iinfo(d) for d in ints] + [torch.finfo()]
    fields = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")
    return [(repr(info), str(info), [getattr(info, f, None) for f in fields]) for info in infos]
'''

# Every way a device reaches a call, for the devices a CPU build lacks: refused as upstream's
# CPU build refuses them (never a CPU tensor in their place), the cpu accepted in every spelling.
DEVICE_ARGUMENTS = r'''
def main():
    cuda = torch.device("cuda")
    probes = {}
    for name, device in (("str", "cuda"), ("str:0", "cuda:0"), ("device", cuda), ("ordinal", 0)):
        probes.update({
            name + ": ones": lambda device=device: torch.ones(1, device=device),
            name + ": tensor": lambda device=device: torch.tensor([1.0], device=device),
            name + ": as_tensor": lambda device=device: torch.as_tensor([1.0], device=device),
            name + ": zeros_like": lambda device=device: torch.zeros_like(torch.ones(1), device=device),
            name + ": new_ones": lambda device=device: torch.ones(1).new_ones(2, device=device),
            name + ": new_tensor": lambda device=device: torch.ones(1).new_tensor([1], device=device),
            name + ": new": lambda device=device: torch.ones(1).new(2, device=device),
            name + ": to": lambda device=device: torch.ones(1).to(device),
            name + ": to(device=)": lambda device=device: torch.ones(1).to(device=device),
            name + ": to(device, dtype)": lambda device=device: torch.ones(1).to(device, torch.float64),
            name + ": Generator": lambda device=device: torch.Generator(device),
            name + ": UntypedStorage": lambda device=device: torch.UntypedStorage(3, device=device),
            name + ": Module.to": lambda device=device: torch.nn.Linear(1, 1).to(device),
        })
    for name, device in (("cpu", "cpu"), ("cpu:0", "cpu:0"), ("device", torch.device("cpu"))):
        probes[name + ": ones"] = lambda device=device: str(torch.ones(1, device=device).device)
        probes[name + ": to"] = lambda device=device: str(torch.ones(1).to(device).device)
        probes[name + ": Module.to"] = lambda device=device: str(next(torch.nn.Linear(1, 1).to(device).parameters()).device)
    probes["device(0)"] = lambda: repr(torch.device(0))
    probes["device(-1)"] = lambda: torch.device(-1)
    probes["bogus"] = lambda: torch.ones(1, device="bogus")
    probes["to(bogus)"] = lambda: torch.ones(1).to("bogus")
    probes["Module.cuda"] = lambda: torch.nn.Linear(1, 1).cuda()
    return {name: outcome(probe) for name, probe in probes.items()}
'''

# nn.Module.to and Tensor.to: torch._C._nn._parse_to's answers, and what they convert.
MODULE_TO = r'''
def main():
    parse = torch._C._nn._parse_to
    t = torch.ones(1, dtype=torch.float64)
    calls = [((), {}), (("cpu",), {}), ((torch.float16,), {}), (("cpu", torch.int32), {}), ((t,), {}),
             ((), {"dtype": torch.float32, "non_blocking": True}), ((), {"memory_format": torch.channels_last}),
             (("cpu", torch.float32, True), {}), ((torch.float32, True, True), {}), ((None, None, False), {}),
             ((torch.device("cpu"),), {"copy": True}), ((0,), {}), (("bogus",), {})]
    parsed = [outcome(lambda: [str(v) for v in parse(*a, **k)]) for a, k in calls]
    m = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    dtypes = lambda: [str(b.dtype) for b in list(m.parameters()) + list(m.buffers())]
    steps = []
    for convert in (lambda: m.to(torch.float64), lambda: m.to("cpu", torch.float32), lambda: m.half(),
                    lambda: m.to(t), lambda: m.float()):
        convert()
        steps.append(dtypes())
    x = torch.ones(2, 3)
    converted = []
    for a, k in [((torch.float64,), {}), (("cpu", torch.int32), {}), ((t,), {}), ((torch.float32, False, True), {}),
                 ((), {"dtype": torch.float16, "copy": True}), ((torch.float32,), {}), (("cpu",), {}),
                 ((), {"copy": True})]:
        y = x.to(*a, **k)
        converted.append((str(y.dtype), y is x, y.data_ptr() == x.data_ptr()))
    return parsed, steps, converted
'''

# is_contiguous(memory_format=...) over permuted 4-D and 5-D tensors, and x.T's deprecation
# warning (once per process; upstream's text without its "Triggered internally" C++ location).
LAYOUT_QUERIES = r'''
import warnings


def main():
    nchw = torch.ones(2, 3, 4, 5)
    nhwc = nchw.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    ndhwc = torch.ones(2, 3, 4, 5, 6).permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)
    formats = (torch.contiguous_format, torch.preserve_format, torch.channels_last, torch.channels_last_3d)
    tensors = (nchw, nhwc, ndhwc, torch.ones(2, 1, 4, 5), torch.ones(2, 3), nchw[:, :, ::2], torch.ones(0, 3, 1, 1))
    answers = [[outcome(lambda: t.is_contiguous(memory_format=f)) for f in formats] for t in tensors]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shapes = [list(torch.ones(shape).T.shape) for shape in ((2, 3), (), (2, 3, 4), (3,))]
    messages = [(w.category.__name__, str(w.message).partition(" (Triggered internally")[0]) for w in caught]
    return answers, shapes, messages
'''

CASES = {
    "record_function": RECORD_FUNCTION,
    "record_function_new": RECORD_FUNCTION_NEW,
    "complex_dtype_predicates": COMPLEX_DTYPE_PREDICATES,
    "reduction_with_threads": REDUCTION_WITH_THREADS,
    "record_function_in_profiler": RECORD_FUNCTION_IN_PROFILER,
    "vitals_off": VITALS,
    "vitals_on": VITALS,
    "out_none": OUT_NONE,
    "dtype_predicates": DTYPE_PREDICATES,
    "num_threads": NUM_THREADS,
    "inference_mode": INFERENCE_MODE,
    "inference_mode_autograd": INFERENCE_MODE_AUTOGRAD,
    "diff": DIFF,
    "optimizers": OPTIMIZERS,
    "dataloader_main_process": DATALOADER_MAIN_PROCESS,
    "dataloader_workers": DATALOADER_WORKERS,
    "dataloader_worker_error": DATALOADER_WORKER_ERROR,
    "share_memory": SHARE_MEMORY,
    "torch_function": TORCH_FUNCTION,
    "device_probes": DEVICE_PROBES,
    "dtype_info": DTYPE_INFO,
    "device_arguments": DEVICE_ARGUMENTS,
    "module_to": MODULE_TO,
    "layout_queries": LAYOUT_QUERIES,
    **{f"queue_{method}_{strategy}": f'START_METHOD = "{method}"\nSTRATEGIES = ("{strategy}",)\n' + QUEUE_ROUND_TRIP
       for method in ("fork", "spawn") for strategy in ("file_descriptor", "file_system")},
}

# Vitals are off unless TORCH_VITAL is set; when on, upstream also prints them at exit.
CASE_ENV = {"vitals_on": {"TORCH_VITAL": "1"}}

# What the shim does not have yet, each case with the reason it fails (strict: a case that
# starts agreeing fails until its mark is removed). Open items of issue 14.
NOT_YET = {
    "record_function_new": "custom-class values (torch.classes.profiler._RecordFunction) are not implemented",
    "record_function_in_profiler": "the shim has no profiler (torch.autograd.profiler.profile is refused)",
    "complex_dtype_predicates": "the shim has no complex dtypes",
    "reduction_with_threads": "reductions run in upstream's one-thread order whatever set_num_threads says",
    "queue_fork_file_system": "the file_system sharing strategy (torch_shm_manager) is not implemented",
    "queue_spawn_file_system": "the file_system sharing strategy (torch_shm_manager) is not implemented",
}


def case_params():
    return [pytest.param(name, marks=pytest.mark.xfail(reason=NOT_YET[name], strict=True)) if name in NOT_YET
            else name for name in CASES]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    record: dict | None  # {"torch": its __file__, "outcome": outcome(main)}; None if the script died


def run_both(body, directory, extra_env=None):
    """Run the script under upstream and the shim at once (each import of torch takes seconds)."""
    source = PRELUDE + body + EPILOGUE
    environment = {key: value for key, value in os.environ.items() if key != "TORCH_VITAL"}
    environment.update(extra_env or {})
    # PYTHONPATH could point upstream's interpreter at our tree.
    upstream_environment = {key: value for key, value in environment.items() if key != "PYTHONPATH"}
    processes = {}
    for side, python, env in (("upstream", UPSTREAM_PYTHON, upstream_environment), ("ours", SHIM_PYTHON, environment)):
        folder = directory / side
        folder.mkdir()
        (folder / "script.py").write_text(source)
        processes[side] = subprocess.Popen([python, "script.py", "record.json"], cwd=folder, env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = {}
    for side, process in processes.items():
        try:
            stdout, stderr = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            stderr += f"\n(killed after {TIMEOUT} s)"
        record_file = directory / side / "record.json"
        record = json.loads(record_file.read_text()) if record_file.exists() else None
        runs[side] = Run(process.returncode, stdout, stderr, record)
    upstream, ours = runs["upstream"], runs["ours"]
    if upstream.record is not None:
        assert upstream.record["torch"].startswith(UPSTREAM_TORCH), upstream.record["torch"]
    if ours.record is not None:
        assert not ours.record["torch"].startswith(UPSTREAM_TORCH), "the shim's interpreter imports upstream's torch"
    return upstream, ours


def short(value, limit=300):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def differences(ours, upstream, path="result"):
    """Where ours differs from upstream: same JSON types (1 is not 1.0, True is not 1), floats bit for bit."""
    mismatch = [f"{path}: ours {short(ours)}, upstream {short(upstream)}"]
    if type(ours) is not type(upstream):
        return mismatch
    if isinstance(upstream, dict):
        if ours.keys() != upstream.keys():
            return mismatch
        return [line for key in upstream for line in differences(ours[key], upstream[key], f"{path}[{key!r}]")]
    if isinstance(upstream, list):
        if len(ours) != len(upstream):
            return mismatch
        return [line for index, (mine, theirs) in enumerate(zip(ours, upstream))
                for line in differences(mine, theirs, f"{path}[{index}]")]
    if isinstance(upstream, float) and math.isnan(upstream) and math.isnan(ours):
        return []
    if isinstance(upstream, float) and math.copysign(1.0, ours) != math.copysign(1.0, upstream):
        return mismatch  # -0.0 == 0.0, but not bit for bit
    return [] if ours == upstream else mismatch


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def assert_agree(upstream, ours):
    assert upstream.returncode == 0 and upstream.record is not None, f"upstream failed:\n{upstream.stderr}"
    assert "value" in upstream.record["outcome"], f"upstream raised: {upstream.record['outcome']}"
    assert ours.record is not None, f"the shim died (exit {ours.returncode}): {last_line(ours.stderr)}"
    found = differences(ours.record["outcome"], upstream.record["outcome"])
    assert found == [], "\n".join(found[:20])
    assert ours.stdout == upstream.stdout
    assert ours.returncode == 0, f"the shim exited {ours.returncode}: {last_line(ours.stderr)}"


@pytest.mark.parametrize("name", case_params())
def test_agrees_with_upstream(name, tmp_path):
    assert_agree(*run_both(CASES[name], tmp_path, CASE_ENV.get(name)))


def test_second_set_num_interop_threads_is_refused(tmp_path):
    upstream, ours = run_both(SECOND_SET_NUM_INTEROP_THREADS, tmp_path)
    # Upstream's binding lets the c10::Error escape to std::terminate: the interpreter aborts,
    # printing the refusal. The shim never crashes, so it raises that refusal as a RuntimeError.
    assert upstream.returncode == -signal.SIGABRT, upstream.stderr
    refusal = re.search(r"what\(\):  (.*)", upstream.stderr).group(1)
    assert ours.record is not None, f"the shim died (exit {ours.returncode}): {last_line(ours.stderr)}"
    expected = {"value": {"second call": {"error": "RuntimeError", "message": refusal},
                          "get_num_interop_threads": 2}}
    found = differences(ours.record["outcome"], expected)
    assert found == [], "\n".join(found)


@pytest.fixture(scope="module")
def fashion_mnist_root(tmp_path_factory):
    """torchvision's layout, root/FashionMNIST/raw/*-ubyte, built from Debian's dataset-fashion-mnist."""
    try:
        return fashion_mnist.torchvision_root(tmp_path_factory.mktemp("fashion-mnist"))
    except fashion_mnist.NotInstalled as missing:
        pytest.skip(str(missing))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_fashion_mnist_batches_agree(fashion_mnist_root, num_workers, tmp_path):
    constants = f"ROOT = {str(fashion_mnist_root)!r}\nNUM_WORKERS = {num_workers}\n"
    assert_agree(*run_both(constants + FASHION_MNIST, tmp_path))
