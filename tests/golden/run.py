#!/usr/bin/python3
"""Golden tests: every case runs on the shim and on upstream torch, compared.

  run.py [--shim PY] [--upstream PY] [--selftest] [-k PATTERN] [--sample]

Three worker processes run all selected cases, one after another (the machine
is shared): upstream (also recording the aten ops each case dispatches),
upstream again in float64 (the reference for derived tolerances, see
compare.py), and the shim.  See README.md.  Exit status: 0 if no case failed,
1 if some failed, 2 if the harness could not run.
"""

import argparse
import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "worker.py")
UNSUPPORTED = os.path.join(HERE, "unsupported.txt")
NO_DERIVATIVE = os.path.join(HERE, "no_derivative.txt")
KNOWN_DEVIATIONS = os.path.join(HERE, "known_deviations.txt")
sys.path.insert(0, HERE)

import compare  # noqa: E402  (needs HERE on sys.path)
from spec import GRADCHECK, GRADIENT, TEMPORARY  # noqa: E402

DEFAULT_SHIM = os.path.join(REPO, ".venv", "bin", "python")
DEFAULT_UPSTREAM = "/usr/bin/python3"
# A worker that writes nothing for this long (importing torch, or one case) is
# killed and the case it was running reported.  Cases take milliseconds.
STALL_TIMEOUT = 60.0
# After this many worker deaths, the remaining cases are reported as not run
# rather than paying one interpreter start-up per crashing case.
MAX_RESTARTS = 25
# Keep BLAS/OpenMP to one thread: results must not depend on the thread count,
# and the machine is shared. OpenBLAS's kernels are pinned to its AVX2 set (Haswell) on both
# sides: on an AVX-512 machine (SkylakeX kernels) the shim's det/slogdet round differently from
# upstream's in 5 float32 aliasing cases, and a case must not pass or fail by machine. That
# difference is an open item of issue 14 (the shim reaches LAPACK through another path).
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "OPENBLAS_CORETYPE": "Haswell"}


class HarnessError(Exception):
    """The harness itself could not run (bad interpreter, broken case module)."""


def list_cases(python, pattern):
    """(selected case names, {name: required overload}), as the upstream interpreter enumerates the catalog."""
    command = [python, WORKER, "--list"] + (["-k", pattern] if pattern else [])
    try:
        listing = subprocess.run(command, capture_output=True, text=True, timeout=STALL_TIMEOUT,
                                 env=dict(os.environ, **WORKER_ENV))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HarnessError("cannot list cases with %s: %s" % (python, error))
    if listing.returncode != 0:
        raise HarnessError("cannot list cases with %s:\n%s" % (python, listing.stderr.strip()))
    names, requires = [], {}
    for line in listing.stdout.splitlines():
        name, *required = line.split()
        names.append(name)
        if required:
            requires[name] = required[0]
    return names, requires


# The index sweep's forms (cases/aliasing_index.py), whose variants are
# <layout>_<view>_<operator>_<right-hand side>.
INDEX_FORMS = ("alias.subscript", "alias.view", "alias.advanced")
# How the generated sweep's variants end when an input P aliases the written-to W
# (cases/aliasing.py): <P's argument name>_<how P aliases W>.
ALIASED_INPUT = ("is_written_transposed", "is_written", "overlaps", "transposed", "disjoint")
# A case name's dtype component (storage/set_/empty has none).
DTYPE = re.compile(r"(bool|(b?float|u?int|complex)\d+)$")


def strata(name):
    """The strata a case stands for in a sample (--sample). An operation's case stands for
    the operation and for its variant (call form, shape, keywords) in any dtype: what decides
    the aten overloads it dispatches (``a << b`` reaches aten::__lshift__, ``1 - t`` aten::rsub).
    An aliasing case stands for its overload and its family: in the generated sweep the
    written-to tensor's layout or how an input aliases it, whatever the argument's name; in
    the index sweep the view, the operator and the right-hand side."""
    if name.endswith(GRADIENT):  # a gradient twin stands for its case's strata, differentiated
        return [(GRADIENT,) + key for key in strata(name.removesuffix(GRADIENT))]
    parts = name.removesuffix(TEMPORARY).split("/")
    group, variant = parts[0], parts[-1]
    keys = [(group,)]
    if group in INDEX_FORMS:
        layout, *view, operator, rhs = variant.split("_")
        keys += [(group, layout, "_".join(view)), (group, operator), (group, rhs)]
    elif group.startswith("alias."):
        family = next(("input_" + how for how in ALIASED_INPUT if variant.endswith("_" + how)), variant)
        keys.append(("alias", family))
    else:
        keys.append((group,) + tuple(part for part in parts[1:] if not DTYPE.match(part)))
    return keys


