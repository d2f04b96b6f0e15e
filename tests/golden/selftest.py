"""Self-test of the golden harness (run.py --selftest): the comparators must
reject every injected fault, and an unmodified comparison must pass.

Upstream plays both sides: the "shim" results come from a second, separate
upstream process (so the cases are also shown to be deterministic).  Faults
are then injected into copies of those shim-side records, for every case and
every result leaf they apply to:

  one-ulp            one element moved to the next float of its dtype, on leaves
                     whose derived tolerance is 0
  beyond-tolerance   one element set 1.5 tolerances away from the float64
                     reference, on leaves whose derived tolerance is not 0
  off-by-one / flip  one integer element +1, one bool element negated
  wrong-dtype        another dtype string, same values
  wrong-shape        a leading dimension of 1 added
  missing-item       a tuple/list result one item short
  swallowed-exception  a value where upstream raised
  wrong-exception    another exception type than upstream's

Positive controls that must pass: the unmodified records, and a leaf replaced
by its float64 reference where the tolerance is not 0.  Finally the refusal
rule (unsupported.txt), the probe rule (which overloads run.py leaves out as
refused by the shim, see Case.requires), and a worker that segfaults or hangs on
a case, which must be reported as a failure of that case while the other cases
still run.
"""

import copy
import struct
from collections import Counter

import numpy as np

import compare
import run as harness
from worker import FAULT_ENV

DTYPE_SWAP = {"torch.float32": "torch.float64", "torch.float64": "torch.float32",
              "torch.float16": "torch.bfloat16", "torch.bfloat16": "torch.float16",
              "torch.int64": "torch.int32", "torch.int32": "torch.int64", "torch.int16": "torch.int8",
              "torch.int8": "torch.int16", "torch.uint8": "torch.bool", "torch.bool": "torch.uint8"}
NUMPY_FLOATS = {"torch.float16": np.float16, "torch.float32": np.float32, "torch.float64": np.float64}
REQUIRED_FAULTS = ("one-ulp", "wrong-dtype", "wrong-shape", "swallowed-exception")
# Stall timeout of the injected hang: longer than a worker's start (importing torch and
# building the catalog, a few seconds on a loaded machine) takes.
HANG_TIMEOUT = 15.0


def next_float(value, dtype):
    """The next representable value of ``dtype`` after ``value`` (toward +inf)."""
    if dtype == "torch.bfloat16":  # no numpy type: bfloat16 is the top half of a float32
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        return struct.unpack("<f", struct.pack("<I", bits + (1 << 16)))[0]
    kind = NUMPY_FLOATS[dtype]
    return float(np.nextafter(kind(value), kind(np.inf)))


def _leaves(value, path=()):
    """(path, encoded value) for a result and everything nested in it."""
    yield path, value
    for index, item in enumerate(value.get("items", ())):
        yield from _leaves(item, path + (index,))


def _at(value, path):
    for index in path:
        if value is None or "items" not in value or index >= len(value["items"]):
            return None
        value = value["items"][index]
    return value


def _float_error(leaf, ref_leaf):
    """(derived error e, float64 reference leaves) of a float leaf, as compare.py computes them."""
    if leaf["kind"] == "float":
        expected, dtype = [leaf["value"]], "torch.float64"
        reference = [ref_leaf["value"]] if ref_leaf and ref_leaf["kind"] == "float" else None
    else:
        expected, dtype = compare.flatten(leaf["data"]), leaf["dtype"]
        reference = compare.reference_leaves(ref_leaf, len(expected))
    return compare.upstream_error(expected, reference, compare.FLOAT_MAX[dtype]), reference


def _set_element(leaf, index, value):
    """Sets element ``index`` (in tolist() order) of a tensor leaf, or the value of a scalar leaf."""
    if leaf["kind"] != "tensor":
        leaf["value"] = value
    elif not isinstance(leaf["data"], list):  # 0-dim tensor
        leaf["data"] = value
    else:
        _set_nested(leaf["data"], [index], value)


def _set_nested(data, counter, value):
    """Sets the counter[0]-th leaf of nested lists, in order; True once set."""
    for position, item in enumerate(data):
        if isinstance(item, list):
            if _set_nested(item, counter, value):
                return True
        elif counter[0] == 0:
            data[position] = value
            return True
        else:
            counter[0] -= 1
    return False


def _mutated(shim, path, change):
    """A deep copy of a shim record with ``change`` applied to the value at ``path``."""
    faulty = copy.deepcopy(shim)
    change(_at(faulty["value"], path))
    return faulty


