"""Runs OpInfo sample cases inside one interpreter (shim or upstream) and streams results.

  sample_worker.py --samples FILE --names FILE --out FILE [--reference] [--record-ops]

Speaks the protocol of ../worker.py (run.py's run_worker drives it): {"start": name}
before each case, then its record, both flushed.  FILE is generate.py's output; a
case is rebuilt from it with codec.py only (this process never imports op_db), its
rebuilt tensors are checked against the encoding (dtype, shape, strides, offset,
values bit for bit), the generator is seeded with 0, and the callable is called as
upstream's test_ops does: fn(input, *args, **kwargs).  The record's value is the
tuple (return value, tuple of the tensors among the inputs after the call), encoded
by ../worker.py's encode(), so writes into inputs are compared too.

--reference  float32 tensors and dtype arguments become float64, and so does the
             default dtype (the tolerance reference, see ../compare.py).
--record-ops rerun each case under a TorchDispatchMode (upstream only): list the aten
             overloads it dispatched, mark it "random" if one of them is tagged
             nondeterministic_seeded, and "nondeterministic" if the rerun (with the
             same seed) returned something else and a third plain run confirms it
             (suite.py then measures the spread of upstream's runs of that OpInfo).
"""

import argparse
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import codec  # noqa: E402
import worker as golden_worker  # noqa: E402  (../worker.py: encode, _exception_record, fault hook)

SEED = 0


class InputMismatch(Exception):
    """A rebuilt input is not the tensor the encoding describes."""


def build(torch, catalog, case, decoders, reference):
    """(callable, input, args, kwargs) for a case, checked against the encoding."""
    sample = catalog["samples"][case["sample"]]
    decoder = codec.Decoder(torch, sample["storages"], reference)
    parts = {"t": "tuple", "v": [sample["input"], sample["args"], sample["kwargs"]]}
    built = decoder.decode(parts)
    for index, (tensor, encoded) in enumerate(zip(codec.live_tensors(torch, built), codec.tensors_in(parts))):
        problem = codec.check_rebuilt(torch, tensor, encoded, sample["storages"], reference)
        if problem:
            raise InputMismatch("tensor input %d: %s" % (index, problem))
    function = decoders.decode(case["callable"])
    return function, built


def call(torch, function, built):
    torch.manual_seed(SEED)
    value = function(built[0], *built[1], **built[2])
    return value, tuple(codec.live_tensors(torch, built))


def run_case(torch, catalog, case, decoders, reference):
    record = {"name": case["name"]}
    try:
        function, built = build(torch, catalog, case, decoders, reference)
    except Exception as error:
        return golden_worker._exception_record(record, "building inputs", error), None
    try:
        value = call(torch, function, built)
    except Exception as error:
        return golden_worker._exception_record(record, "call", error), None
    try:
        record["value"] = split_complex(golden_worker.encode(torch, value))
    except Exception as error:
        return golden_worker._exception_record(record, "reading the result", error), None
    return record, (function, built)


COMPLEX_PARTS = {"torch.complex32": "torch.float16", "torch.complex64": "torch.float32",
                 "torch.complex128": "torch.float64"}


def split_complex(encoded):
    """A complex tensor as ("<dtype>", real part, imaginary part): JSON has no complex
    numbers, and so the parts get compare.py's float tolerances."""
    if encoded.get("kind") == "tensor" and encoded["dtype"] in COMPLEX_PARTS:
        def part(data, attribute):
            if isinstance(data, list):
                return [part(item, attribute) for item in data]
            return float(getattr(data, attribute))
        parts = [dict(encoded, dtype=COMPLEX_PARTS[encoded["dtype"]], data=part(encoded["data"], attribute))
                 for attribute in ("real", "imag")]
        return {"kind": "tuple", "items": [{"kind": "str", "value": "complex tensor " + encoded["dtype"]}] + parts}
    if "items" in encoded:
        return dict(encoded, items=[split_complex(item) for item in encoded["items"]])
    return encoded


def make_recorder(torch):
    from torch.utils._python_dispatch import TorchDispatchMode

    seeded = torch.Tag.nondeterministic_seeded

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()
            self.random = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            schema = func._schema
            self.ops.add(schema.name + ("." + schema.overload_name if schema.overload_name else ""))
            if seeded in getattr(func, "tags", ()):
                self.random = True
            return func(*args, **(kwargs or {}))

    def record(torch, catalog, case, decoders, reference, record):
        try:
            function, built = build(torch, catalog, case, decoders, reference)
        except Exception:
            return
        recorder = Recorder()
        rerun = None
        try:
            with recorder:
                rerun = split_complex(golden_worker.encode(torch, call(torch, function, built)))
        except Exception:
            pass
        record["ops"] = sorted(recorder.ops)
        if recorder.random:
            record["random"] = True
        if "value" in record and rerun is not None and not _same(rerun, record["value"]):
            # Dispatch modes can change a result (a Python-level decomposition); only a
            # plain third run that also disagrees shows the operation is nondeterministic.
            def plain_run():
                try:
                    function, built = build(torch, catalog, case, decoders, reference)
                    return split_complex(golden_worker.encode(torch, call(torch, function, built)))
                except Exception:
                    return None
            third = plain_run()
            if third is None or not _same(third, record["value"]):
                record["nondeterministic"] = True

    return record


def _same(a, b):
    """Encoded results equal as JSON (so NaN equals NaN, and -0.0 differs from 0.0)."""
    try:
        return json.dumps(a) == json.dumps(b)
    except (TypeError, ValueError):  # e.g. complex elements: this record fails to serialize anyway
        return a == b


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", required=True)
    parser.add_argument("--names", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--record-ops", action="store_true")
    options = parser.parse_args()

    warnings.simplefilter("ignore")
    import torch

    catalog, cases, names = codec.worker_inputs(options.samples, options.names)
    if options.reference:
        torch.set_default_dtype(torch.float64)
    decoders = codec.CallableDecoder(torch, catalog["callables"], options.reference)
    recorder = make_recorder(torch) if options.record_ops else None
    with open(options.out, "w") as out:
        for name in names:
            out.write(json.dumps({"start": name}) + "\n")
            out.flush()
            golden_worker._inject_fault(name)
            case = cases[name]
            record, _ = run_case(torch, catalog, case, decoders, options.reference)
            if recorder:
                try:
                    recorder(torch, catalog, case, decoders, options.reference, record)
                except Exception as error:  # the plain run's record stands
                    record["record_ops_error"] = "%s: %s" % (type(error).__name__, error)
            try:
                line = json.dumps(record)
            except (TypeError, ValueError) as error:
                line = json.dumps(golden_worker._exception_record({"name": name}, "serializing the result", error))
            out.write(line + "\n")
            out.flush()


if __name__ == "__main__":
    sys.exit(main())
