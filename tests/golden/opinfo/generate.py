#!/usr/bin/python3
"""Generates upstream's OpInfo samples (float32 and float64, CPU) into a JSON file.

  generate.py --out FILE [-k OP_REGEX] [--max-per-op N]

Runs under upstream torch only: it imports torch.testing._internal's op_db, takes
every OpInfo that supports float32 or float64 on CPU, draws its samples with a
seed derived from the operator's name and dtype, and encodes them with codec.py
together with each variant's callable (function, Tensor method, in-place).  Every
sample is decoded again here and checked against the original tensors (dtype,
shape, strides, storage offset, values bit for bit), and every callable shipped as
source is checked to compile to the original's bytecode; a mismatch is a harness
error (exit 2).  What cannot be shipped is listed under "skipped" with a reason.
"""

import argparse
import json
import os
import random
import re
import sys
import warnings
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import codec  # noqa: E402

DTYPES = ("float32", "float64")
VARIANTS = (("fn", "op"), ("method", "method_variant"), ("inplace", "inplace_variant"))
# OpInfos whose results are uninitialized memory: their values are not compared, only
# kind, dtype and shape (upstream's own OpInfos skip them as "is not comparable").
UNINITIALIZED = ("empty", "empty_like", "new_empty", "new_empty_strided")


def op_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def import_op_db():
    # common_utils parses sys.argv at import time and needs expecttest (not in Debian).
    sys.path.insert(0, os.path.join(HERE, "stub"))
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    finally:
        sys.argv = argv
    return op_db


class HarnessError(Exception):
    pass


def check_sample(torch, original, encoded, storages):
    """Raises HarnessError unless the encoding rebuilds the original tensors exactly."""
    rebuilt = codec.Decoder(torch, storages).decode(encoded)
    originals = codec.live_tensors(torch, original)
    encodings = codec.tensors_in(encoded)
    decoded = codec.live_tensors(torch, rebuilt)
    if not (len(originals) == len(encodings) == len(decoded)):
        raise HarnessError("%d tensors, %d encoded, %d rebuilt" % (len(originals), len(encodings), len(decoded)))
    for index, (tensor, encoding, copy) in enumerate(zip(originals, encodings, decoded)):
        for label, candidate in (("the original", tensor), ("the rebuilt", copy)):
            problem = codec.check_rebuilt(torch, candidate, encoding, storages)
            if problem:
                raise HarnessError("tensor %d: %s tensor: %s" % (index, label, problem))
    # Storage sharing: two tensors share a storage after rebuilding iff they did before.
    for i in range(len(originals)):
        for j in range(i + 1, len(originals)):
            before = originals[i].storage().data_ptr() == originals[j].storage().data_ptr() \
                and originals[i].storage().size() > 0
            after = encodings[i]["storage"] == encodings[j]["storage"]
            if before != after:
                raise HarnessError("tensors %d and %d: storage sharing not preserved" % (i, j))


def check_callable(torch, table, encoded, original):
    rebuilt = codec.CallableDecoder(torch, table).decode(encoded)
    if rebuilt is original:
        return
    if hasattr(original, "__code__") and hasattr(rebuilt, "__code__"):
        if codec.same_code(rebuilt.__code__, original.__code__):
            return
        raise HarnessError("rebuilt %r does not compile to the original bytecode" % original)
    if type(original).__name__ == "partial" and type(rebuilt).__name__ == "partial":
        return
    raise HarnessError("rebuilt callable %r is not %r" % (rebuilt, original))


def generate(torch, op_db, pattern, max_per_op, log):
    pattern = re.compile(pattern or "")
    callables = codec.CallableEncoder(torch)
    samples, cases, skipped, ops = [], [], [], {}
    for op in op_db:
        name = op_name(op)
        if not pattern.search(name):
            continue
        supported = op.supported_dtypes("cpu")
        dtypes = [d for d in DTYPES if getattr(torch, d) in supported]
        if not dtypes:
            continue
        variants = []
        for variant, attribute in VARIANTS:
            function = getattr(op, attribute, None)
            if function is None:
                continue
            try:
                encoded = callables.encode(function)
            except codec.Unshippable as error:
                variants.append((variant, None, "callable not shipped: %s" % error))
                continue
            check_callable(torch, callables.table, encoded, function)
            variants.append((variant, encoded, None))
        ops[name] = {"dtypes": dtypes, "variants": [v[0] for v in variants],
                     "uninitialized": op.name in UNINITIALIZED, "samples": {}}
        for dtype in dtypes:
            seed = zlib.crc32(("%s/%s" % (name, dtype)).encode())
            torch.manual_seed(seed)
            random.seed(seed)
            try:
                import numpy
                numpy.random.seed(seed)
            except ImportError:
                pass
            try:
                drawn = list(op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False))
            except Exception as error:
                skipped.append({"op": name, "dtype": dtype, "variant": "*", "count": 1,
                                "reason": "upstream's sample_inputs raised %s: %s"
                                % (type(error).__name__, str(error).split("\n")[0][:200])})
                continue
            ops[name]["samples"][dtype] = len(drawn)
            if max_per_op is not None and len(drawn) > max_per_op:
                skipped.append({"op": name, "dtype": dtype, "variant": "*", "count": len(drawn) - max_per_op,
                                "reason": "beyond --max-per-op %d" % max_per_op})
                drawn = drawn[:max_per_op]
            for index, sample in enumerate(drawn):
                encoder = codec.Encoder(torch)
                try:
                    encoded = {"input": encoder.encode(sample.input), "args": encoder.encode(tuple(sample.args)),
                               "kwargs": encoder.encode(dict(sample.kwargs))}
                except codec.Unshippable as error:
                    skipped.append({"op": name, "dtype": dtype, "variant": "*", "count": 1,
                                    "reason": "sample not shipped: %s" % error})
                    continue
                original = (sample.input, tuple(sample.args), dict(sample.kwargs))
                try:
                    check_sample(torch, original, {"t": "tuple", "v": [encoded["input"], encoded["args"],
                                                                       encoded["kwargs"]]}, encoder.storages)
                except HarnessError as error:
                    raise HarnessError("%s/%s sample %d: %s" % (name, dtype, index, error))
                sample_id = len(samples)
                samples.append(dict(encoded, storages=encoder.storages))
                for variant, encoded_callable, reason in variants:
                    if reason:
                        skipped.append({"op": name, "dtype": dtype, "variant": variant, "count": 1,
                                        "reason": reason})
                        continue
                    cases.append({"name": "%s/%s/%s/%d" % (name, dtype, variant, index), "op": name,
                                  "dtype": dtype, "variant": variant, "callable": encoded_callable,
                                  "sample": sample_id})
    return {"callables": callables.table, "samples": samples, "cases": cases, "skipped": skipped, "ops": ops}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("-k", dest="pattern", help="only OpInfos whose name matches this regular expression")
    parser.add_argument("--max-per-op", type=int, help="at most this many samples per OpInfo and dtype")
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch
    torch.set_default_dtype(torch.float32)
    op_db = import_op_db()
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    try:
        catalog = generate(torch, op_db, options.pattern, options.max_per_op, log)
    except HarnessError as error:
        print("opinfo generation error: %s" % error, file=sys.stderr)
        return 2
    catalog["op_db_size"] = len(op_db)
    with open(options.out, "w") as out:
        out.write(json.dumps(catalog))  # dumps: the C encoder (dump streams in Python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