def sample(names):
    """A stratified sample of ``names``, in catalog order: the first case of each stratum
    (see strata), with what judging it reads: its @temporary twin or the case it is the twin
    of (judge_all's through_temporary), and its float32 sibling (compare.error_floors)."""
    seen, chosen = set(), set()
    for name in names:
        keys = [key for key in strata(name) if key not in seen]
        if keys:
            seen.update(keys)
            base = name.removesuffix(TEMPORARY)
            parts = base.split("/")
            chosen.update((base, base + TEMPORARY, "/".join([parts[0], "float32"] + parts[2:])))
    return [name for name in names if name in chosen]


def check_sample(listed, names, upstream, out=sys.stdout):
    """Whether --sample would cover every aten overload the cases ``names`` (the full
    catalog, ``listed``, less what the probe left out) dispatch on upstream: a FAIL line
    for each it would miss; their number."""
    drawn = set(sample(listed))
    missed = sorted(covered_ops(names, upstream) - covered_ops([n for n in names if n in drawn], upstream))
    for op in missed:
        print("FAIL --sample: no case of the sample dispatches %s (give its case a stratum of its own, "
              "see strata)" % op, file=out)
    return len(missed)


def probes(names, requires):
    """{overload: the first selected case requiring it}."""
    first = {}
    for name in names:
        if name in requires:
            first.setdefault(requires[name], name)
    return first


def refuses(record, overload):
    """Whether a probe record is the shim refusing ``overload`` by name: NotImplementedError
    naming it ("aten::lcm_" or "aten::lcm_.out" refuse aten::lcm_, not aten::lcm_x)."""
    named = re.escape(overload.split(".")[0]) + r"(?!\w)"
    return record.get("exc") == "NotImplementedError" and re.search(named, record["msg"]) is not None


def leave_out_refused(shim, names, requires, log):
    """(``names`` without the cases of overloads whose probe case the shim refuses by name,
    the number of overloads left out).  See Case.requires."""
    first = probes(names, requires)
    records = run_worker(shim, list(first.values()))
    refused = {overload for overload, name in first.items() if refuses(records.get(name, {}), overload)}
    kept = [name for name in names if requires.get(name) not in refused]
    log("# probe (%s): %d of %d required overloads refused by name, %d cases left out"
        % (shim, len(refused), len(first), len(names) - len(kept)))
    return kept, len(refused)


def run_worker(python, names, flags=(), stall_timeout=STALL_TIMEOUT, extra_env=None, worker=WORKER,
               max_restarts=MAX_RESTARTS):
    """Runs ``names`` in as few worker processes as crashes allow; {name: record}.

    ``worker`` is a script speaking worker.py's protocol (opinfo/ has another).

    A worker that dies or stalls is restarted after the case it was running,
    which is recorded as {"name", "crash"}.
    """
    env = dict(os.environ, **WORKER_ENV, **(extra_env or {}))
    results = {}
    remaining = list(names)
    restarts = 0
    with tempfile.TemporaryDirectory(prefix="golden-") as scratch:
        names_path = os.path.join(scratch, "names")
        out_path = os.path.join(scratch, "results.jsonl")
        err_path = os.path.join(scratch, "stderr")
        while remaining:
            with open(names_path, "w") as names_file:
                names_file.write("\n".join(remaining))
            with open(err_path, "w") as err_file:
                try:
                    process = subprocess.Popen([python, worker, "--names", names_path, "--out", out_path]
                                               + list(flags), stdout=subprocess.DEVNULL, stderr=err_file,
                                               cwd=scratch, env=env)
                except OSError as error:
                    raise HarnessError("cannot start %s: %s" % (python, error))
                ending = _wait_for(process, out_path, stall_timeout)
            running = _read_results(out_path, results)
            if ending is None:  # clean exit
                if running is None:
                    break
                ending = "exited with status 0"
            stderr = "; stderr: " + _tail(err_path)
            if running is None and not results:
                raise HarnessError("%s worker %s before running any case%s" % (python, ending, stderr))
            if running is None:
                for name in remaining:
                    results.setdefault(name, {"name": name, "crash": ending + " before running this case" + stderr})
                break
            results[running] = {"name": running, "crash": ending + " while running this case" + stderr}
            remaining = remaining[remaining.index(running) + 1:]
            restarts += 1
            if restarts > max_restarts and remaining:
                for name in remaining:
                    results[name] = {"name": name, "crash": "not run: more than %d worker crashes" % max_restarts}
                break
    return results