def faults(shim, up, ref, floor_ulps=0.0):
    """(kind, shim record with the fault, whether the comparator must reject it) for one case."""
    if "exc" in up:
        yield "swallowed-exception", {"name": up["name"], "value": {"kind": "none", "value": None}}, True
        other = "ValueError" if up["exc"] != "ValueError" else "RuntimeError"
        yield "wrong-exception", dict(shim, exc=other), True
        return
    if "value" not in up:
        return
    reference = ref.get("value") if ref else None
    for path, leaf in _leaves(up["value"]):
        kind = leaf["kind"]
        if kind in ("tuple", "list", "size") and leaf["items"]:
            yield "missing-item", _mutated(shim, path, lambda value: value["items"].pop()), True
        elif kind == "tensor":
            yield from _tensor_faults(shim, path, leaf, _at(reference, path), floor_ulps)
        elif kind == "int":
            yield "off-by-one", _mutated(shim, path, lambda value: value.update(value=value["value"] + 1)), True
        elif kind == "bool":
            yield "flip", _mutated(shim, path, lambda value: value.update(value=not value["value"])), True
        elif kind == "float":
            yield from _float_faults(shim, path, leaf, _at(reference, path), "torch.float64", floor_ulps)


def _tensor_faults(shim, path, leaf, ref_leaf, floor_ulps):
    yield "wrong-dtype", _mutated(shim, path, lambda t: t.update(dtype=DTYPE_SWAP[t["dtype"]])), True
    yield "wrong-shape", _mutated(shim, path, lambda t: t.update(shape=[1] + t["shape"], data=[t["data"]])), True
    elements = compare.flatten(leaf["data"])
    if 0 in leaf["shape"]:
        return
    if leaf["dtype"] == "torch.bool":
        yield "flip", _mutated(shim, path, lambda t: _set_element(t, 0, not elements[0])), True
    elif leaf["dtype"] in compare.FLOAT_MAX:
        yield from _float_faults(shim, path, leaf, ref_leaf, leaf["dtype"],
                                 floor_ulps if leaf["dtype"] == "torch.float64" else 0.0)
    else:
        yield "off-by-one", _mutated(shim, path, lambda t: _set_element(t, 0, elements[0] + 1)), True


def _float_faults(shim, path, leaf, ref_leaf, dtype, floor_ulps):
    error, reference = _float_error(leaf, ref_leaf)
    if not reference:
        floor_ulps = 0.0
    elements = [leaf["value"]] if leaf["kind"] == "float" else compare.flatten(leaf["data"])
    finite = [i for i, x in enumerate(elements) if np.isfinite(x)]
    if not finite:
        return
    index = finite[0]
    if error == 0 and floor_ulps == 0:
        ulp_away = next_float(elements[index], dtype)
        yield "one-ulp", _mutated(shim, path, lambda t: _set_element(t, index, ulp_away)), True
        return
    anchor = reference[index]
    if not np.isfinite(anchor):
        return
    tolerance = compare.tolerance(error, floor_ulps, anchor)
    away = anchor + 1.5 * tolerance
    while abs(away - anchor) <= tolerance:  # below a float64 ulp the sum rounds back
        away = float(np.nextafter(away, np.inf))
    yield "beyond-tolerance", _mutated(shim, path, lambda t: _set_element(t, index, away)), True
    yield "reference-substituted", _mutated(shim, path, lambda t: _set_element(t, index, anchor)), False


def _check_refusal(names, upstream, reference, shim, problems):
    """unsupported.txt: refusal by name is counted as refused, anything else fails."""
    name = next((n for n in names if "value" in upstream[n] and upstream[n].get("ops")), None)
    if name is None:
        problems.append("no case with recorded ops to test the refusal rule on")
        return
    op = upstream[name]["ops"][0].split(".")[0]
    unsupported = {op}
    outcomes = (
        ("NotImplementedError naming the op", {"exc": "NotImplementedError", "msg": "%s is not implemented" % op,
                                               "phase": "call"}, compare.REFUSED),
        ("NotImplementedError not naming the op", {"exc": "NotImplementedError", "msg": "not implemented",
                                                   "phase": "call"}, compare.FAIL),
        ("RuntimeError naming the op", {"exc": "RuntimeError", "msg": op, "phase": "call"}, compare.FAIL),
        ("a correct value", dict(shim[name]), compare.FAIL),
    )
    for label, record, expected in outcomes:
        verdict, _ = compare.judge(upstream[name], dict(record, name=name), reference.get(name), unsupported)
        if verdict != expected:
            problems.append("refusal rule: %s on %s (unsupported %s) gave %s, expected %s"
                            % (label, name, op, verdict, expected))


def _check_probe_rule(problems):
    """run.py leaves an overload's cases out only if the shim refuses its probe case by name."""
    overload = "aten::lcm_"
    outcomes = (
        ({"exc": "NotImplementedError", "msg": "torchnative does not implement operator aten::lcm_ yet"}, True),
        ({"exc": "NotImplementedError", "msg": "torchnative does not implement operator aten::lcm_.out"}, True),
        ({"exc": "NotImplementedError", "msg": "torchnative does not implement operator aten::lcm_x"}, False),
        ({"exc": "NotImplementedError", "msg": "not implemented"}, False),
        ({"exc": "RuntimeError", "msg": "aten::lcm_ failed", "phase": "call"}, False),
        ({"value": {"kind": "none", "value": None}}, False),
        ({"crash": "was killed by SIGSEGV while running this case"}, False),
    )
    for record, refused in outcomes:
        if harness.refuses(dict(record, name="probe"), overload) != refused:
            problems.append("probe rule: %r %s refuse %s" % (record, "must" if refused else "must not", overload))
    first = harness.probes(["a", "b", "c", "d"], {"a": "aten::x", "b": "aten::y", "c": "aten::x"})
    if first != {"aten::x": "a", "aten::y": "b"}:
        problems.append("probe rule: the probe cases of a, b (aten::x, aten::y) were %r" % first)


