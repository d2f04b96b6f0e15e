"""Judging one case: the shim's result against upstream's, with derived float tolerances.

Records are what worker.py writes (plain JSON types): {"name", "value"} for a
result, {"name", "exc", "msg", "phase"} for an exception, and the orchestrator
adds {"name", "crash"} when a worker died or hung on the case.
"""

import math
import struct

# Derived tolerance.  Upstream's own error on a case is
#   e = max_j |up_j - ref_j| / max(1, |ref_j|)
# over the elements of a float tensor, where up is upstream's low-precision
# result and ref its float64 reference run: the absolute error for values
# below 1 and the relative error above, so that a tensor mixing 1e30 and 0.5
# does not lend the small elements the large elements' absolute error.
# Elements not finite in both, or whose reference lies outside the dtype's
# finite range (overflow, not rounding), do not contribute.
#
# A shim element not bit-identical to upstream's must satisfy
#   |shim_i - ref_i| <= K * e * max(1, |ref_i|).
# K = 2 lets the shim be wrong in the opposite direction to upstream, or
# round in a different order (a different but equally accurate summation or
# vectorized transcendental), while an error more than twice upstream's worst
# is a real discrepancy.  Where upstream's error is 0 the check is exact.
K = 2.0

# float64 cases have no more precise reference: their float64 reference run is the
# case itself.  They inherit upstream's error on the same operation in float32 (the
# sibling case named with /float32/ instead of /float64/), measured in float32 ulps
# of the reference, and may differ from upstream's float64 result by K times that
# many float64 ulps.  An operation upstream computes exactly in float32 (0 ulps)
# stays exact in float64; a transcendental that upstream rounds within about an ulp
# in float32 may differ by about an ulp in float64 (upstream's vectorized libm and
# ours round differently).  Ulps, not relative error, because a one-ulp difference
# is up to twice as large, relatively, at the bottom of a binade as at the top.

PASS, FAIL, REFUSED, DEVIATION, THROUGH_TEMPORARY = "pass", "fail", "refused", "deviation", "through temporary"
NO_DERIVATIVE = "no derivative"  # a gradient twin refused by name as no_derivative.txt lists (run.py)
# Largest finite value of each float dtype.
FLOAT_MAX = {"torch.float32": 3.4028234663852886e38, "torch.float64": 1.7976931348623157e308,
             "torch.float16": 65504.0, "torch.bfloat16": 3.3895313892515355e38}


def judge(up, shim, ref, unsupported, floor_ulps=0.0):
    """(verdict, reason) for one case; reason is None on PASS.

    ``ref`` is upstream's float64 reference record or None; ``unsupported`` is
    the set of op names from unsupported.txt; ``floor_ulps`` the error a float64
    case inherits from its float32 sibling, in ulps.
    """
    if "crash" in up:
        return FAIL, "upstream worker " + up["crash"]
    if "crash" in shim:
        return FAIL, "shim worker " + shim["crash"]
    gaps = sorted(unsupported_ops(up.get("ops", ()), unsupported))
    if gaps:
        if shim.get("exc") == "NotImplementedError" and any(op in shim["msg"] for op in gaps):
            return REFUSED, None
        return FAIL, ("uses %s listed in unsupported.txt: the shim must raise NotImplementedError naming it, "
                      "but %s" % (", ".join(gaps), _outcome(shim)))
    if "exc" in up:
        if "exc" not in shim:
            return FAIL, "upstream raised %s (%s) but the shim returned a value" % (up["exc"], up["msg"])
        if shim["exc"] != up["exc"]:
            return FAIL, "upstream raised %s (%s) but %s" % (up["exc"], up["msg"], _outcome(shim))
        return PASS, None
    if "exc" in shim:
        return FAIL, _outcome(shim)
    reference = ref.get("value") if ref else None
    difference = compare_values(up["value"], shim["value"], reference, "result", floor_ulps)
    return (FAIL, difference) if difference else (PASS, None)


def error_floors(names, upstream, reference):
    """{case name: inherited error in float64 ulps} for cases with float64 results.

    The error comes from the case's float32 sibling (its dtype component replaced by
    float32), or, without one, the largest over the operation's float32 cases.  An
    operation upstream rounds at all is known only to within half an ulp in float64,
    so a nonzero inheritance is at least 0.5 ulp: two implementations each within
    half an ulp of the truth may differ by one.  Zero (an exact operation) stays zero.
    """
    def ulps(name):
        if "value" not in upstream.get(name, {}) or "value" not in reference.get(name, {}):
            return None
        return case_ulps(upstream[name]["value"], reference[name]["value"])

    by_op = {}
    for name in names:
        parts = name.split("/")
        if len(parts) > 1 and parts[1] == "float32":
            error = ulps(name)
            if error is not None:
                by_op[operation(name)] = max(by_op.get(operation(name), 0.0), error)
    floors = {}
    for name in names:
        parts = name.split("/")
        if len(parts) < 2:
            continue
        sibling = ulps("/".join([parts[0], "float32"] + parts[2:]))
        error = sibling if sibling is not None and parts[1] != "float32" else by_op.get(operation(name), 0.0)
        floors[name] = max(error, 0.5) if error > 0 else 0.0
    return floors