def _wait_for(process, out_path, stall_timeout):
    """None on a clean exit, else how the worker ended (killed here if it stalled)."""
    last_size, last_progress = -1, time.monotonic()
    while True:
        try:
            returncode = process.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            pass
        size = os.path.getsize(out_path) if os.path.exists(out_path) else 0
        if size != last_size:
            last_size, last_progress = size, time.monotonic()
        elif time.monotonic() - last_progress > stall_timeout:
            process.kill()
            process.wait()
            return "made no progress for %gs and was killed" % stall_timeout
    if returncode == 0:
        return None
    if returncode < 0:
        return "was killed by %s" % signal.Signals(-returncode).name
    return "exited with status %d" % returncode


def _read_results(out_path, results):
    """Adds finished records to ``results``; returns the case started but not finished, if any."""
    running = None
    if not os.path.exists(out_path):
        return None
    with open(out_path) as out:
        for line in out:
            try:
                record = json.loads(line)
            except ValueError:  # a line cut short by the crash
                continue
            if "start" in record:
                running = record["start"]
            else:
                results[record["name"]] = record
                running = None
    return running


def _tail(path, lines=3):
    with open(path, errors="replace") as stream:
        text = [line.strip() for line in stream if line.strip()]
    return " | ".join(text[-lines:])[-400:] or "(empty)"


def collect(shim, upstream, names, stall_timeout=STALL_TIMEOUT, log=None):
    """Runs the three passes; returns (upstream, reference, shim) result dicts. Upstream's two
    come from GOLDEN_CACHE when an earlier run left them there (see upstream_pass)."""
    passes = []
    for label, python, flags in (("upstream", upstream, ["--record-ops"]),
                                 ("upstream float64 reference", upstream, ["--reference"]),
                                 ("shim", shim, [])):
        started = time.monotonic()
        if label == "shim":
            passes.append(run_worker(python, names, flags, stall_timeout))
        else:
            passes.append(upstream_pass(python, names, flags, stall_timeout))
        if log:
            log("# %s pass (%s): %.1fs" % (label, python, time.monotonic() - started))
    return tuple(passes)


def upstream_pass(python, names, flags, stall_timeout):
    """An upstream pass whose records are kept, case by case, in the folder GOLDEN_CACHE names
    when it is set (make test sets it, so its several golden runs compute each of upstream's
    records once). A record depends only on its case, the harness and upstream's torch: those
    make the key; a run computes only the cases missing there. Crashed cases are not kept. The
    self-test's second upstream process is a "shim" pass, never taken from here, so it still
    shows whether upstream's results are deterministic."""
    folder = os.environ.get("GOLDEN_CACHE")
    if not folder:
        return run_worker(python, names, flags, stall_timeout)
    path = os.path.join(folder, _pass_key(python, flags) + ".json")
    kept = {}
    if os.path.exists(path):
        with open(path) as stream:
            kept = json.load(stream)
    missing = [name for name in names if name not in kept]
    fresh = run_worker(python, missing, flags, stall_timeout) if missing else {}
    if missing:
        # A case the pass leaves out (the reference pass skips exact cases) is kept as None.
        kept.update({name: fresh.get(name) for name in missing if "crash" not in fresh.get(name, {})})
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False) as stream:
            json.dump(kept, stream)
        os.replace(stream.name, path)
    records = {name: fresh.get(name, kept.get(name)) for name in names}
    return {name: record for name, record in records.items() if record is not None}


def _pass_key(python, flags):
    digest = hashlib.sha256(_upstream_identity(python).encode())
    for flag in flags:
        digest.update(b"\0" + flag.encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _upstream_identity(python):
    """What upstream's records depend on besides the pass's flags: the interpreter, its torch and
    the harness's sources (once per process: both upstream passes of a run share it)."""
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__, torch.__file__)"],
                             capture_output=True, text=True, timeout=STALL_TIMEOUT, env=dict(os.environ, **WORKER_ENV))
    digest = hashlib.sha256((os.path.realpath(python) + "\0" + version.stdout).encode())
    for root, _, files in sorted(os.walk(HERE)):
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(root, name), "rb") as stream:
                    digest.update(name.encode() + b"\0" + stream.read())
    return digest.hexdigest()


