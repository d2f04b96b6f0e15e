"""The per-test bounds themselves (pytest.ini, tests/bounded.py), on generated tests run by a
pytest of their own with the repository's configuration and a timeout of a few seconds."""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
TIMEOUT = 3  # seconds, the generated tests' timeout
GRACE = 10  # seconds, their timeout_grace

# A process that starts a sleeper, prints its pid and exits: the sleeper is orphaned (its
# output elsewhere: it must not hold the pipe the pid is read from).
ORPHANING = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'], "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")

HANGING = textwrap.dedent(f'''
    import os, subprocess, sys, threading, time

    def test_hangs():
        # A helper thread, a child left running and an orphaned grandchild, all waiting forever.
        threading.Thread(target=time.sleep, args=(3600,), name="helper", daemon=True).start()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        orphan = subprocess.run([sys.executable, "-c", {ORPHANING!r}], capture_output=True, text=True).stdout
        with open(os.environ["PIDS"], "w") as pids:
            pids.write("%d %s" % (child.pid, orphan))
        time.sleep(3600)

    def test_after():
        pass
''')

# A test that fails, then hangs in its fixture's teardown.
FAILING_THEN_STUCK_TEARDOWN = textwrap.dedent('''
    import time
    import pytest

    @pytest.fixture
    def stuck_teardown():
        yield
        time.sleep(3600)

    def test_fails(stuck_teardown):
        assert False

    def test_after():
        pass
''')

# The main thread waits where SIGALRM cannot reach it, as in a blocking call into C code.
STUCK = textwrap.dedent('''
    import signal, time

    def test_stuck():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)

    def test_after():
        pass
''')


def run_pytest(tmp_path, source):
    """Runs the test file `source` with pytest.ini, bounded.py and a timeout of TIMEOUT seconds;
    (the process's result, seconds it took, pids of the processes its tests left running)."""
    test_file = tmp_path / "test_generated.py"
    test_file.write_text(source)
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(TESTS.parent / "pytest.ini"), "--rootdir", str(tmp_path),
         "-p", "bounded", "-p", "no:cacheprovider", "-v", "-rf", "--timeout", str(TIMEOUT),
         "-o", f"timeout_grace={GRACE}", str(test_file)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(TESTS), PIDS=str(pids)))
    elapsed = time.monotonic() - started
    return result, elapsed, [int(pid) for pid in pids.read_text().split()] if pids.exists() else []


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_hanging_test_fails_with_its_stacks_and_the_run_goes_on(tmp_path):
    result, elapsed, pids = run_pytest(tmp_path, HANGING)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    # Ended by its timeout's SIGALRM, not by faulthandler after the grace.
    assert elapsed < TIMEOUT + GRACE and "Timeout (0:" not in output, output
    assert "FAILED test_generated.py::test_hangs - Failed: Timeout >%.1fs" % TIMEOUT in result.stdout, output
    # The main thread's traceback, where it waited; the helper thread's stack.
    assert "time.sleep(3600)" in result.stdout, output
    assert "Stack of helper (" in output and "in _bootstrap" in output, output
    assert "test_generated.py::test_after PASSED" in result.stdout, output
    assert "1 failed, 1 passed" in result.stdout, output
    assert len(pids) == 2, output
    assert not any(map(alive, pids)), "left running: %s\n%s" % (pids, output)


def test_a_teardown_hanging_after_a_failure_is_bounded_too(tmp_path):
    # pytest-timeout stops its timer at the failure; bounded.py starts it again for the teardown.
    result, elapsed, _ = run_pytest(tmp_path, FAILING_THEN_STUCK_TEARDOWN)
    output = result.stdout + result.stderr
    assert elapsed < TIMEOUT + GRACE and "Timeout (0:" not in output, output
    assert "ERROR at teardown of test_fails" in result.stdout and "Failed: Timeout >%.1fs" % TIMEOUT in output, output
    assert "test_generated.py::test_after PASSED" in result.stdout, output
    assert "1 failed, 1 passed, 1 error" in result.stdout, output


def test_a_test_out_of_the_signals_reach_ends_the_run_with_every_stack(tmp_path):
    result, elapsed, _ = run_pytest(tmp_path, STUCK)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert TIMEOUT + GRACE <= elapsed < TIMEOUT + GRACE + 20, output
    # faulthandler's dump, the main thread's stack naming the test.
    assert "Timeout (0:00:%02d)!" % (TIMEOUT + GRACE) in output, output
    assert 'test_generated.py", line 6 in test_stuck' in output, output
    assert "test_after" not in output, output


@pytest.mark.timeout(1)
def test_a_marked_timeout_applies_to_its_test():
    with pytest.raises(pytest.fail.Exception, match="Timeout >1.0s"):
        time.sleep(5)