def operation(name):
    """Whose float32 errors a float64 case without a sibling inherits: its operation's, and
    a gradient twin (spec.GRADIENT) its operation's gradients'."""
    return name.split("/")[0] + ("@grad" if name.endswith("@grad") else "")


def case_ulps(up, ref):
    """Upstream's largest error, in ulps of its dtype at the reference, over the float32
    leaves of an encoded result (elements with a zero, subnormal or non-finite reference
    are skipped: an ulp there says nothing about rounding)."""
    if up["kind"] == "tensor" and up["dtype"] == "torch.float32":
        expected = flatten(up["data"])
        reference = reference_leaves(ref, len(expected)) or []
        return max((abs(u - r) / float32_ulp(r) for u, r in zip(expected, reference)
                    if type(u) is float and math.isfinite(u) and math.isfinite(r) and abs(r) >= FLOAT32_TINY
                    and abs(r) <= FLOAT_MAX["torch.float32"]), default=0.0)
    if up["kind"] in ("tuple", "list") and ref and ref.get("kind") == up["kind"] \
            and len(ref["items"]) == len(up["items"]):
        return max((case_ulps(u, r) for u, r in zip(up["items"], ref["items"])), default=0.0)
    return 0.0


FLOAT32_TINY = 1.1754943508222875e-38


def float32_ulp(x):
    """The spacing of float32 numbers at |x| (a normal float32 magnitude)."""
    return 2.0 ** (math.frexp(abs(x))[1] - 24)


def float64_ulp(x):
    return math.ulp(abs(x)) if x != 0 else 5e-324


def tolerance(error, floor_ulps, reference_value):
    """How far from the float64 reference a non-identical element may be (see K)."""
    return K * max(error * max(1.0, abs(reference_value)), floor_ulps * float64_ulp(reference_value))


def unsupported_ops(ops, unsupported):
    """Entries of unsupported.txt matching a recorded op, by overload or by base name."""
    return {entry for op in ops for entry in (op, op.split(".")[0]) if entry in unsupported}


def _outcome(shim):
    if "exc" in shim:
        return "the shim raised %s while %s: %s" % (shim["exc"], shim["phase"], shim["msg"])
    return "the shim returned a value"


def compare_values(up, shim, ref, path, floor_ulps=0.0):
    """A description of the first difference between two encoded values, or None."""
    if shim["kind"] != up["kind"]:
        return "%s: expected %s, got %s" % (path, up["kind"], shim["kind"])
    kind = up["kind"]
    if kind == "tensor":
        if shim["dtype"] != up["dtype"]:
            return "%s: expected dtype %s, got %s" % (path, up["dtype"], shim["dtype"])
        if shim["shape"] != up["shape"]:
            return "%s: expected shape %s, got %s" % (path, up["shape"], shim["shape"])
        if "strides" in up and shim.get("strides") != up["strides"]:
            return "%s: expected strides %s, got %s" % (path, up["strides"], shim.get("strides"))
        expected, actual = flatten(up["data"]), flatten(shim["data"])
        if len(actual) != len(expected):
            return "%s: shape %s but tolist() gave %d elements" % (path, up["shape"], len(actual))
        if up["dtype"] in FLOAT_MAX:
            reference = reference_leaves(ref, len(expected))
            return compare_floats(expected, actual, reference, FLOAT_MAX[up["dtype"]], path,
                                  floor_ulps if up["dtype"] == "torch.float64" else 0.0)
        return _compare_exact(expected, actual, path)
    if kind in ("tuple", "list", "size"):
        if len(shim["items"]) != len(up["items"]):
            return "%s: expected %d items, got %d" % (path, len(up["items"]), len(shim["items"]))
        references = ref["items"] if ref and ref["kind"] == kind and len(ref["items"]) == len(up["items"]) \
            else [None] * len(up["items"])
        for index, (u, s, r) in enumerate(zip(up["items"], shim["items"], references)):
            difference = compare_values(u, s, r, "%s[%d]" % (path, index), floor_ulps)
            if difference:
                return difference
        return None
    if kind == "float":
        reference = [ref["value"]] if ref and ref["kind"] == "float" else None
        return compare_floats([up["value"]], [shim["value"]], reference, FLOAT_MAX["torch.float64"], path, floor_ulps)
    if kind == "object" and shim["type"] != up["type"]:
        return "%s: expected a %s, got a %s" % (path, up["type"], shim["type"])
    if shim["value"] != up["value"]:  # int, bool, str, None, object: exact
        return "%s: expected %r, got %r" % (path, up["value"], shim["value"])
    return None


def flatten(data):
    """Leaves of a nested tolist() result, in order (a 0-dim result is one leaf)."""
    if not isinstance(data, list):
        return [data]
    leaves = []
    for item in data:
        leaves.extend(flatten(item))
    return leaves


