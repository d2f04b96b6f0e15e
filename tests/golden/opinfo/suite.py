#!/usr/bin/python3
"""Upstream's OpInfo samples, float32 and float64 on CPU: the shim against upstream torch.

  suite.py [--shim PY] [--upstream PY] [-k OP_REGEX] [--max-per-op N] [--report FILE]
           [--json FILE] [--report-only] [--selftest] [--stability RUNS] [--keep DIR | --rejudge DIR]

generate.py (upstream) draws the samples from op_db and encodes them with their
callables; sample_worker.py runs the cases in passes, each in its own processes, one
after another, through ../run.py's run_worker (a crash or hang is recorded against the
case and the worker restarted after it): upstream (recording the aten ops dispatched),
upstream in float64 for the float32 cases (the tolerance reference), upstream again
for OpInfos it does not reproduce, and the shim.  ../compare.py judges each case:

  agree    compare.py passes it (the same exception type as upstream's agrees)
  refused  NotImplementedError whose message begins "torchnative does not implement
           [operator ]aten::NAME" or "... torch._C.NAME" (REFUSAL)
  differ   anything else (values, dtype, shape, raising or not, exception type, an
           AttributeError for a missing torch._C name, ...)
  crash    the shim's worker died or hung on the case

See README.md here for the tolerances (random OpInfos bit for bit under one seed,
uninitialized results by kind/dtype/shape, upstream's own spread where it does not
reproduce itself).  Exit status: 0 if no case differs or crashes (always with
--report-only; with --selftest, if every case agrees and every injected fault is
caught), 1 otherwise, 2 if the harness could not run.
"""

import argparse
import collections
import copy
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(GOLDEN))
sys.path.insert(0, HERE)
sys.path.insert(1, GOLDEN)

import codec  # noqa: E402
import compare  # noqa: E402
import run as golden_run  # noqa: E402

GENERATE = os.path.join(HERE, "generate.py")
SAMPLE_WORKER = os.path.join(HERE, "sample_worker.py")
DEFAULT_SHIM = os.path.join(REPO, ".venv", "bin", "python")
DEFAULT_UPSTREAM = "/usr/bin/python3"
GENERATE_TIMEOUT = 900
# The shim may crash on many samples; each restart costs an interpreter and a catalog load.
MAX_RESTARTS = 400
# Upstream processes that rerun the cases of an OpInfo upstream did not reproduce (its lstsq):
# their spread is part of upstream's error.
SPREAD_PROCESSES = 4
# OpInfos whose float results change from one upstream process to the next in the last bits,
# while a rerun in the same process usually repeats them (so the in-process check misses
# them): always rerun in SPREAD_PROCESSES more.  Measured by `suite.py --stability 4`.
ACROSS_PROCESSES = {"linalg.lstsq", "linalg.lstsq.grad_oriented"}

AGREE, DIFFER, REFUSED, CRASH = "agree", "differ", "refused", "crash"
OUTCOMES = (AGREE, DIFFER, REFUSED, CRASH)
REFUSAL = re.compile(r"torchnative does not implement (?:operator )?"
                     r"(aten::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?|torch\._C\.[A-Za-z0-9_.]*[A-Za-z0-9_])")
MISSING_ATTRIBUTE = re.compile(r"module 'torch\._C(?:\.\w+)*' has no attribute '(\w+)'")


def refusal_name(record):
    """The aten operator or torch._C name a strict refusal names, else None."""
    if record.get("exc") != "NotImplementedError":
        return None
    match = REFUSAL.match(record.get("msg", ""))
    return match.group(1) if match else None


class HarnessError(Exception):
    pass


def generate(upstream, path, pattern, max_per_op, log):
    command = [upstream, GENERATE, "--out", path]
    command += ["-k", pattern] if pattern else []
    command += ["--max-per-op", str(max_per_op)] if max_per_op else []
    started = time.monotonic()
    try:
        process = subprocess.run(command, capture_output=True, text=True, timeout=GENERATE_TIMEOUT,
                                 env=dict(os.environ, **golden_run.WORKER_ENV))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HarnessError("cannot generate samples with %s: %s" % (upstream, error))
    if process.returncode != 0:
        raise HarnessError("generating samples failed:\n%s" % process.stderr.strip()[-3000:])
    log("# generated samples (%s): %.1fs" % (upstream, time.monotonic() - started))


