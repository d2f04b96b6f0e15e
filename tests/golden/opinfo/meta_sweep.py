#!/usr/bin/python3
"""Every OpInfo of upstream's op_db on the meta device: the shim against upstream 1.13.1.

  /usr/bin/python3 tests/golden/opinfo/meta_sweep.py [--shim PYTHON] [-k OP_REGEX] [--max-per-op N]
                                                      [--json FILE]

generate.py draws the float32 samples of every OpInfo (seeded as the OpInfo peer suite
does); each sample's tensors are rebuilt on device="meta" with their shapes, strides,
offsets and storage sharing, and each variant (function, method, in-place) runs in one
upstream and one shim interpreter (meta_worker.py; a crashed worker restarts after the
case).  A case's record is the layout of its result and of its inputs after the call
(device, shape, strides, offset, dtype), or its exception.  Outcomes:

  agree           both returned the same layouts
  both raise      both raised (upstream's meta refuses it too, or the sample is invalid)
  gap             upstream returned, the shim refused the meta call by name
                  ("torchnative has no meta (shape-only) implementation of aten::...")
  not implemented upstream returned, the shim refused the operator by name on any device
                  (a NotImplementedError beginning "torchnative ...": not a meta gap)
  as upstream cpu the shim disagrees with upstream's meta, but its record is upstream's on the
                  cpu (the sample's tensors with their values), up to the device: a defect
                  of upstream 1.13.1's meta functions, not the shim's
  cpu differs     the shim's meta record is the shim's own cpu record, devices aside, and that
                  differs from upstream's cpu one: a difference of the shim's cpu kernel (the
                  OpInfo peer suite's business) that its meta path inherits, not of the meta path
  unnamed         upstream returned, the shim raised anything else          (a defect)
  strides         same devices, shapes and dtypes, other strides or offsets  (a defect)
  differ          other devices, shapes, dtypes or structure                (a defect)
  extra           the shim returned where upstream's meta raised            (a defect)
  crash           the shim's worker died or stalled on the case             (a defect)

Prints the counts, the gaps ranked by operator, and every defect; exits 1 if there is one.
"""

import argparse
import collections
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import run as golden_run  # noqa: E402
import suite  # noqa: E402  (generate: runs generate.py under upstream)

META_WORKER = os.path.join(HERE, "meta_worker.py")
DEFECTS = ("unnamed", "strides", "differ", "extra", "crash")
OUTCOMES = ("agree", "both raise", "gap", "not implemented", "as upstream cpu", "cpu differs") + DEFECTS
META_REFUSAL = re.compile(r"torchnative has no meta \(shape-only\) implementation of (\S+)")
REFUSAL = re.compile(r"torchnative ")
MAX_RESTARTS = 100


def meta_catalog(path):
    """generate.py's float32 cases, each storage reduced to its dtype and element count."""
    with open(path) as stream:
        catalog = json.load(stream)
    for sample in catalog["samples"]:
        sample["storages"] = [{"dtype": s["dtype"], "size": len(s["values"])} for s in sample["storages"]]
    catalog["cases"] = [case for case in catalog["cases"] if case["dtype"] == "float32"]
    return catalog


def without_strides(layout):
    if isinstance(layout, list):
        return [without_strides(item) for item in layout]
    if isinstance(layout, dict) and "stride" in layout:
        return {key: value for key, value in layout.items() if key not in ("stride", "offset")}
    return layout


def judge(upstream, shim):
    if "crash" in shim or "harness" in shim:
        return "crash"
    if "exc" in upstream:
        return "both raise" if "exc" in shim else "extra"
    if "exc" in shim:
        if shim["exc"] == "NotImplementedError" and REFUSAL.match(shim["msg"]):
            return "gap" if META_REFUSAL.match(shim["msg"]) else "not implemented"
        return "unnamed"
    mine, theirs = [shim["value"], shim["inputs"]], [upstream["value"], upstream["inputs"]]
    if mine == theirs:
        return "agree"
    return "strides" if without_strides(mine) == without_strides(theirs) else "differ"


def on_any_device(layout):
    if isinstance(layout, list):
        return [on_any_device(item) for item in layout]
    if isinstance(layout, dict) and "device" in layout:
        return dict(layout, device="any")
    return layout


