import pytest

from federation import start_coordinator


@pytest.fixture
def coordinator(tmp_path):
    yield from start_coordinator(tmp_path)