def collect(shim, upstream, catalog, samples_path, stall_timeout, log):
    names = [case["name"] for case in catalog["cases"]]
    flags = ["--samples", samples_path]

    def one_pass(label, python, names, extra):
        started = time.monotonic()
        results = golden_run.run_worker(python, names, flags + extra, stall_timeout, worker=SAMPLE_WORKER,
                                        max_restarts=MAX_RESTARTS)
        log("# %s pass (%s): %d cases, %.1fs" % (label, python, len(names), time.monotonic() - started))
        return results

    try:
        up = one_pass("upstream", upstream, names, ["--record-ops"])
        uninitialized = {name for name, op in catalog["ops"].items() if op["uninitialized"]}
        by_name = {case["name"]: case for case in catalog["cases"]}
        reference_names = [name for name in names if by_name[name]["dtype"] == "float32"
                           and "value" in up.get(name, {}) and by_name[name]["op"] not in uninitialized
                           and not up[name].get("random")]
        reference = one_pass("upstream float64 reference", upstream, reference_names, ["--reference"])
        # OpInfos upstream did not reproduce in one process: their cases again, in more processes.
        flagged = {by_name[name]["op"] for name in names if up.get(name, {}).get("nondeterministic")}
        unstable = sorted((flagged | (ACROSS_PROCESSES & set(catalog["ops"]))) - uninitialized)
        unstable_names = [name for name in names if by_name[name]["op"] in unstable]
        for run in range(SPREAD_PROCESSES if unstable_names else 0):
            again = one_pass("upstream again (%s)" % ", ".join(unstable), upstream, unstable_names, [])
            for name, record in again.items():
                up[name].setdefault("runs", []).append(record)
        theirs = one_pass("shim", shim, names, [])
    except golden_run.HarnessError as error:
        raise HarnessError(str(error))
    return up, reference, theirs


def stability(upstream, catalog, samples_path, runs, stall_timeout, log):
    """OpInfos (not uninitialized) whose records differ between ``runs`` upstream processes."""
    names = [case["name"] for case in catalog["cases"]]
    passes = []
    for run in range(runs):
        started = time.monotonic()
        passes.append(golden_run.run_worker(upstream, names, ["--samples", samples_path], stall_timeout,
                                            worker=SAMPLE_WORKER, max_restarts=MAX_RESTARTS))
        log("# upstream run %d: %.1fs" % (run + 1, time.monotonic() - started))
    uninitialized = {name for name, op in catalog["ops"].items() if op["uninitialized"]}
    differing = collections.Counter()
    for case in catalog["cases"]:
        records = {json.dumps(records.get(case["name"], {}).get("value"), sort_keys=True) for records in passes}
        if len(records) > 1 and case["op"] not in uninitialized:
            differing[case["op"]] += 1
    return differing


def _spread_ulps(a, b):
    """Largest difference between two encoded results' float64 elements, in float64 ulps."""
    if a.get("kind") == "tensor" and b.get("kind") == "tensor" and a["dtype"] == b["dtype"] == "torch.float64":
        x, y = compare.flatten(a["data"]), compare.flatten(b["data"])
        if len(x) != len(y):
            return 0.0
        return max((abs(u - v) / compare.float64_ulp(u) for u, v in zip(x, y)
                    if type(u) is float and type(v) is float and math.isfinite(u) and math.isfinite(v)),
                   default=0.0)
    if "items" in a and "items" in b and len(a["items"]) == len(b["items"]):
        return max((_spread_ulps(u, v) for u, v in zip(a["items"], b["items"])), default=0.0)
    return 0.0


def _mask_return(record):
    """A copy of a record whose return value keeps kind, dtype and shape but no element values."""
    def strip(value):
        if value.get("kind") == "tensor":
            return dict(value, data=[])
        if "items" in value:
            return dict(value, items=[strip(item) for item in value["items"]])
        return value
    if "value" not in record or record["value"].get("kind") != "tuple":
        return record
    masked = copy.copy(record)
    items = list(record["value"]["items"])
    items[0] = strip(items[0])
    masked["value"] = dict(record["value"], items=items)
    return masked