def _check_through_temporary_rule(problems):
    """A disagreement is excused as upstream's loop order only when upstream's aliased result
    differs from its own through-a-temporary twin and the shim's equals the twin's."""
    def record(values):
        return {"value": {"kind": "tensor", "dtype": "torch.int64", "shape": [len(values)], "data": values}}
    name, twin = "alias.x/int64/self_overlaps", "alias.x/int64/self_overlaps" + harness.TEMPORARY
    cases = (  # (upstream aliased, upstream twin, shim, excused)
        ([1, 2], [3, 4], [3, 4], True),
        ([1, 2], [3, 4], [5, 6], False),   # the shim's is neither
        ([1, 2], [1, 2], [3, 4], False),   # upstream's aliased result is its twin's: a real difference
        ([1, 2], [3, 4], None, False),     # the shim crashed
    )
    for aliased, through, ours, excused in cases:
        upstream = {name: record(aliased), twin: record(through)}
        shim = {name: record(ours) if ours else {"crash": "killed"}}
        if harness.through_temporary(name, upstream, {}, shim, set(), {}) != excused:
            problems.append("through-temporary rule: upstream %s, twin %s, shim %s %s be excused"
                            % (aliased, through, ours, "must" if excused else "must not"))
    if harness.through_temporary("alias.x/int64/contiguous", {"alias.x/int64/contiguous": record([1])}, {},
                                 {"alias.x/int64/contiguous": record([2])}, set(), {}):
        problems.append("through-temporary rule: a case without a twin was excused")


def _check_worker_death(python, names, upstream, problems, log):
    """A segfault or a hang on one case fails that case; its neighbours still run."""
    if len(names) < 3:
        problems.append("need at least 3 cases to test crash handling (widen -k)")
        return
    before, victim, after = names[:3]
    for kind, stall_timeout, expected in (("crash", harness.STALL_TIMEOUT, "SIGSEGV"),
                                          ("hang", HANG_TIMEOUT, "no progress")):
        results = harness.run_worker(python, names[:3], stall_timeout=stall_timeout,
                                     extra_env={FAULT_ENV: "%s:%s" % (kind, victim)})
        neighbours_ran = all("value" in results.get(n, {}) or "exc" in results.get(n, {}) for n in (before, after))
        if expected not in results.get(victim, {}).get("crash", "") or not neighbours_ran:
            problems.append("worker %s on %s was not reported as its failure: %r" % (kind, victim, results))
            continue
        verdict, reason = compare.judge(upstream[victim], results[victim], None, set())
        if verdict != compare.FAIL:
            problems.append("worker %s on %s was judged %s" % (kind, victim, verdict))
        log("selftest: worker %s reported as: FAIL %s: %s" % (kind, victim, reason))


def run(python, names, log):
    """Exit status 0 if every check holds; ``python`` is the upstream interpreter."""
    problems = []
    upstream, reference, shim = harness.collect(python, python, names, log=log)
    verdicts = harness.judge_all(names, upstream, reference, shim, set())
    floors = compare.error_floors(names, upstream, reference)
    for name, verdict, reason in verdicts:
        if verdict != compare.PASS:
            problems.append("unmodified comparison: %s: %s" % (name, reason))
    log("selftest: unmodified upstream-vs-upstream comparison: %d of %d cases passed"
        % (sum(v == compare.PASS for _, v, _ in verdicts), len(names)))

    injected, caught = Counter(), Counter()
    for name in names:
        if name not in shim or "crash" in shim[name]:
            continue
        floor_ulps = floors.get(name, 0.0)
        for kind, faulty, must_fail in faults(shim[name], upstream[name], reference.get(name), floor_ulps):
            verdict, _ = compare.judge(upstream[name], faulty, reference.get(name), set(), floor_ulps)
            injected[kind] += 1
            if (verdict == compare.FAIL) == must_fail:
                caught[kind] += 1
            else:
                problems.append("%s on %s was judged %s" % (kind, name, verdict))
    for kind in sorted(injected):
        log("selftest: %-22s %5d injected, %5d judged correctly" % (kind, injected[kind], caught[kind]))
    for kind in REQUIRED_FAULTS:
        if not injected[kind]:
            problems.append("no case to inject %s into (widen -k)" % kind)

    _check_refusal(names, upstream, reference, shim, problems)
    _check_probe_rule(problems)
    _check_through_temporary_rule(problems)
    _check_worker_death(python, names, upstream, problems, log)

    for problem in problems[:50]:
        print("SELFTEST FAIL " + problem)
    print("selftest %s: %d problems" % ("failed" if problems else "passed", len(problems)))
    return 1 if problems else 0
