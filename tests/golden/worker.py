"""Runs golden cases inside one interpreter (shim or upstream) and streams results.

Usage:
  worker.py --list [-k PATTERN]                 print the selected case names, each
                                                followed by the overload it requires, if any
  worker.py --names FILE --out FILE [--reference] [--record-ops]

Each case appends two JSON lines to --out: {"start": name} before it runs and
its result after, both flushed, so that if the process dies (segfault, abort)
or hangs, the orchestrator knows which case was running.  Results contain only
plain Python types; results are read back through nothing more than
``.dtype``, ``.shape`` and ``.tolist()``.

--reference  evaluate in float64: low-precision float inputs and the working
             dtype become float64 and the default dtype is float64 (so integer
             inputs promote to float64 too).  Cases marked exact are skipped.
--record-ops also rerun each case under a TorchDispatchMode and list the aten
             overloads it dispatched (upstream only).
"""

import argparse
import json
import os
import re
import signal
import sys
import time
import warnings

# Test hook for selftest.py: "crash:<case>" or "hang:<case>" makes this worker
# die by SIGSEGV / stop making progress when it reaches that case.
FAULT_ENV = "GOLDEN_WORKER_FAULT"


def encode(torch, value, strides=False):
    """A JSON-able description of a case result using only basic tensor API (and
    ``.stride()`` for a case that compares strides)."""
    if isinstance(value, torch.Tensor):
        encoded = {"kind": "tensor", "dtype": str(value.dtype), "shape": list(value.shape), "data": value.tolist()}
        if strides:
            encoded["strides"] = list(value.stride())
        return encoded
    if isinstance(value, torch.Size):
        return {"kind": "size", "items": [encode(torch, size) for size in value]}
    if value is None or type(value) in (bool, int, float, str):
        return {"kind": type(value).__name__, "value": value}
    if isinstance(value, (tuple, list)):  # includes torch.return_types structseqs
        return {"kind": "list" if isinstance(value, list) else "tuple",
                "items": [encode(torch, item, strides) for item in value]}
    return {"kind": "object", "type": type(value).__name__, "value": str(value)}


def _exception_record(record, phase, error):
    record["exc"] = type(error).__name__
    record["phase"] = phase
    record["msg"] = str(error).strip().split("\n")[0][:300]
    return record


def run_case(torch, case, reference):
    record = {"name": case.name}
    try:
        args = case.materialize(torch, reference)
    except Exception as error:
        return _exception_record(record, "building inputs", error)
    try:
        value = case.fn(*args)
    except Exception as error:
        return _exception_record(record, "call", error)
    try:
        record["value"] = encode(torch, value, case.strides)
    except Exception as error:
        return _exception_record(record, "reading the result", error)
    return record


def make_op_recorder(torch):
    """Returns a function running a case under a dispatch mode; it yields the aten overloads seen."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            schema = func._schema
            self.ops.add(schema.name + ("." + schema.overload_name if schema.overload_name else ""))
            return func(*args, **(kwargs or {}))

    def record_ops(case, reference):
        args = case.materialize(torch, reference)  # outside the mode: inputs are not the case's ops
        recorder = Recorder()
        try:
            with recorder:
                case.fn(*args)
        except Exception:
            pass  # the plain run already recorded the outcome; ops dispatched so far still count
        return sorted(recorder.ops)

    return record_ops


def _inject_fault(name):
    kind, _, target = os.environ.get(FAULT_ENV, "").partition(":")
    if target != name:
        return
    if kind == "crash":
        # The default action first: a sanitizer runtime's handler would report and exit instead.
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "hang":
        time.sleep(3600)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true")
    parser.add_argument("-k", dest="pattern")
    parser.add_argument("--names")
    parser.add_argument("--out")
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--record-ops", action="store_true")
    options = parser.parse_args()

    # Imported only now so that the filter also silences torch's import-time
    # warnings: deprecation chatter on stderr is not a result.
    warnings.simplefilter("ignore")
    import torch
    import cases

    catalog = cases.catalog()
    if options.list:
        pattern = re.compile(options.pattern or "")
        for name, case in catalog.items():
            if pattern.search(name):
                print(name, case.requires or "")
        return

    if options.reference:
        torch.set_default_dtype(torch.float64)
    record_ops = make_op_recorder(torch) if options.record_ops else None
    with open(options.names) as names_file:
        names = names_file.read().split()
    with open(options.out, "w") as out:
        for name in names:
            case = catalog[name]
            if options.reference and case.exact:
                continue
            out.write(json.dumps({"start": name}) + "\n")
            out.flush()
            _inject_fault(name)
            record = run_case(torch, case, options.reference)
            if record_ops:
                record["ops"] = record_ops(case, options.reference)
            try:
                line = json.dumps(record)
            except (TypeError, ValueError) as error:  # e.g. tolist() returned a non-Python type
                line = json.dumps(_exception_record({"name": name}, "serializing the result", error))
            out.write(line + "\n")
            out.flush()


if __name__ == "__main__":
    sys.exit(main())