def _readable(reason):
    reason = re.sub(r"\bresult\[0\]", "return value", reason)
    return re.sub(r"\bresult\[1\]\[(\d+)\]", r"tensor input \1 after the call", reason)


def _category(up, shim, reason):
    if "exc" in shim:
        if shim.get("phase") == "building inputs":
            if shim["exc"] == "InputMismatch":
                return "inputs rebuilt wrong"
        missing = MISSING_ATTRIBUTE.search(shim.get("msg", ""))
        if shim["exc"] == "AttributeError" and missing:
            return "missing torch._C attribute (AttributeError, not a refusal)"
        if "exc" in up:
            return "exception type"
        if shim["exc"] == "NotImplementedError":
            return "NotImplementedError without a name"
        return "raises %s" % shim["exc"]
    if "exc" in up:
        return "returns where upstream raises"
    where = "input after the call" if "after the call" in reason else "return value"
    for needle, label in (("expected dtype", "dtype"), ("expected shape", "shape"), ("element", "values")):
        if needle in reason:
            return "%s (%s)" % (label, where)
    return "structure (%s)" % where


def judge_all(catalog, up, reference, shim):
    """{name: (outcome, detail)}: detail is the refused name, the differ category and reason, or the crash."""
    cases = catalog["cases"]
    names = [case["name"] for case in cases]
    uninitialized = {name for name, op in catalog["ops"].items() if op["uninitialized"]}
    floors = compare.error_floors(names, up, reference)
    random_ops = {case["op"] for case in cases if up.get(case["name"], {}).get("random")}
    spreads = collections.Counter()  # OpInfo -> largest float64 spread of upstream's runs, in ulps
    for case in cases:
        runs = [r["value"] for r in [up.get(case["name"], {})] + up.get(case["name"], {}).get("runs", [])
                if "value" in r]
        if len(runs) > 1:
            spreads[case["op"]] = max([spreads[case["op"]]] + [_spread_ulps(runs[0], other) for other in runs[1:]])
    verdicts = {}
    for case in cases:
        name = case["name"]
        missing = {"name": name, "crash": "produced no result"}
        u, s = up.get(name, missing), shim.get(name, missing)
        if "crash" in u:
            verdicts[name] = (CRASH, "upstream worker " + u["crash"])
            continue
        if "crash" in s:
            verdicts[name] = (CRASH, "shim worker " + s["crash"])
            continue
        named = refusal_name(s)
        if named:
            verdicts[name] = (REFUSED, named)
            continue
        ref, floor = reference.get(name), floors.get(name, 0.0)
        if u.get("runs") and ref and "value" in ref and "value" in u:
            # Judge against the run farthest from the reference: upstream's error is its worst run's.
            u = max([u] + [r for r in u["runs"] if "value" in r],
                    key=lambda r: compare.case_ulps(r["value"], ref["value"]))
        if case["dtype"] == "float64":
            ref = u  # a float64 case is its own reference; its tolerance is the inherited floor
        # Upstream's own run-to-run spread is part of its error (K applies to it as to the floor);
        # a property of the operation, so the largest spread seen over the OpInfo's cases.
        floor = max(floor, spreads.get(case["op"], 0.0))
        if u.get("random") or case["op"] in random_ops:
            ref, floor = None, 0.0  # a draw in float64 is another number, not a more precise one
        if case["op"] in uninitialized:
            u, s, ref = _mask_return(u), _mask_return(s), None
        verdict, reason = compare.judge(u, s, ref, set(), floor)
        if verdict == compare.PASS:
            verdicts[name] = (AGREE, None)
        else:
            reason = _readable(reason)
            verdicts[name] = (DIFFER, (_category(u, s, reason), reason))
    return verdicts


# ---------------------------------------------------------------- repro snippets

