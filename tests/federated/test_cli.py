"""Every executable of the project answers --help (and -h) with its usage on stdout and exit
status 0, and a flag it does not know with the usage on stderr and exit status 2."""
import subprocess

import pytest

from federation import tool

TOOLS = ["torchnative-coordinator", "torchnative-admin", "torchnative-device"]


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", TOOLS)
def test_help_prints_usage_and_exits_0(name, flag):
    process = subprocess.run([tool(name), flag], capture_output=True, text=True, timeout=30)
    assert (process.returncode, process.stderr) == (0, ""), process.stderr
    assert process.stdout.startswith("usage: " + name + " "), process.stdout


@pytest.mark.parametrize("name", TOOLS)
def test_unknown_flag_prints_usage_and_exits_2(name):
    process = subprocess.run([tool(name), "--no-such-flag", "1"], capture_output=True, text=True, timeout=30)
    assert process.returncode == 2, (process.returncode, process.stderr)
    assert "--no-such-flag" in process.stderr and "usage: " + name in process.stderr, process.stderr
    assert process.stdout == ""
