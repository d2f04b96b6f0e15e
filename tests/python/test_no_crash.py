"""Never a crash: every operator reachable from Python, called with assorted valid and
invalid arguments, either returns or raises. A segfault or SIGFPE kills the child
interpreter, and the test names the last operator it reached."""
import os
import subprocess
import sys

import pytest

PROBE = r'''
import sys
import torch
x = torch.tensor([[1.5, -2.0, 0.0], [3.0, 4.0, -1.0]])
i = torch.tensor([[1, 0, 2], [0, 1, 1]])
b = torch.tensor([True, False, True])
e = torch.tensor([])
s = torch.tensor(2.0)
x4 = torch.ones(1, 2, 3, 3)
ARGS = [(), (x,), (x, x), (x, 1), (x, 0), (x, -1), (i,), (b,), (e,), (s,), (x, 0, i), (x, x, x), (x, [0, 1]),
        (x, 1.5), (x, None), ("a",), (x, "sum"), (i, i), (e, e), (x4,), (x4, 0), (x4, [0, 0]), (x4, 2), ((0, 1),),
        (slice(None, None, -1),), (x, 0, 0)]
SAMPLES = (x, i, s, e, x4)

STORAGE_SAMPLES = (torch.UntypedStorage([1, 2, 3, 4]), torch.UntypedStorage(), x.storage())

def future_samples():
    # Completed ones only: wait() on a pending future would rightly block forever.
    done = torch.futures.Future()
    done.set_result(x)
    failed = torch.futures.Future()
    failed.set_exception(ValueError("sample"))
    return (done, failed, done.then(lambda f: 1 / 0), torch._C._collect_all([done, failed]))

def targets(group):
    if group == "tensor":
        return [(name, None) for name in sorted(dir(torch._C._TensorBase)) if not name.startswith("__")]
    if group == "storage":
        return [(name, None) for name in sorted(dir(torch._C.StorageBase)) if name not in ("__init__", "__new__")]
    if group == "future":
        return ([(name, None) for name in sorted(dir(torch._C.Future)) if not name.startswith("__")]
                + [("_collect_all", torch._C._collect_all), ("Future", torch._C.Future)])
    module = getattr(torch._C, group)
    return [(name, getattr(module, name)) for name in sorted(dir(module)) if not name.startswith("__")]

def bound(sample, name):
    try:
        fresh = sample if isinstance(sample, torch._C.Future) else sample.clone()
        return getattr(fresh, name)  # properties may raise (imag on real dtypes)
    except Exception:
        return None

for name, fn in targets(sys.argv[1]):
    sys.stderr.write(name + "\n")
    sys.stderr.flush()
    for args in ARGS:
        samples = {"storage": STORAGE_SAMPLES, "future": future_samples()}.get(sys.argv[1], SAMPLES)
        callables = [fn] if fn is not None else [bound(t, name) for t in samples]
        for call in callables:
            try:
                call(*args)
            except Exception:
                pass
print("done")
'''


@pytest.mark.parametrize("group", ["_VariableFunctions", "_nn", "_linalg", "_special", "_fft", "tensor", "storage",
                                   "future"])
def test_odd_arguments_never_crash(group):
    process = subprocess.run([sys.executable, "-c", PROBE, group], capture_output=True, text=True, timeout=900)
    last = process.stderr.strip().splitlines()[-1:] if process.stderr.strip() else ["(none)"]
    assert process.returncode == 0 and "done" in process.stdout, (
        "interpreter died (code %d) in or after %s" % (process.returncode, last))
