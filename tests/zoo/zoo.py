#!/usr/bin/python3
"""The torchvision zoo on the shim against upstream (issue 18 point 4; `make zoo`).

  zoo.py [--shim PY] [--upstream PY] [-k REGEX] [--report FILE] [--timeout SECONDS]

Every classification builder of torchvision (80 in Debian's 0.14.1), one at a time:
model_script.py runs upstream in float32 (which builds it from a seed and saves its weights and
inputs), upstream in float64, and the shim in float32 and float64 (all three loading them). Each
model gets three verdicts (tests/golden/compare.py): eval, the float32 logits of an eval-mode
forward, and train32, the float32 loss and every parameter's gradient of a training-mode forward
and backward, each float within K times upstream's own float32-vs-float64 error over the record
of the float64 reference, or equal to upstream's (network_difference); train64, the shim's
float64 training record against upstream's, within the same error in float64 ulps
(network_difference_float64). A gradient jumps where a ReLU's input crosses 0 or a max pool's
inputs tie; float32 rounding can put a value on the other side of a jump than float64 does,
upstream's as well as ours, so a model agrees when eval does and train32 or, failing it, train64
does. train64's tolerance, upstream's float32 error in float64 ulps, is the tighter of the two:
float64 rounding in another order, amplified as float32's is, can pass it by a few floats in tens
of millions (efficientnet_b4-b7), so a train64 difference alone is listed, not counted. `refused`: the shim raised NotImplementedError naming what it
lacks (the columns whose records it wrote before are judged: eval when only its training step was
refused); `differ`: anything else, with the first difference. Exit status 0 if every model agrees
or agrees where it ran and is refused by name elsewhere.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "golden"))
from compare import network_difference, network_difference_float64  # noqa: E402

SCRIPT = os.path.join(HERE, "model_script.py")
REFUSAL = re.compile(r"NotImplementedError: (torchnative .*)")


def builders(upstream):
    """The classification builders of upstream's torchvision, in its order."""
    code = "import torchvision.models as m; print(' '.join(m.list_models(m)))"
    return subprocess.run([upstream, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def run_side(python, name, dtype, folder, timeout, write=False):
    """The side's record (what it wrote: only the logits when its training step failed) and, when
    it failed, why (its last error line), else None."""
    record = os.path.join(folder, "%s-%s" % (os.path.basename(os.path.dirname(os.path.dirname(python))), dtype))
    command = [python, SCRIPT, name, dtype, os.path.join(folder, "weights.pt"), record] + (["--write"] if write else [])
    why = None
    try:
        process = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if process.returncode != 0:
            lines = [line for line in process.stderr.strip().splitlines() if line.strip()]
            why = lines[-1] if lines else "exit status %d" % process.returncode
    except subprocess.TimeoutExpired:
        why = "timed out after %d s" % timeout
    files = os.listdir(record) if os.path.isdir(record) else []
    return {name[:-len(".npy")]: numpy.load(os.path.join(record, name), mmap_mode="r") for name in files}, why


COLUMNS = ("eval", "train32", "train64")


def verdicts(upstream, reference, ours, ours64, columns=COLUMNS):
    """{column: (verdict, why)} for `columns`: the float32 eval logits and training record judged
    against the float64 reference (network_difference), the shim's float64 training record against
    upstream's (network_difference_float64)."""
    if columns != ("eval",):
        for key, what in (("shapes", "the parameters' shapes differ"), ("unused", "other parameters have no gradient")):
            if not numpy.array_equal(ours[key], upstream[key]):
                return {column: ("differ", what) for column in columns}
    train = lambda record: [record["loss"], record["grads"]]  # noqa: E731
    judges = {"eval": lambda: network_difference(upstream["logits"], ours["logits"], reference["logits"]),
              "train32": lambda: network_difference(train(upstream), train(ours), train(reference)),
              "train64": lambda: network_difference_float64(train(upstream), train(reference), train(ours64))}
    found = {column: judges[column]() for column in columns}
    return {column: ("agree", "") if why is None else ("differ", why) for column, why in found.items()}


def judge_model(name, shim, python, timeout):
    """{column: (verdict, why)}; a side that cannot run gives every column its reason."""
    with tempfile.TemporaryDirectory(prefix="zoo-") as folder:
        sides = [(python, "float32", "upstream"), (python, "float64", "upstream float64"),
                 (shim, "float32", None), (shim, "float64", None)]
        records = []
        for python_, dtype, label in sides:
            record, why = run_side(python_, name, dtype, folder, timeout, write=not records)
            if why is not None:
                refusal = REFUSAL.search(why)
                failure = (("harness", "%s: %s" % (label, why)) if label
                           else ("refused", refusal.group(1)) if refusal else ("differ", why))
                return judged_before(failure, records + [record])
            records.append(record)
        return verdicts(*records)


def judged_before(failure, records):
    """The shim's failing side's verdicts: the columns whose records were written before it failed
    (eval when its float32 logits were, train32 when its float32 run ended) judged, the rest the
    failure."""
    found = {column: failure for column in COLUMNS}
    if failure[0] != "harness" and len(records) > 2 and "logits" in records[2]:
        found.update(verdicts(*records[:3], None, ("eval",) if len(records) == 3 else ("eval", "train32")))
    return found


def agrees(verdict):
    """A model agrees when its eval forward does and its training step does in float32 or, where
    float32's differs, in float64 (a float32 value on the other side of a gradient's jump than
    upstream's: network_difference_float64). Either training column alone differing is listed."""
    trained = verdict["train32"][0] == "agree" or verdict["train64"][0] == "agree"
    return verdict["eval"][0] == "agree" and trained


def report(rows, out):
    print("| model | eval | train float32 | train float64 | seconds | why |", file=out)
    print("|---|---|---|---|---|---|", file=out)
    for name, verdict, seconds in rows:
        why = "; ".join("%s: %s" % (column, verdict[column][1]) for column in COLUMNS if verdict[column][1])
        print("| %s | %s | %.0f | %s |" % (name, " | ".join(verdict[c][0] for c in COLUMNS), seconds,
                                          why.replace("|", "/")), file=out)
    for column in COLUMNS:
        counts = collections.Counter(verdict[column][0] for _, verdict, _ in rows)
        print("\n%s: %s of %d" % (column, ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())), len(rows)),
              file=out)
    print("\nagree (eval, and train32 or train64): %d of %d" % (sum(agrees(v) for _, v, _ in rows), len(rows)),
          file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", default=os.path.join(REPO, ".venv", "bin", "python"))
    parser.add_argument("--upstream", default="/usr/bin/python3")
    parser.add_argument("-k", dest="pattern", help="only builders whose name matches this regular expression")
    parser.add_argument("--report", help="also write the table here")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per side of a model")
    options = parser.parse_args(argv)
    names = [n for n in builders(options.upstream) if not options.pattern or re.search(options.pattern, n)]
    rows = []
    for name in names:
        started = time.monotonic()
        verdict = judge_model(name, options.shim, options.upstream, options.timeout)
        rows.append((name, verdict, time.monotonic() - started))
        print("%-22s %s %6.1f s %s" % (name, " ".join("%s %-8s" % (c, verdict[c][0]) for c in COLUMNS), rows[-1][2],
                                        next((verdict[c][1] for c in COLUMNS if verdict[c][1]), "")), flush=True)
    print()
    report(rows, sys.stdout)
    if options.report:
        with open(options.report, "w") as out:
            report(rows, out)
    return 0 if all(agrees(verdict) or refused_by_name(verdict) for _, verdict, _ in rows) else 1


def refused_by_name(verdict):
    """A refusal and no difference: what the shim ran agrees, the rest it named."""
    kinds = {kind for kind, _ in verdict.values()}
    return "refused" in kinds and kinds <= {"agree", "refused"}


if __name__ == "__main__":
    sys.exit(main())
