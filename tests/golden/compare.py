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
# case itself.  Their error floor is instead inherited from upstream's own error on
# the same operation in float32 (the sibling case named with /float32/ instead of
# /float64/), scaled by the ratio of the two unit roundoffs, 2**-53 / 2**-24.  An
# operation upstream computes exactly in float32 (error 0) stays exact in float64;
# a transcendental that upstream rounds within about an ulp in float32 may differ
# by about an ulp in float64 (upstream's vectorized libm and ours round differently).
FLOAT64_PER_FLOAT32 = 2.0 ** -29

PASS, FAIL, REFUSED = "pass", "fail", "refused"
# Largest finite value of each float dtype.
FLOAT_MAX = {"torch.float32": 3.4028234663852886e38, "torch.float64": 1.7976931348623157e308,
             "torch.float16": 65504.0, "torch.bfloat16": 3.3895313892515355e38}


def judge(up, shim, ref, unsupported, floor=0.0):
    """(verdict, reason) for one case; reason is None on PASS.

    ``ref`` is upstream's float64 reference record or None; ``unsupported`` is
    the set of op names from unsupported.txt; ``floor`` the inherited error of a
    float64 case (see FLOAT64_PER_FLOAT32).
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
    difference = compare_values(up["value"], shim["value"], reference, "result", floor)
    return (FAIL, difference) if difference else (PASS, None)


def error_floors(names, upstream, reference):
    """{float64 case name: inherited error} from each case's float32 sibling."""
    floors = {}
    for name in names:
        sibling = name.replace("/float64/", "/float32/")
        if sibling == name or "value" not in upstream.get(sibling, {}) or "value" not in reference.get(sibling, {}):
            continue
        floors[name] = case_error(upstream[sibling]["value"], reference[sibling]["value"]) * FLOAT64_PER_FLOAT32
    return floors


def case_error(up, ref):
    """The largest upstream error e over the float leaves of an encoded result."""
    if up["kind"] == "tensor" and up["dtype"] in FLOAT_MAX:
        expected = flatten(up["data"])
        return upstream_error(expected, reference_leaves(ref, len(expected)), FLOAT_MAX[up["dtype"]])
    if up["kind"] in ("tuple", "list") and ref and ref.get("kind") == up["kind"] \
            and len(ref["items"]) == len(up["items"]):
        return max((case_error(u, r) for u, r in zip(up["items"], ref["items"])), default=0.0)
    return 0.0


def unsupported_ops(ops, unsupported):
    """Entries of unsupported.txt matching a recorded op, by overload or by base name."""
    return {entry for op in ops for entry in (op, op.split(".")[0]) if entry in unsupported}


def _outcome(shim):
    if "exc" in shim:
        return "the shim raised %s while %s: %s" % (shim["exc"], shim["phase"], shim["msg"])
    return "the shim returned a value"


def compare_values(up, shim, ref, path, floor=0.0):
    """A description of the first difference between two encoded values, or None."""
    if shim["kind"] != up["kind"]:
        return "%s: expected %s, got %s" % (path, up["kind"], shim["kind"])
    kind = up["kind"]
    if kind == "tensor":
        if shim["dtype"] != up["dtype"]:
            return "%s: expected dtype %s, got %s" % (path, up["dtype"], shim["dtype"])
        if shim["shape"] != up["shape"]:
            return "%s: expected shape %s, got %s" % (path, up["shape"], shim["shape"])
        expected, actual = flatten(up["data"]), flatten(shim["data"])
        if len(actual) != len(expected):
            return "%s: shape %s but tolist() gave %d elements" % (path, up["shape"], len(actual))
        if up["dtype"] in FLOAT_MAX:
            reference = reference_leaves(ref, len(expected))
            return compare_floats(expected, actual, reference, FLOAT_MAX[up["dtype"]], path,
                                  floor if up["dtype"] == "torch.float64" else 0.0)
        return _compare_exact(expected, actual, path)
    if kind in ("tuple", "list", "size"):
        if len(shim["items"]) != len(up["items"]):
            return "%s: expected %d items, got %d" % (path, len(up["items"]), len(shim["items"]))
        references = ref["items"] if ref and ref["kind"] == kind and len(ref["items"]) == len(up["items"]) \
            else [None] * len(up["items"])
        for index, (u, s, r) in enumerate(zip(up["items"], shim["items"], references)):
            difference = compare_values(u, s, r, "%s[%d]" % (path, index), floor)
            if difference:
                return difference
        return None
    if kind == "float":
        reference = [ref["value"]] if ref and ref["kind"] == "float" else None
        return compare_floats([up["value"]], [shim["value"]], reference, FLOAT_MAX["torch.float64"], path, floor)
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


def compare_floats(expected, actual, reference, largest, path, floor=0.0):
    error = max(upstream_error(expected, reference, largest), floor if reference else 0.0)
    for index, (u, s) in enumerate(zip(expected, actual)):
        if same_float(u, s):
            continue
        if error > 0 and type(s) is float and math.isfinite(s) and math.isfinite(reference[index]):
            tolerance = K * error * max(1.0, abs(reference[index]))
            if abs(s - reference[index]) <= tolerance:
                continue
        detail = " (derived tolerance: %.3g relative to magnitude around float64 reference %r)" % (
            K * error, reference[index]) if error > 0 else " (exact: upstream's own error is 0)" if reference else ""
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
