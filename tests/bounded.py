"""Every test is bounded: what pytest-timeout (pytest.ini) leaves open, closed here.

tests/conftest.py loads these hooks into every suite; tests/harness/test_timeouts.py loads them
(-p bounded) into a pytest run of a generated file outside this tree.

pytest.ini gives every test a timeout, longer where a test is marked, with pytest-timeout's
signal method: at the timeout SIGALRM prints the stacks of the other threads and fails the
test with the main thread's traceback, and the run goes on to the next test (the thread
method ends the whole run with os._exit). Three gaps remain, closed here:

- The SIGALRM handler runs only when the main thread returns to the interpreter; one stuck
  in C code (a blocking call into our _C) never does. faulthandler's own thread, armed for
  the timeout plus the timeout_grace ini option (30 s), then prints every thread's stack and
  ends the run: a loud, bounded failure rather than the run going on, for the case that
  cannot be interrupted (the test's processes then outlive it: nothing runs after exit).
- A test's own `finally` (or subprocess.run) kills the processes it started, but not their
  children (a golden worker under run.py, ranks under torch.multiprocessing.spawn), which
  would be orphaned and live on. pytest is made their subreaper, so orphans are reparented
  to it, and after each test's teardown every process that appeared below pytest while the
  test's body ran is killed and reaped.
- A failure stops pytest-timeout's timer, so a teardown hanging after it would be unbounded:
  the timer starts again for the teardown.
"""
import ctypes
import faulthandler
import os
import signal
import time

import pytest
import pytest_timeout

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
# The terminal's stderr: while a test runs, fd 2 is pytest's capture file, lost at exit.
_STDERR = pytest.StashKey()
# The processes below pytest when the test's body started.
_BEFORE = pytest.StashKey()


def pytest_addoption(parser):
    parser.addini("timeout_grace", "seconds past a test's timeout before faulthandler, giving up on the "
                  "SIGALRM handler, prints every thread's stack and ends the run (tests/bounded.py)", default="30")


def pytest_configure(config):
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    config.stash[_STDERR] = open(os.dup(2), "w")


def pytest_unconfigure(config):
    config.stash[_STDERR].close()


def _arm(item):
    """Arms faulthandler for the item's timeout (pytest-timeout's own reading of it: marker,
    command line, ini) plus the grace; returns pytest-timeout's settings."""
    settings = pytest_timeout._get_item_settings(item)
    if settings.timeout:
        faulthandler.dump_traceback_later(settings.timeout + float(item.config.getini("timeout_grace")),
                                          exit=True, file=item.config.stash[_STDERR])
    return settings


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _arm(item)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _processes():
    """{pid: (parent pid, start time)} of every process now (start time tells a reused pid apart)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    # After the command name (in parentheses, which may hold anything): state, ppid, ...
                    fields = stat.read().rpartition(")")[2].split()
            except OSError:  # ended meanwhile
                continue
            table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def descendants():
    """{(pid, start time)} of the processes below this one (zombies included)."""
    table = _processes()
    below, frontier = set(), [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent:
                below.add((pid, start))
                frontier.append(pid)
    return below


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    # Processes of module- and session-scoped fixtures outlive a test; only those started by
    # the test's body are its own.
    item.stash[_BEFORE] = descendants()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # A failure cancels pytest-timeout's timer and faulthandler's (their pytest_exception_interact
    # hooks), which would leave the teardown unbounded: both start again for it.
    settings = _arm(item)
    # (With func_only, pytest-timeout times the test's body alone, and would not stop this timer.)
    if settings.timeout and not settings.func_only:
        item.config.pluginmanager.hook.pytest_timeout_set_timer(item=item, settings=settings)
    yield
    before = item.stash.get(_BEFORE, None)
    if before is not None:  # None: the test failed in its set-up, its body started nothing
        kill_new(before)


def kill_new(before):
    """Kills and reaps every process below this one that is not in ``before``. Orphans are
    reparented here (the subreaper) only once their parent has exited, so this goes on until
    none is left."""
    for _ in range(100):
        new = descendants() - before
        if not new:
            return
        for pid, _ in new:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid, _ in new:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # not (yet) a child of this process
                pass
        time.sleep(0.01)
    raise RuntimeError("processes started by the test outlived 100 rounds of SIGKILL: %s" % sorted(new))
