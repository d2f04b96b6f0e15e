"""Runs OpInfo sample cases on the meta device inside one interpreter (shim or upstream).

  meta_worker.py --samples FILE --names FILE --out FILE [--cpu]

Speaks the protocol of ../worker.py (run.py's run_worker drives it): {"start": name}
before each case, then its record, both flushed.  FILE is meta_sweep.py's catalog:
generate.py's, with each storage reduced to its dtype and element count.  Every tensor
of a sample is rebuilt on the meta device with the encoded shape, strides and offset
(tensors that shared a storage share a meta storage), and the callable is called as
upstream's test_ops does, fn(input, *args, **kwargs).  The record is the layout of the
return value and of the sample's tensors after the call (so in-place calls and resize_
are compared), or the exception's type and first line.

--cpu  the tensors are rebuilt on the cpu with their values (FILE is then generate.py's own
       catalog): upstream's cpu result, the second oracle where upstream's meta disagrees.
"""

import argparse
import json
import math
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import codec  # noqa: E402


class MetaDecoder(codec.Decoder):
    """Decoder whose storages are meta tensors of the encoded dtype and element count."""

    def storage(self, index):
        if index not in self._built:
            entry = self.storages[index]
            self._built[index] = self.torch.empty(entry["size"], dtype=self.dtype(entry["dtype"]), device="meta")
        return self._built[index]


def layout(torch, value):
    """A JSON-able description of a result: tensors by device, shape, strides, offset, dtype."""
    if isinstance(value, torch.Tensor):
        return {"device": value.device.type, "shape": list(value.shape), "stride": list(value.stride()),
                "offset": value.storage_offset(), "dtype": str(value.dtype)}
    if isinstance(value, torch.Size):
        return {"size": list(value)}
    if isinstance(value, (tuple, list)):
        return [layout(torch, item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"type": type(value).__name__}


def run_case(torch, catalog, case, decoders, on_cpu):
    sample = catalog["samples"][case["sample"]]
    try:
        decoder = (codec.Decoder if on_cpu else MetaDecoder)(torch, sample["storages"])
        built = decoder.decode({"t": "tuple", "v": [sample["input"], sample["args"], sample["kwargs"]]})
        function = decoders.decode(case["callable"])
    except Exception as error:
        return {"name": case["name"], "harness": "%s: %s" % (type(error).__name__, first_line(error))}
    try:
        torch.manual_seed(0)
        value = function(built[0], *built[1], **built[2])
        return {"name": case["name"], "value": layout(torch, value),
                "inputs": layout(torch, codec.live_tensors(torch, built))}
    except Exception as error:
        return {"name": case["name"], "exc": type(error).__name__, "msg": first_line(error)}


def first_line(error):
    return str(error).strip().split("\n")[0][:300]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", required=True)
    parser.add_argument("--names", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cpu", action="store_true")
    options = parser.parse_args()

    warnings.simplefilter("ignore")
    import torch

    catalog, cases, names = codec.worker_inputs(options.samples, options.names)
    decoders = codec.CallableDecoder(torch, catalog["callables"])
    with open(options.out, "w") as out:
        for name in names:
            out.write(json.dumps({"start": name}) + "\n")
            out.flush()
            record = run_case(torch, catalog, cases[name], decoders, options.cpu)
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    sys.exit(main())