def repro(catalog, case, max_elements=400):
    """Python source that rebuilds the case's inputs with torch.tensor + as_strided and calls it."""
    sample = catalog["samples"][case["sample"]]
    lines = ["import torch", "nan, inf = float('nan'), float('inf')"]
    for index, storage in enumerate(sample["storages"]):
        values = storage["values"]
        if len(values) > max_elements:
            return None
        lines.append("s%d = torch.tensor(%s, dtype=torch.%s)" % (index, _values(values), storage["dtype"]))
    tensors = codec.tensors_in({"t": "tuple", "v": [sample["input"], sample["args"], sample["kwargs"]]})
    for index, tensor in enumerate(tensors):
        lines.append("t%d = s%d.as_strided(%s, %s, %d)" % (index, tensor["storage"], tensor["shape"],
                                                           tensor["stride"], tensor["offset"]))
    names = iter(range(len(tensors)))
    args = ", ".join([_literal(sample["input"], names)] + [_literal(a, names) for a in sample["args"]["v"]]
                     + ["%s=%s" % (k, _literal(v, names)) for k, v in sample["kwargs"]["v"].items()])
    lines.append("fn = %s" % _callable_source(catalog["callables"], case["callable"]))
    lines.append("print(fn(%s))" % args)
    if tensors:
        lines.append("print(%s)  # the tensor inputs after the call" % ", ".join("t%d" % i for i in range(len(tensors))))
    return "\n".join(lines)


def _values(values):
    return "[%s]" % ", ".join(v if isinstance(v, str) else repr(v) for v in values)


def _literal(value, names=None):
    """Source for an encoded value; tensors are named t0, t1, ... in the order ``names`` yields."""
    if not isinstance(value, dict):
        return repr(value)
    kind = value["t"]
    if kind == "float":
        return value["v"] if isinstance(value["v"], str) else repr(value["v"])
    if kind == "complex":
        return "complex(%s, %s)" % (value["re"], value["im"])
    if kind == "tensor":
        if names is not None:
            return "t%d" % next(names)
        return "s%d.as_strided(%s, %s, %d)" % (value["storage"], value["shape"], value["stride"], value["offset"])
    if kind == "size":
        return "torch.Size(%s)" % value["v"]
    if kind == "tuple":
        items = [_literal(item, names) for item in value["v"]]
        return "(%s)" % (items[0] + "," if len(items) == 1 else ", ".join(items))
    if kind == "list":
        return "[%s]" % ", ".join(_literal(item, names) for item in value["v"])
    if kind == "dict":
        return "{%s}" % ", ".join("%r: %s" % (k, _literal(v, names)) for k, v in value["v"].items())
    if kind in ("dtype", "memory_format", "layout"):
        return "torch." + value["v"]
    if kind == "device":
        return "torch.device(%r)" % value["v"]
    if kind == "slice":
        return "slice(%s)" % ", ".join(_literal(item, names) for item in value["v"])
    if kind == "ellipsis":
        return "..."
    if kind == "numpy_scalar":
        return "__import__('numpy').dtype(%r).type(%s)" % (value["dtype"], _literal(value["v"]))
    return repr(value)


def _callable_source(table, encoded):
    if not isinstance(encoded, dict):
        return repr(encoded)
    if encoded["t"] == "float":
        return _literal(encoded)
    entry = table[encoded["id"]]
    kind = entry["t"]
    if kind == "path":
        return entry["v"]
    if kind == "module":
        return "__import__(%r)" % entry["v"]
    if kind == "aten":
        return "torch.ops.aten.%s%s" % (entry["packet"], "." + entry["overload"] if entry["overload"] else "")
    if kind == "partial":
        parts = [_callable_source(table, entry["func"])] + [_callable_source(table, a) for a in entry["args"]]
        parts += ["%s=%s" % (k, _callable_source(table, v)) for k, v in entry["kwargs"].items()]
        return "__import__('functools').partial(%s)" % ", ".join(parts)
    if kind == "value":
        return _literal(entry["v"])
    if kind in ("tuple", "list"):
        return _literal({"t": kind, "v": []}) if not entry["v"] else \
            "%s(%s)" % (kind, "[%s]" % ", ".join(_callable_source(table, v) for v in entry["v"]))
    if kind == "function":
        where = "%s:%d" % (entry["file"].split("/torch/")[-1], entry["line"])
        helpers = sorted(name for name, value in entry["globals"].items()
                         if isinstance(value, dict) and value.get("t") == "obj"
                         and table[value["id"]]["t"] == "function")
        note = "  # %s%s" % (where, "; uses %s from torch.testing" % ", ".join(helpers) if helpers else "")
        if entry["lambda"]:
            return " ".join(entry["source"].split()) + note
        return "%s%s (a def: see the file)" % (entry["name"], note)
    return repr(entry)