def reference_leaves(ref, count):
    """The float64 reference values for a float tensor, when the reference has the same shape."""
    if not ref or ref["kind"] != "tensor" or ref["dtype"] not in FLOAT_MAX:
        return None
    leaves = flatten(ref["data"])
    return leaves if len(leaves) == count else None


def upstream_error(expected, reference, largest):
    """Upstream's error e on a float tensor (see K); 0 without a reference."""
    if reference is None:
        return 0.0
    errors = [abs(u - r) / max(1.0, abs(r)) for u, r in zip(expected, reference)
              if type(u) is float and math.isfinite(u) and math.isfinite(r) and abs(r) <= largest]
    return max(errors, default=0.0)


def compare_floats(expected, actual, reference, largest, path, floor_ulps=0.0):
    error = upstream_error(expected, reference, largest)
    floor_ulps = floor_ulps if reference else 0.0
    for index, (u, s) in enumerate(zip(expected, actual)):
        if same_float(u, s):
            continue
        if (error > 0 or floor_ulps > 0) and type(s) is float and math.isfinite(s) and math.isfinite(reference[index]):
            if abs(s - reference[index]) <= tolerance(error, floor_ulps, reference[index]):
                continue
        if error > 0 or floor_ulps > 0:
            detail = " (derived tolerance: %.3g around float64 reference %r)" % (
                tolerance(error, floor_ulps, reference[index]), reference[index])
        else:
            detail = " (exact: upstream's own error is 0)" if reference else ""
        return "%s: element %d: expected %r, got %r%s" % (path, index, u, s, detail)
    return None


def same_float(a, b):
    """Bit-identical as float64 (so -0.0 != 0.0); all NaNs are equal."""
    if type(a) is not float or type(b) is not float:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return struct.pack("<d", a) == struct.pack("<d", b)


def _compare_exact(expected, actual, path):
    for index, (u, s) in enumerate(zip(expected, actual)):
        if type(s) is not type(u) or s != u:
            return "%s: element %d: expected %r, got %r" % (path, index, u, s)
    return None



def network_difference(expected, actual, truth):
    """The judgement of a whole network's record (float arrays, or lists of array parts read in
    order, say a loss and the gradients: upstream's float32, ours, upstream's float64), None if it
    agrees: each float within K times upstream's largest error over the whole record (or equal to
    upstream's). Over the record, not per tensor: batch norm over the few values per channel a
    small image leaves at the last layers amplifies rounding by chance, so upstream's error on
    any one tensor is luck."""
    return _record_judgement((expected, truth), expected, actual, truth, 1.0, "float64 %r, ")


def network_difference_float64(upstream32, upstream64, actual64):
    """A whole network's float64 record judged against upstream's float64 (None if it agrees), as
    float64 golden cases are: within K times upstream's float32-vs-float64 error over the record,
    in float64 ulps instead of float32 ones (or equal to upstream's). Where a gradient jumps (a
    ReLU's kink, a max pool's tie), float32 rounding can put a value on the other side of the
    jump than float64 does, in upstream as in the shim; float64 puts both on the same side."""
    import numpy
    ulps = numpy.finfo(numpy.float64).eps / numpy.finfo(numpy.float32).eps
    return _record_judgement((upstream32, upstream64), upstream64, actual64, upstream64, ulps, "")


def _aligned(*records, size=1 << 22):
    """(offset, [chunk of each record]) over records of the same length, each an array or a list
    of array parts, as float64 chunks of at most `size` floats: a record may be a memory-mapped
    file larger than memory allows whole."""
    import numpy

    def chunks(record):
        offset = 0
        for part in record if isinstance(record, (list, tuple)) else [record]:
            for start in range(0, len(part), size):
                yield offset + start, numpy.asarray(part[start:start + size], dtype=numpy.float64)
            offset += len(part)

    for found in zip(*(chunks(record) for record in records)):
        yield found[0][0], [chunk for _, chunk in found]


def _record_judgement(error_pair, expected, actual, center, ulps, shown):
    """Upstream's largest error over the record (error_pair: its two runs, relative to the
    second's max(1, |value|)); then every float of actual not equal to expected's and farther from
    center than K times that error (times ulps) times max(1, |center|)."""
    import numpy
    error = 0.0
    for _, (ours, base) in _aligned(*error_pair):
        error = max(error, float(numpy.max(numpy.abs(ours - base) / numpy.maximum(1.0, numpy.abs(base)))))
    total = wrong_count = 0
    first = None
    for offset, (want, got, around) in _aligned(expected, actual, center):
        allowed = K * error * ulps * numpy.maximum(1.0, numpy.abs(around))
        wrong = (got != want) & ~(numpy.abs(got - around) <= allowed)
        if first is None and wrong.any():
            i = int(numpy.argmax(wrong))
            first = (offset + i, want[i], got[i], around[i], allowed[i])
        wrong_count += int(wrong.sum())
        total += len(want)
    if first is None:
        return None
    index, want, got, around, allowed = first
    return (f"{wrong_count} of {total} floats, the first (element {index}): expected {want!r}, got {got!r}, "
            + (shown % around if shown else "") + f"tolerance {allowed:.3g}")