def same_but_device(one, other):
    """Whether two records agree, devices aside (both raising agrees)."""
    if "exc" in one or "exc" in other or "crash" in one or "crash" in other:
        return "exc" in one and "exc" in other
    return on_any_device([one["value"], one["inputs"]]) == on_any_device([other["value"], other["inputs"]])


def judge_all(names, upstream, shim, on_cpu):
    """{name: outcome}; on_cpu(side, names) gives that side's cpu records of the disputed cases."""
    outcomes = {name: judge(upstream[name], shim[name]) for name in names}
    for side, outcome in (("upstream", "as upstream cpu"), ("shim", "cpu differs")):
        disputed = [name for name, judged in outcomes.items() if judged in DEFECTS and judged != "crash"]
        cpu = on_cpu(side, disputed) if disputed else {}
        for name in disputed:
            if same_but_device(cpu[name], shim[name]):
                outcomes[name] = outcome
    return outcomes


def report(cases, outcomes, upstream, shim, out):
    counts = collections.Counter(outcomes.values())
    ops = {case["op"] for case in cases}
    print("%d OpInfos, %d float32 cases: %s" % (len(ops), len(cases),
                                               ", ".join("%s %d" % (o, counts[o]) for o in OUTCOMES)), file=out)
    gaps = collections.Counter()
    for name, outcome in outcomes.items():
        if outcome == "gap":
            gaps[META_REFUSAL.match(shim[name]["msg"]).group(1)] += 1
    print("\ngaps by the operator the shim refuses (cases):", file=out)
    for operator, count in gaps.most_common():
        print("  %5d  %s" % (count, operator), file=out)
    inherited = collections.Counter(name.split("/")[0] for name, outcome in outcomes.items()
                                    if outcome == "cpu differs")
    print("\ncpu differs, by OpInfo (cases): %s" % ", ".join("%s %d" % item for item in inherited.most_common()),
          file=out)
    print("\ndefects:", file=out)
    for name, outcome in outcomes.items():
        if outcome in DEFECTS:
            print("  %-8s %s\n    upstream: %s\n    shim:     %s" % (
                outcome, name, json.dumps(upstream[name])[:400], json.dumps(shim[name])[:400]), file=out)
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", default=os.path.join(REPO, ".venv", "bin", "python"))
    parser.add_argument("--upstream", default="/usr/bin/python3")
    parser.add_argument("-k", dest="pattern", help="only OpInfos whose name matches this regular expression")
    parser.add_argument("--max-per-op", type=int, help="at most this many samples per OpInfo")
    parser.add_argument("--json", help="write every case's records and outcome here")
    options = parser.parse_args()
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="meta-sweep-") as scratch:
        generated = os.path.join(scratch, "generated.json")
        suite.generate(options.upstream, generated, options.pattern, options.max_per_op, log)
        catalog = meta_catalog(generated)
        samples = os.path.join(scratch, "meta.json")
        with open(samples, "w") as stream:
            json.dump(catalog, stream)
        names = [case["name"] for case in catalog["cases"]]
        records = {side: golden_run.run_worker(python, names, ["--samples", samples], worker=META_WORKER,
                                               max_restarts=MAX_RESTARTS)
                   for side, python in (("upstream", options.upstream), ("shim", options.shim))}
        failed = [name for name, record in records["upstream"].items() if "crash" in record or "harness" in record]
        if failed:
            log("upstream's worker failed on %d cases, e.g. %s" % (len(failed), records["upstream"][failed[0]]))
            return 2
        pythons = {"upstream": options.upstream, "shim": options.shim}
        outcomes = judge_all(names, records["upstream"], records["shim"],
                             lambda side, disputed: golden_run.run_worker(
                                 pythons[side], disputed, ["--samples", generated, "--cpu"], worker=META_WORKER,
                                 max_restarts=MAX_RESTARTS))
    counts = report(catalog["cases"], outcomes, records["upstream"], records["shim"], sys.stdout)
    if options.json:
        with open(options.json, "w") as stream:
            json.dump({name: {"outcome": outcome, "upstream": records["upstream"][name],
                              "shim": records["shim"][name]} for name, outcome in outcomes.items()}, stream)
    return 1 if any(counts[outcome] for outcome in DEFECTS) else 0


if __name__ == "__main__":
    sys.exit(main())