# ---------------------------------------------------------------- report

def summarize(catalog, up, verdicts):
    cases = catalog["cases"]
    totals = collections.defaultdict(collections.Counter)  # (dtype, variant) -> outcome counts
    per_op = collections.OrderedDict()
    missing = collections.defaultdict(lambda: {"cases": 0, "samples": 0, "ops": set()})
    for case in cases:
        outcome, detail = verdicts[case["name"]]
        totals[(case["dtype"], case["variant"])][outcome] += 1
        op = per_op.setdefault(case["op"], {"counts": collections.defaultdict(collections.Counter),
                                            "refused": collections.Counter(), "differ": [], "crash": []})
        op["counts"][case["dtype"]][outcome] += 1
        if outcome == REFUSED:
            op["refused"][detail] += 1
            base = detail.split(".")[0] if detail.startswith("aten::") else detail
            missing[base]["cases"] += 1
            missing[base]["samples"] += case["variant"] == "fn"
            missing[base]["ops"].add(case["op"])
        elif outcome == DIFFER:
            op["differ"].append((case, detail[0], detail[1]))
        elif outcome == CRASH:
            op["crash"].append((case, detail))
    skipped = collections.Counter()
    for entry in catalog["skipped"]:
        skipped[(entry["op"], entry["variant"], entry["reason"])] += entry["count"]
    aten = {op.split(".")[0] for record in up.values() if "value" in record
            for op in record.get("ops", ()) if op.startswith("aten::")}
    return totals, per_op, missing, skipped, aten


def _smallest(catalog, case):
    sample = catalog["samples"][case["sample"]]
    return sum(len(storage["values"]) for storage in sample["storages"])


