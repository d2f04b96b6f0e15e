"""What every suite under tests/ shares: the per-test bounds (bounded.py), and SIGINT as from a
terminal in every process a test starts."""
import signal

import bounded
from bounded import (pytest_addoption, pytest_runtest_call, pytest_runtest_protocol,  # noqa: F401
                     pytest_runtest_teardown, pytest_unconfigure)


def pytest_configure(config):
    # A run started in the background by a non-interactive shell (`make test &` in a script, or
    # `bash -c '... &'`) starts with SIGINT ignored, and fork and exec keep an ignored signal
    # ignored; a Python process that starts so never raises KeyboardInterrupt, and the tests'
    # Python devices then outlive the Ctrl-C they are sent. exec resets a handled signal to its
    # default action, so with a handler here the processes tests start get SIGINT's default.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    bounded.pytest_configure(config)
