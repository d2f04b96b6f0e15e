"""What every suite under tests/ shares: the per-test bounds (bounded.py)."""
from bounded import (pytest_addoption, pytest_configure, pytest_runtest_call, pytest_runtest_protocol,  # noqa: F401
                     pytest_runtest_teardown, pytest_unconfigure)