def read_list(path):
    """The entries of a list file: one per line, '#' starts a comment line."""
    if not os.path.exists(path):
        return set()
    with open(path) as stream:
        return {line.strip() for line in stream if line.strip() and not line.startswith("#")}


# How the shim refuses a gradient it has no formula for (shim/autograd/record.cpp).
NO_DERIVATIVE_REFUSAL = re.compile(r"^torchnative has no derivative for (aten::[\w.]+) yet")


def refused_derivative(record, no_derivative):
    """The operator of no_derivative.txt a gradient twin's shim record refuses by name, or None."""
    found = record.get("exc") == "NotImplementedError" and NO_DERIVATIVE_REFUSAL.match(record.get("msg", ""))
    if not found:
        return None
    op = found.group(1)
    return next((entry for entry in (op, op.split(".")[0]) if entry in no_derivative), None)


def stale_no_derivative(no_derivative, used, out=sys.stdout):
    """FAIL lines for entries of no_derivative.txt no case was refused for (the shim has the
    formula now, or no case reaches the operator); their number."""
    for entry in sorted(no_derivative - used):
        print("FAIL no_derivative.txt: no gradient case was refused for %s: remove the entry" % entry, file=out)
    return len(no_derivative - used)


def read_known_deviations(path=KNOWN_DEVIATIONS):
    """{case name: reason}: numeric disagreements understood and recorded, not fixed yet."""
    if not os.path.exists(path):
        return {}
    known = {}
    with open(path) as stream:
        for line in stream:
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition("#")
                known[name.strip()] = reason.strip()
    return known


def through_temporary(name, upstream, reference, shim, unsupported, floors):
    """Whether an aliasing case's disagreement is upstream's loop order, not a shim fault.

    True when the case has a twin reading its aliased input from a copy (spec.TEMPORARY),
    upstream's aliased result differs from its own result on the twin (what it computes
    depends on what its loops have already overwritten), and the shim's result agrees
    with the twin's: the shim computes the call as through a temporary.
    """
    twin = name + TEMPORARY
    if twin not in upstream or "value" not in upstream[twin] or "value" not in upstream.get(name, {}):
        return False
    judge = lambda record: compare.judge(upstream[twin], record, reference.get(twin), unsupported,  # noqa: E731
                                         floors.get(twin, 0.0))[0]
    return judge(upstream[name]) == compare.FAIL and judge(shim.get(name, {"crash": "none"})) == compare.PASS


def judge_all(names, upstream, reference, shim, unsupported, known=None, no_derivative=frozenset(), used=None):
    """[(name, verdict, reason)] in case order.

    A failing case listed in known_deviations.txt is reported as a deviation, not a
    failure; a listed case that passes is a failure (the entry must go), so the list
    can only describe disagreements that still exist. A gradient or gradcheck twin the shim refuses
    by naming an operator of ``no_derivative`` is NO_DERIVATIVE (its entry added to ``used``).
    """
    known = known or {}
    verdicts = []
    floors = compare.error_floors(names, upstream, reference)
    for name in names:
        missing = {"name": name, "crash": "produced no result"}
        differentiated = name.endswith((GRADIENT, GRADCHECK))
        entry = refused_derivative(shim.get(name, {}), no_derivative) if differentiated else None
        if entry:
            verdicts.append((name, compare.NO_DERIVATIVE, None))
            if used is not None:
                used.add(entry)
            continue
        verdict, reason = compare.judge(upstream.get(name, missing), shim.get(name, missing),
                                        reference.get(name), unsupported, floors.get(name, 0.0))
        if verdict == compare.FAIL and through_temporary(name, upstream, reference, shim, unsupported, floors):
            verdict, reason = compare.THROUGH_TEMPORARY, reason
        if name in known:
            if verdict == compare.FAIL:
                verdict, reason = compare.DEVIATION, "%s (known: %s)" % (reason, known[name])
            else:
                verdict, reason = compare.FAIL, "listed in known_deviations.txt but now agrees: remove the entry"
        verdicts.append((name, verdict, reason))
    return verdicts