def write_reports(catalog, up, shim, verdicts, command, text_path, json_path, out, wall):
    totals, per_op, missing, skipped, aten = summarize(catalog, up, verdicts)
    lines = []
    emit = lines.append
    emit("OpInfo peer suite: upstream's op_db samples (CPU), shim against upstream torch 1.13.1")
    emit("command: %s" % command)
    if wall:
        emit("wall time of the passes: %.0fs" % wall)
    emit("OpInfos in op_db: %d; with float32/float64 on CPU: %d; aten operators dispatched by upstream: %d"
         % (catalog["op_db_size"], len(catalog["ops"]), len(aten)))
    emit("")
    emit("Totals (cases = samples x variant; fn = the function variant, i.e. upstream's samples)")
    emit("%-18s %8s %8s %8s %8s %8s %7s" % ("dtype/variant", "cases", AGREE, DIFFER, REFUSED, CRASH, "agree%"))
    grand = collections.Counter()
    for dtype in ("float32", "float64"):
        for variant in ("fn", "method", "inplace"):
            counts = totals.get((dtype, variant))
            if not counts:
                continue
            grand.update(counts)
            emit(_total_line("%s/%s" % (dtype, variant), counts))
    fn_counts = totals.get(("float32", "fn"), collections.Counter()) + totals.get(("float64", "fn"),
                                                                                   collections.Counter())
    emit(_total_line("samples (fn)", fn_counts))
    emit(_total_line("all cases", grand))
    op_state = collections.Counter()
    for name, op in per_op.items():
        counts = sum(op["counts"].values(), collections.Counter())
        op_state["all agree" if counts[AGREE] == sum(counts.values()) else
                 "some differ or crash" if counts[DIFFER] or counts[CRASH] else "agree or refused"] += 1
    emit("operators (OpInfos): %d: %s" % (len(per_op), ", ".join("%d %s" % (v, k) for k, v in
                                                                  sorted(op_state.items()))))
    not_run = sum(skipped.values())
    emit("not run: %d cases (reasons under 'Not shipped')" % not_run)
    emit("")
    emit("Per operator: agree/differ/refused/crash for float32 | float64 (all variants)")
    for name, op in per_op.items():
        cells = []
        for dtype in ("float32", "float64"):
            c = op["counts"].get(dtype, collections.Counter())
            cells.append("%d/%d/%d/%d" % (c[AGREE], c[DIFFER], c[REFUSED], c[CRASH]))
        notes = []
        if op["refused"]:
            notes.append("refused: " + ", ".join("%s x%d" % item for item in op["refused"].most_common(3)))
        if op["differ"]:
            categories = collections.Counter(category for _, category, _ in op["differ"])
            notes.append("differ: " + ", ".join("%s x%d" % item for item in categories.most_common(3)))
        if op["crash"]:
            notes.append("crash x%d" % len(op["crash"]))
        emit("%-44s %-14s | %-14s %s" % (name, cells[0], cells[1], "; ".join(notes)))
    emit("")
    emit("(a) Missing operators (strict refusals), by the cases they would unlock")
    for name, entry in sorted(missing.items(), key=lambda item: (-item[1]["cases"], item[0])):
        emit("%6d cases (%5d samples)  %-50s  OpInfos: %s" % (entry["cases"], entry["samples"], name,
                                                              ", ".join(sorted(entry["ops"]))))
    emit("")
    emit("(b) Differing operators: categories, then the smallest differing case with a repro")
    for name, op in per_op.items():
        if not op["differ"]:
            continue
        categories = collections.Counter(category for _, category, _ in op["differ"])
        emit("== %s: %d differing cases: %s" % (name, len(op["differ"]), "; ".join(
            "%s x%d" % item for item in categories.most_common())))
        for category in categories:
            case, _, reason = min((d for d in op["differ"] if d[1] == category),
                                  key=lambda d: (_smallest(catalog, d[0]), d[0]["name"]))
            emit("   [%s] %s: %s" % (category, case["name"], reason))
            snippet = repro(catalog, case)
            if snippet:
                emit("\n".join("      " + line for line in snippet.splitlines()))
    emit("")
    emit("(c) Crashes")
    for name, op in per_op.items():
        for case, detail in op["crash"]:
            emit("   %s: %s" % (case["name"], detail))
    emit("")
    emit("Upstream did not reproduce its own result within one process (informational; compared as usual)")
    unstable = collections.Counter(case["op"] for case in catalog["cases"]
                                   if up.get(case["name"], {}).get("nondeterministic"))
    for name, count in sorted(unstable.items()):
        emit("%6d  %s" % (count, name))
    emit("")
    emit("Not shipped (cases that were not run, with the reason)")
    for (op, variant, reason), count in sorted(skipped.items()):
        emit("%6d  %s [%s]: %s" % (count, op, variant, reason))
    text = "\n".join(lines) + "\n"
    if text_path:
        with open(text_path, "w") as stream:
            stream.write(text)
    if json_path:
        document = {
            "command": command, "wall_seconds": wall,
            "totals": {"%s/%s" % key: dict(counts) for key, counts in sorted(totals.items())},
            "samples": dict(fn_counts), "cases": dict(grand), "not_run": not_run,
            "aten_operators": sorted(aten),
            "missing": {name: {"cases": e["cases"], "samples": e["samples"], "ops": sorted(e["ops"])}
                        for name, e in missing.items()},
            "ops": {name: {"counts": {dtype: dict(c) for dtype, c in op["counts"].items()},
                           "refused": dict(op["refused"]),
                           "differ": [{"case": case["name"], "category": category, "reason": reason}
                                      for case, category, reason in op["differ"]],
                           "crash": [{"case": case["name"], "reason": detail} for case, detail in op["crash"]]}
                    for name, op in per_op.items()},
            "cases_outcome": {name: outcome for name, (outcome, _) in verdicts.items()},
            "not_shipped": [{"op": op, "variant": variant, "reason": reason, "count": count}
                            for (op, variant, reason), count in sorted(skipped.items())],
        }
        with open(json_path, "w") as stream:
            json.dump(document, stream, indent=1)
    # On stdout: the totals and every operator that does not fully agree.
    for line in lines[:lines.index("Per operator: agree/differ/refused/crash for float32 | float64 (all variants)")]:
        print(line, file=out)
    print("%d passed, %d failed, %d skipped" % (grand[AGREE], grand[DIFFER] + grand[CRASH], grand[REFUSED]),
          file=out)
    return grand


