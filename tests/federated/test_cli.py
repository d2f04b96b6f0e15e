"""Every executable of the project answers --help (and -h) with its usage and every flag on stdout
and exit status 0, --version with its version, a flag it does not know or a value it cannot take
with the flag's name and the usage on stderr and exit status 2, and a file it cannot read with the
operating system's reason."""
import subprocess

import pytest

from federation import tool

TOOLS = ["torchnative-coordinator", "torchnative-admin", "torchnative-device"]
FLAGS = {
    "torchnative-coordinator": ["--config", "--listen", "--state-dir", "--admin-key", "--tls-cert", "--tls-key",
                                "--data-plane-host", "--join-window-ms", "--timestamp-window-ms",
                                "--check-in-wait-ms", "--max-message-bytes", "--http-listen"],
    "torchnative-admin": ["--server", "--key", "--tls-ca", "public-key", "create-task", "stop-task", "devices",
                          "tasks", "status", "rounds", "fetch-model", "events"],
    "torchnative-device": ["--server", "--key-dir", "--devices", "--rounds", "--examples", "--seed", "--step",
                           "--report-dir", "--tls-ca", "--check-in-wait-ms", "--training-slots",
                           "--max-model-bytes", "--round-transport", "--register-timeout-ms", "--when-no-task",
                           "--min-noise-multiplier", "--max-noise-devices"],
}
ADMIN_COMMAND_FLAGS = {
    "create-task": ["--strategy", "--params", "--rounds", "--devices-per-round", "--min-updates",
                    "--round-timeout-ms", "--min-available", "--deadline-unix-ms", "--label", "--min-memory-bytes",
                    "--model", "--stored-model", "--digest"],
    "stop-task": ["TASK", "--reason"],
    "rounds": ["TASK"],
    "status": ["TASK"],
    "fetch-model": ["VERSION", "--out", "--digest"],
    "events": ["--task", "--count", "--since", "--follow"],
}


def run(*words):
    return subprocess.run(list(words), capture_output=True, text=True, timeout=30)


def listed(help_text, flag):
    return any(line.lstrip().startswith(flag + " ") or line.strip() == flag for line in help_text.splitlines())


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", TOOLS)
def test_help_prints_usage_and_every_flag_and_exits_0(name, flag):
    process = run(tool(name), flag)
    assert (process.returncode, process.stderr) == (0, ""), process.stderr
    assert process.stdout.startswith("usage: " + name + " "), process.stdout
    for listed_flag in FLAGS[name] + ["-h, --help", "--version"]:
        assert listed(process.stdout, listed_flag), (listed_flag, process.stdout)
    assert "(default: " in process.stdout or name == "torchnative-admin", process.stdout


@pytest.mark.parametrize("command", sorted(ADMIN_COMMAND_FLAGS))
def test_admin_commands_have_help_of_their_own(command):
    by_word = run(tool("torchnative-admin"), "help", command)
    by_flag = run(tool("torchnative-admin"), command, "--help")
    assert (by_word.returncode, by_word.stderr) == (0, ""), by_word.stderr
    assert by_flag.returncode == 0 and by_flag.stdout == by_word.stdout, by_flag
    assert by_word.stdout.startswith("usage: torchnative-admin --key FILE [options] " + command), by_word.stdout
    for flag in ADMIN_COMMAND_FLAGS[command]:
        assert listed(by_word.stdout, flag), (flag, by_word.stdout)


@pytest.mark.parametrize("name", TOOLS)
def test_version_prints_the_name_and_version_and_exits_0(name):
    process = run(tool(name), "--version")
    assert (process.returncode, process.stderr) == (0, ""), process.stderr
    words = process.stdout.split()
    assert len(words) == 2 and words[0] == name and words[1][0].isdigit(), process.stdout


@pytest.mark.parametrize("name", TOOLS)
def test_unknown_flag_prints_usage_and_exits_2(name):
    process = run(tool(name), "--no-such-flag", "1")
    assert process.returncode == 2, (process.returncode, process.stderr)
    assert process.stderr.startswith(name + ": unknown flag --no-such-flag\n"), process.stderr
    assert "usage: " + name in process.stderr, process.stderr
    assert process.stdout == ""


@pytest.mark.parametrize("name, words, message", [
    ("torchnative-device", ["--server", "h:1", "--key-dir", "k", "--devices", "12abc"],
     "--devices: expected an integer, got '12abc'"),
    ("torchnative-device", ["--key-dir", "k"], "--server is required"),
    ("torchnative-device", ["--server", "h:1", "--key-dir", "k", "--round-transport", "tcp"],
     "--round-transport: expected data-plane or grpc, got 'tcp'"),
    ("torchnative-device", ["--server", "h:1", "--key-dir", "k", "--min-noise-multiplier", "1"],
     "--min-noise-multiplier and --max-noise-devices make the noise floor together: give both"),
    ("torchnative-device", ["--server", "h:1", "--key-dir", "k", "--max-noise-devices", "3"],
     "--min-noise-multiplier and --max-noise-devices make the noise floor together: give both"),
    ("torchnative-device", ["--server", "h:1", "--key-dir", "k", "--min-noise-multiplier", "-1",
                            "--max-noise-devices", "3"], "--min-noise-multiplier: expected a positive number"),
    ("torchnative-admin", ["--key", "k", "create-task", "--rounds", "-1"],
     "--rounds: expected a non-negative integer, got '-1'"),
    ("torchnative-admin", ["--key", "k", "stop-task"], "stop-task needs TASK"),
    ("torchnative-admin", ["--key"], "missing value after --key"),
    ("torchnative-admin", ["--key", "k", "events", "--follow", "t", "--count", "1"],
     "events --follow takes no --task, --since or --count"),
    ("torchnative-coordinator", ["--join-window-ms", "soon"], "--join-window-ms"),
])
def test_a_bad_value_is_named_and_exits_2(name, words, message):
    process = run(tool(name), *words)
    assert process.returncode == 2, (process.returncode, process.stderr)
    assert process.stderr.startswith(name + ": ") and message in process.stderr.splitlines()[0], process.stderr
    assert "usage: " + name in process.stderr, process.stderr


def test_an_unreadable_file_is_named_with_the_operating_systems_reason(tmp_path):
    missing = str(tmp_path / "missing")
    coordinator = run(tool("torchnative-coordinator"), "--config", missing)
    assert coordinator.returncode == 2, coordinator.stderr
    assert f"cannot read the configuration file {missing}: No such file or directory" in coordinator.stderr
    coordinator = run(tool("torchnative-coordinator"), "--config", str(tmp_path))
    assert coordinator.returncode == 2, coordinator.stderr
    assert f"cannot read the configuration file {tmp_path}: Is a directory" in coordinator.stderr

    admin = run(tool("torchnative-admin"), "--server", "127.0.0.1:1", "--key", str(tmp_path / "admin.key"),
                "--tls-ca", missing, "devices")
    assert admin.returncode == 1, admin.stderr
    assert f"cannot read the TLS CA file {missing}: No such file or directory" in admin.stderr, admin.stderr

    device = run(tool("torchnative-device"), "--server", "127.0.0.1:1", "--key-dir", str(tmp_path / "keys"),
                 "--tls-ca", missing)
    assert device.returncode == 1, device.stderr
    assert f"cannot read the TLS root certificates file {missing}: No such file or directory" in device.stderr