def covered_ops(names, upstream):
    """Overloads dispatched by cases that upstream ran without raising."""
    ops = set()
    for name in names:
        record = upstream.get(name, {})
        if "value" in record:
            ops.update(record.get("ops", ()))
    return ops


def report(verdicts, ops, left_out=(0, 0), out=sys.stdout):
    """Prints the failures and the summary; ``left_out`` is (cases, overloads) the probe left out."""
    counts = {compare.PASS: 0, compare.FAIL: 0, compare.REFUSED: 0, compare.DEVIATION: 0,
              compare.THROUGH_TEMPORARY: 0, compare.NO_DERIVATIVE: 0}
    for name, verdict, reason in verdicts:
        counts[verdict] += 1
        if verdict == compare.FAIL:
            print("FAIL %s: %s" % (name, reason), file=out)
        elif verdict == compare.DEVIATION:
            print("DEVIATION %s: %s" % (name, reason), file=out)
    aten = {op.split(".")[0] for op in ops if op.startswith("aten::")}
    print("aten operators covered: %d distinct (%d overloads)"
          % (len(aten), len({op for op in ops if op.startswith("aten::")})), file=out)
    summary = "%d passed, %d failed" % (counts[compare.PASS], counts[compare.FAIL])
    if counts[compare.REFUSED]:
        print("%d refused as listed in unsupported.txt" % counts[compare.REFUSED], file=out)
    if counts[compare.NO_DERIVATIVE]:
        print("%d gradient cases refused by name as listed in no_derivative.txt" % counts[compare.NO_DERIVATIVE],
              file=out)
    if counts[compare.DEVIATION]:
        print("%d known deviations as listed in known_deviations.txt" % counts[compare.DEVIATION], file=out)
    if counts[compare.THROUGH_TEMPORARY]:
        print("%d aliasing cases where upstream's result depends on its loop order and the shim's equals "
              "upstream's through a temporary (%s)" % (counts[compare.THROUGH_TEMPORARY], TEMPORARY), file=out)
    if left_out[0]:
        print("%d cases of %d overloads the shim refuses by name not run (probe)" % left_out, file=out)
    skipped = counts[compare.REFUSED] + counts[compare.NO_DERIVATIVE] + counts[compare.DEVIATION] + left_out[0]
    if skipped:
        summary += ", %d skipped" % skipped
    print(summary, file=out)
    return counts[compare.FAIL]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", default=DEFAULT_SHIM, help="interpreter whose torch is the shim")
    parser.add_argument("--upstream", default=DEFAULT_UPSTREAM, help="interpreter with upstream torch")
    parser.add_argument("--selftest", action="store_true", help="check that the comparators reject faults")
    parser.add_argument("-k", dest="pattern", help="only cases whose name matches this regular expression")
    parser.add_argument("--sample", action="store_true",
                        help="a stratified sample of the selected cases: every operator and aliasing family "
                             "at least once (make check)")
    parser.add_argument("--stall-timeout", type=float, default=STALL_TIMEOUT,
                        help="seconds without output after which a worker is killed (default %(default)s)")
    options = parser.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    try:
        names, requires = list_cases(options.upstream, options.pattern)
        if options.sample:
            names = sample(names)
        if options.selftest:
            import selftest
            return selftest.run(options.upstream, names, log)
        if not os.path.exists(options.shim):
            raise HarnessError("shim interpreter %s not found (build .venv or pass --shim)" % options.shim)
        listed = names
        names, refused = leave_out_refused(options.shim, names, requires, log)
        upstream, reference, shim = collect(options.shim, options.upstream, names, options.stall_timeout, log)
    except HarnessError as error:
        print("golden harness error: %s" % error, file=sys.stderr)
        return 2
    # Where the whole catalog ran, whether --sample still covers every overload it dispatches,
    # and whether every entry of no_derivative.txt is still refused.
    whole = not options.sample and not options.pattern
    failed = check_sample(listed, names, upstream) if whole else 0
    no_derivative, used = read_list(NO_DERIVATIVE), set()
    verdicts = judge_all(names, upstream, reference, shim, read_list(UNSUPPORTED), read_known_deviations(),
                         no_derivative, used)
    failed += stale_no_derivative(no_derivative, used) if whole else 0
    failed += report(verdicts, covered_ops(names, upstream), (len(listed) - len(names), refused))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
