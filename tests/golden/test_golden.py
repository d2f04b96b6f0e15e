"""pytest entry points: the golden comparison and its self-test, each run as a subprocess, and
the checks of run.py's stratified sample (--sample, make check).

run.py is always started with the upstream interpreter (it needs numpy for the
self-test, and pytest itself may be running inside the shim's venv).
GOLDEN_SHIM / GOLDEN_UPSTREAM override the interpreters. GOLDEN_SAMPLE=1 compares the
stratified sample instead of the whole catalog (make asan-python: under the sanitizers every
operator, aliasing family and dtype stratum runs, a fifth of the cases; the release run of
make test compares every case).
"""

import io
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run.py")
REPO = os.path.dirname(os.path.dirname(HERE))
SHIM = os.environ.get("GOLDEN_SHIM", os.path.join(REPO, ".venv", "bin", "python"))
UPSTREAM = os.environ.get("GOLDEN_UPSTREAM", "/usr/bin/python3")
TIMEOUT = 900  # seconds; a normal run takes 2 to 5 minutes
# pytest's bound for a test that runs run.py: past the subprocess's own, which ends it first.
LONG = pytest.mark.timeout(TIMEOUT + 60)
sys.path.insert(0, HERE)
import run  # noqa: E402  (needs HERE on sys.path)


def _run(*arguments):
    process = subprocess.run([UPSTREAM, RUN, "--upstream", UPSTREAM] + list(arguments),
                             capture_output=True, text=True, timeout=TIMEOUT)
    return process.returncode, process.stdout + process.stderr


@LONG
def test_golden_cases():
    if not os.path.exists(SHIM):
        pytest.skip("shim interpreter %s not built" % SHIM)
    sample = ["--sample"] if os.environ.get("GOLDEN_SAMPLE") == "1" else []
    returncode, output = _run("--shim", SHIM, *sample)
    assert returncode == 0, output[-20000:]


@LONG
@pytest.mark.upstream_only
def test_golden_selftest():
    # On the stratified sample, which holds every operator, aliasing family and dtype stratum
    # (test_sample_covers_every_stratum): a fifth of the catalog's cases, and of the time
    # (docs/measurements.md). `run.py --selftest` checks the whole catalog.
    returncode, output = _run("--selftest", "--sample")
    assert returncode == 0, output[-20000:]


@pytest.mark.upstream_only
def test_sample_covers_every_stratum():
    names, _ = run.list_cases(UPSTREAM, None)
    drawn = run.sample(names)
    assert len(drawn) < len(names) / 4
    # Every operation, aliasing overload and family, in catalog order.
    assert {key for name in names for key in run.strata(name)} == {key for name in drawn for key in run.strata(name)}
    assert drawn == [name for name in names if name in set(drawn)]
    # What judging a drawn case reads: its @temporary twin both ways, its float32 sibling.
    listed, chosen = set(names), set(drawn)
    for name in drawn:
        base = name.removesuffix(run.TEMPORARY)
        assert base in chosen and (base + run.TEMPORARY not in listed or base + run.TEMPORARY in chosen), name
        parts = base.split("/")
        sibling = "/".join([parts[0], "float32"] + parts[2:])
        assert sibling not in listed or sibling in chosen, name


def test_sample_check_names_a_missed_overload():
    # The float64 case shares its float32 sibling's stratum, so the sample leaves it out.
    names = ["op/float32/x", "op/float64/x"]
    upstream = {"op/float32/x": {"value": 1, "ops": ["aten::op"]},
                "op/float64/x": {"value": 1, "ops": ["aten::op", "aten::only_in_float64"]}}
    out = io.StringIO()
    assert run.sample(names) == ["op/float32/x"]
    assert run.check_sample(names, names, upstream, out) == 1
    assert "FAIL --sample: no case of the sample dispatches aten::only_in_float64" in out.getvalue()
    upstream["op/float32/x"]["ops"].append("aten::only_in_float64")
    assert run.check_sample(names, names, upstream, io.StringIO()) == 0


def test_no_derivative_refusals_are_listed_and_live():
    up = {"name": "op/float32/x@grad", "value": {"kind": "float", "value": 1.0}}
    refusal = {"name": "op/float32/x@grad", "exc": "NotImplementedError", "phase": "call",
               "msg": "torchnative has no derivative for aten::op.Tensor yet"}
    names = ["op/float32/x@grad"]
    judge = lambda listed, used=None: run.judge_all(names, {names[0]: up}, {}, {names[0]: refusal}, set(),  # noqa: E731
                                                    None, listed, used)[0][1]
    used = set()
    assert judge({"aten::op"}, used) == run.compare.NO_DERIVATIVE and used == {"aten::op"}
    assert judge({"aten::op.Tensor"}) == run.compare.NO_DERIVATIVE
    assert judge({"aten::other"}) == run.compare.FAIL
    # A forward case refused with the same words is not a gradient twin: it fails.
    forward = "op/float32/x"
    assert run.judge_all([forward], {forward: up}, {}, {forward: dict(refusal, name=forward)}, set(), None,
                         {"aten::op"})[0][1] == run.compare.FAIL
    out = io.StringIO()
    assert run.stale_no_derivative({"aten::op", "aten::gone"}, {"aten::op"}, out) == 1
    assert "no gradient case was refused for aten::gone" in out.getvalue()


def test_upstream_passes_are_kept_for_the_next_run(tmp_path, monkeypatch):
    calls, asked = [], []

    def worker(python, names, flags=(), stall_timeout=None):
        calls.append(list(flags))
        asked.append(list(names))
        return {name: {"name": name, "value": {"kind": "int", "value": 1}} for name in names}

    monkeypatch.setattr(run, "run_worker", worker)
    monkeypatch.setenv("GOLDEN_CACHE", str(tmp_path))
    names = ["add/float32/3x4/fn"]
    first = run.upstream_pass(UPSTREAM, names, ["--reference"], 10)
    assert run.upstream_pass(UPSTREAM, names, ["--reference"], 10) == first and len(calls) == 1
    run.upstream_pass(UPSTREAM, names, ["--record-ops"], 10)  # other flags: another pass
    assert len(calls) == 2
    # A pass with a crash is not kept.
    monkeypatch.setattr(run, "run_worker", lambda python, names, flags=(), stall_timeout=None:
                        calls.append(flags) or {names[0]: {"name": names[0], "crash": "killed"}})
    run.upstream_pass(UPSTREAM, ["sub/float32/3x4/fn"], [], 10)
    run.upstream_pass(UPSTREAM, ["sub/float32/3x4/fn"], [], 10)
    assert len(calls) == 4
    # Case by case: a pass over kept and new cases runs only the new ones.
    monkeypatch.setattr(run, "run_worker", worker)
    both = run.upstream_pass(UPSTREAM, names + ["mul/float32/3x4/fn"], ["--reference"], 10)
    assert calls[-1] == ["--reference"] and asked[-1] == ["mul/float32/3x4/fn"]
    assert list(both) == names + ["mul/float32/3x4/fn"]
