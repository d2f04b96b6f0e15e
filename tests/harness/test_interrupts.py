"""A Python process a test starts ends with KeyboardInterrupt at SIGINT, as from a terminal, even
in a run started with SIGINT ignored (tests/conftest.py)."""
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
# What a non-interactive shell does to a command it starts in the background: SIGINT ignored,
# then exec (here of the rest of the command line).
IGNORING_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable] + sys.argv[1:])")


def test_sigint_ends_a_python_process_with_keyboard_interrupt():
    child = subprocess.Popen([sys.executable, "-c", "import time; print('waiting', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "waiting\n"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        err = "still running 10 s after SIGINT"
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, (child.returncode, err)


def test_a_run_started_ignoring_sigint_gives_its_processes_sigints_default():
    test = f"{HERE}::test_sigint_ends_a_python_process_with_keyboard_interrupt"
    result = subprocess.run([sys.executable, "-c", IGNORING_SIGINT, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             test], cwd=HERE.parents[2], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
