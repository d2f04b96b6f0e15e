"""pytest entry points: the golden comparison and its self-test, each run as a subprocess.

run.py is always started with the upstream interpreter (it needs numpy for the
self-test, and pytest itself may be running inside the shim's venv).
GOLDEN_SHIM / GOLDEN_UPSTREAM override the interpreters.
"""

import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run.py")
REPO = os.path.dirname(os.path.dirname(HERE))
SHIM = os.environ.get("GOLDEN_SHIM", os.path.join(REPO, ".venv", "bin", "python"))
UPSTREAM = os.environ.get("GOLDEN_UPSTREAM", "/usr/bin/python3")
TIMEOUT = 900  # seconds; a normal run takes 2 to 5 minutes
# pytest's bound for a test that runs run.py: past the subprocess's own, which ends it first.
LONG = pytest.mark.timeout(TIMEOUT + 60)


def _run(*arguments):
    process = subprocess.run([UPSTREAM, RUN, "--upstream", UPSTREAM] + list(arguments),
                             capture_output=True, text=True, timeout=TIMEOUT)
    return process.returncode, process.stdout + process.stderr


@LONG
def test_golden_cases():
    if not os.path.exists(SHIM):
        pytest.skip("shim interpreter %s not built" % SHIM)
    returncode, output = _run("--shim", SHIM)
    assert returncode == 0, output[-20000:]


@LONG
def test_golden_selftest():
    returncode, output = _run("--selftest")
    assert returncode == 0, output[-20000:]