def _total_line(label, counts):
    total = sum(counts.values())
    return "%-18s %8d %8d %8d %8d %8d %6.1f%%" % (label, total, counts[AGREE], counts[DIFFER], counts[REFUSED],
                                                 counts[CRASH], 100.0 * counts[AGREE] / total if total else 0)


def fault_checks(catalog, up, reference):
    """Judging must reject faults injected into shim records that agreed; [problem]."""
    problems = []
    probes = {"value": None, "raised": None}
    for case in catalog["cases"]:
        record = up.get(case["name"], {})
        if case["op"] in {n for n, op in catalog["ops"].items() if op["uninitialized"]}:
            continue
        if probes["value"] is None and "value" in record and _first_float(record["value"]["items"][0]):
            probes["value"] = case
        if probes["raised"] is None and "exc" in record:
            probes["raised"] = case
        if all(probes.values()):
            break
    for label, case in probes.items():
        if case is None:
            problems.append("no %s case to inject faults into" % label)
    if problems:
        return problems
    name_of = {"value": probes["value"]["name"], "raised": probes["raised"]["name"]}

    def verdict_for(case, shim_record):
        return judge_all(dict(catalog, cases=[case]), up, reference, {case["name"]: shim_record})[case["name"]][0]

    refusal = {"exc": "NotImplementedError", "phase": "call",
               "msg": "torchnative does not implement operator aten::made_up.default yet (schema: ...)"}
    faults = [
        ("value", "a float element changed by 1e-3 relative + 1", _perturbed(up[name_of["value"]]), DIFFER),
        ("value", "a raise where upstream returned", {"exc": "RuntimeError", "phase": "call", "msg": "x"}, DIFFER),
        ("value", "a strict refusal", refusal, REFUSED),
        ("value", "the refusal's message in a RuntimeError", dict(refusal, exc="RuntimeError"), DIFFER),
        ("value", "a NotImplementedError naming nothing",
         {"exc": "NotImplementedError", "phase": "call", "msg": "not implemented"}, DIFFER),
        ("value", "an AttributeError for a missing torch._C name",
         {"exc": "AttributeError", "phase": "call", "msg": "module 'torch._C' has no attribute '_foo'"}, DIFFER),
        ("value", "a crash", {"crash": "was killed by SIGSEGV while running this case"}, CRASH),
        ("raised", "a value where upstream raised", {"value": {"kind": "NoneType", "value": None}}, DIFFER),
        ("raised", "another exception type",
         {"exc": "ZeroDivisionError" if up[name_of["raised"]]["exc"] != "ZeroDivisionError" else "KeyError",
          "phase": "call", "msg": "x"}, DIFFER),
    ]
    for probe, label, record, expected in faults:
        case = probes[probe]
        got = verdict_for(case, dict(record, name=case["name"]))
        if got != expected:
            problems.append("%s on %s: judged %s, expected %s" % (label, case["name"], got, expected))
    return problems


def _first_float(value):
    if value.get("kind") == "tensor" and value["dtype"] in ("torch.float32", "torch.float64"):
        return bool(compare.flatten(value["data"])) and all(
            type(v) is float and v == v for v in compare.flatten(value["data"])[:1])
    return any(_first_float(item) for item in value.get("items", ()))


def _perturbed(record):
    record = copy.deepcopy(record)

    def bump(value):
        if value.get("kind") == "tensor" and value["dtype"] in ("torch.float32", "torch.float64") \
                and compare.flatten(value["data"]):
            data = value["data"]
            while isinstance(data, list) and isinstance(data[0], list):
                data = data[0]
            if isinstance(data, list):
                data[0] = data[0] * (1 + 1e-3) + 1
            else:
                value["data"] = data * (1 + 1e-3) + 1
            return True
        return any(bump(item) for item in value.get("items", ()))
    bump(record["value"]["items"][0])
    return record


