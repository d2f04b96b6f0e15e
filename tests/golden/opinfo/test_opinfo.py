"""pytest entry points of the OpInfo peer suite (see README.md here), each as a subprocess.

test_opinfo_samples: the shim against upstream; fails if any case differs or crashes.
It runs only when GOLDEN_OPINFO=1 is set, because the shim does not pass it yet (it
is not part of `make test` until it does); GOLDEN_OPINFO=report runs it without
failing and prints the totals.  GOLDEN_SHIM / GOLDEN_UPSTREAM override the interpreters.

test_opinfo_selftest: upstream against a second upstream process over the first two samples
of every OpInfo and dtype must agree case for case, and faults injected into the records must
be caught. It checks the comparison test_opinfo_samples makes, so it runs when that does
(GOLDEN_OPINFO set): in make test it would take a minute and a half of a worker to check a
comparison make test does not make.
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "suite.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SHIM = os.environ.get("GOLDEN_SHIM", os.path.join(REPO, ".venv", "bin", "python"))
UPSTREAM = os.environ.get("GOLDEN_UPSTREAM", "/usr/bin/python3")
MODE = os.environ.get("GOLDEN_OPINFO", "")
TIMEOUT = 1800  # seconds; a full run takes 3 to 4 minutes on 2 cores
# pytest's bound for a test that runs suite.py: past the subprocess's own, which ends it first.
LONG = pytest.mark.timeout(TIMEOUT + 60)

sys.path.insert(0, HERE)


def _run(*arguments):
    process = subprocess.run([UPSTREAM, SUITE, "--upstream", UPSTREAM] + list(arguments),
                             capture_output=True, text=True, timeout=TIMEOUT)
    return process.returncode, process.stdout + process.stderr


def test_opinfo_refusal_rule():
    import suite
    refused = {"exc": "NotImplementedError", "phase": "call",
               "msg": "torchnative does not implement operator aten::linalg_svd.default yet (schema: ...)"}
    assert suite.refusal_name(refused) == "aten::linalg_svd.default"
    assert suite.refusal_name(dict(refused, msg="torchnative does not implement torch._C._jit_x; upstream ..."))\
        == "torch._C._jit_x"
    assert suite.refusal_name(dict(refused, exc="RuntimeError")) is None
    assert suite.refusal_name(dict(refused, msg="not implemented for 'Float'")) is None
    assert suite.refusal_name(dict(refused, msg="torchnative does not implement linalg.matrix_norm with ord=2"))\
        is None
    assert suite.refusal_name({"exc": "AttributeError", "msg": "module 'torch._C' has no attribute '_x'"}) is None


@LONG
@pytest.mark.upstream_only
@pytest.mark.skipif(MODE not in ("1", "report"), reason="the self-test of test_opinfo_samples' comparison: set "
                    "GOLDEN_OPINFO=1 or GOLDEN_OPINFO=report")
def test_opinfo_selftest():
    # Every OpInfo, its first two samples per dtype: a seventh of the cases (docs/measurements.md);
    # `suite.py --selftest` checks them all.
    returncode, output = _run("--selftest", "--max-per-op", "2")
    assert returncode == 0, output[-20000:]


@LONG
@pytest.mark.skipif(MODE not in ("1", "report"), reason="shim vs upstream OpInfo samples: set GOLDEN_OPINFO=1 "
                    "(fails on any difference) or GOLDEN_OPINFO=report")
def test_opinfo_samples():
    if not os.path.exists(SHIM):
        pytest.skip("shim interpreter %s not built" % SHIM)
    returncode, output = _run("--shim", SHIM, *(["--report-only"] if MODE == "report" else []))
    print(output[-5000:])
    assert returncode == 0, output[-20000:]