def _load(path):
    try:
        with open(path) as stream:
            return json.load(stream)
    except (OSError, ValueError) as error:
        raise HarnessError("cannot read %s: %s" % (path, error))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", default=DEFAULT_SHIM)
    parser.add_argument("--upstream", default=DEFAULT_UPSTREAM)
    parser.add_argument("-k", dest="pattern", help="only OpInfos whose name matches this regular expression")
    parser.add_argument("--max-per-op", type=int, help="at most N samples per OpInfo and dtype (the first N)")
    parser.add_argument("--report", help="write the full per-operator report here")
    parser.add_argument("--json", help="write the machine-readable report here")
    parser.add_argument("--report-only", action="store_true", help="exit 0 even if cases differ")
    parser.add_argument("--selftest", action="store_true",
                        help="upstream against a second upstream process: every case must agree")
    parser.add_argument("--stability", type=int, metavar="RUNS",
                        help="run upstream RUNS times and list the OpInfos whose results differ between runs")
    parser.add_argument("--keep", metavar="DIR", help="keep the samples and the three passes' records in DIR")
    parser.add_argument("--rejudge", metavar="DIR", help="judge and report the records --keep left in DIR again")
    parser.add_argument("--stall-timeout", type=float, default=golden_run.STALL_TIMEOUT)
    options = parser.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    shim = options.upstream if options.selftest or options.stability else options.shim
    command = " ".join(["tests/golden/opinfo/suite.py"] + (argv if argv is not None else sys.argv[1:]))
    started = time.monotonic()
    try:
        if options.rejudge:
            catalog, up, reference, theirs = [_load(os.path.join(options.rejudge, part + ".json"))
                                              for part in ("samples", "upstream", "reference", "shim")]
            meta = _load(os.path.join(options.rejudge, "meta.json"))
            command = "%s (re-judged: %s)" % (meta["command"], command)
            wall = meta["wall"]
        else:
            if not os.path.exists(shim):
                raise HarnessError("shim interpreter %s not found (build .venv or pass --shim)" % shim)
            with tempfile.TemporaryDirectory(prefix="opinfo-") as scratch:
                keep = os.path.abspath(options.keep) if options.keep else scratch
                os.makedirs(keep, exist_ok=True)
                samples_path = os.path.join(keep, "samples.json")
                generate(options.upstream, samples_path, options.pattern, options.max_per_op, log)
                catalog = _load(samples_path)
                if not catalog["cases"]:
                    raise HarnessError("no OpInfo matches %r" % options.pattern)
                if options.stability:
                    differing = stability(options.upstream, catalog, samples_path, options.stability,
                                          options.stall_timeout, log)
                    for op, count in sorted(differing.items()):
                        print("%6d cases differ between upstream runs: %s%s"
                              % (count, op, "" if op in ACROSS_PROCESSES else " (not in ACROSS_PROCESSES)"))
                    return 1 if set(differing) - ACROSS_PROCESSES else 0
                up, reference, theirs = collect(shim, options.upstream, catalog, samples_path,
                                                options.stall_timeout, log)
                wall = time.monotonic() - started
                if options.keep:
                    for part, records in (("upstream", up), ("reference", reference), ("shim", theirs),
                                          ("meta", {"command": command, "wall": wall})):
                        with open(os.path.join(keep, part + ".json"), "w") as stream:
                            stream.write(json.dumps(records))
    except HarnessError as error:
        print("opinfo harness error: %s" % error, file=sys.stderr)
        return 2
    verdicts = judge_all(catalog, up, reference, theirs)
    grand = write_reports(catalog, up, theirs, verdicts, command, options.report, options.json, sys.stdout, wall)
    if options.selftest:
        problems = fault_checks(catalog, up, reference)
        for problem in problems:
            print("SELFTEST FAIL %s" % problem)
        print("fault injection: %d problems" % len(problems))
        return 1 if problems or grand[AGREE] != sum(grand.values()) else 0
    if options.report_only:
        return 0
    return 1 if grand[DIFFER] or grand[CRASH] else 0


if __name__ == "__main__":
    sys.exit(main())
