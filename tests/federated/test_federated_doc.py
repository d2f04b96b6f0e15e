"""docs/federated.md against the code: its configuration table names exactly the keys the
coordinator's parser accepts (the key sets it passes to refuse_unknown_keys in
server/coordinator/src/config.cpp, nested ones as `section.key`), and its admin table names every
command `torchnative-admin --help` lists, and its metrics table names exactly the series a running
coordinator's /metrics declares (with their types) and every refusal reason the coordinator's sources
count. Reads files, runs one --help and one coordinator; builds nothing.
"""
import re
import subprocess
from pathlib import Path

from federation import http_get, tool

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "federated.md"
PARSER = ROOT / "server" / "coordinator" / "src" / "config.cpp"


def parser_keys():
    """Every key refuse_unknown_keys accepts, with its prefix ("" or "data_plane." ...), which is
    a string literal or a local `const std::string NAME = "...";` defined before the call."""
    source = PARSER.read_text()
    keys = set()
    calls = list(re.finditer(r"refuse_unknown_keys\(\s*\w+\s*,\s*(\"[^\"]*\"|\w+)\s*,\s*\{([^}]*)\}", source))
    assert len(calls) >= 4, f"refuse_unknown_keys calls not found in {PARSER}"
    for call in calls:
        where = call.group(1)
        if where.startswith('"'):
            prefix = where[1:-1]
        else:
            definitions = re.findall(r"std::string\s+" + where + r'\s*=\s*"([^"]*)"', source[:call.start()])
            assert definitions, f"the prefix {where} of {call.group(0)!r} is not defined before it"
            prefix = definitions[-1]
        names = re.findall(r'"([^"]+)"', call.group(2))
        assert names, call.group(0)
        keys.update(prefix + name for name in names)
    return keys


def section(title):
    text = DOC.read_text()
    match = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no '## {title}' section in {DOC}"
    return match.group(1)


def first_column(body):
    """The backquoted first cell of each table row."""
    return {match.group(1) for match in re.finditer(r"^\| `([^`]+)` \|", body, re.M)}


def test_the_config_table_names_every_key_the_parser_accepts():
    accepted = parser_keys()
    assert {"listen", "state_directory", "data_plane.host", "transfer_limits.max_chunk_bytes"} <= accepted, accepted
    documented = first_column(section("Configuration file"))
    assert not accepted - documented, f"keys the parser accepts missing from the doc: {sorted(accepted - documented)}"
    assert not documented - accepted, f"keys in the doc the parser refuses: {sorted(documented - accepted)}"


def test_the_admin_table_names_every_command_of_the_help():
    usage = subprocess.run([tool("torchnative-admin"), "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0, usage.stderr
    listing = usage.stdout.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    commands = set(re.findall(r"^  ([a-z][a-z-]*)  ", listing, re.M))
    assert {"create-task", "fetch-model", "events"} <= commands, listing
    documented = first_column(section("Admin commands"))
    assert not commands - documented, f"admin commands missing from the doc: {sorted(commands - documented)}"
    assert not documented - commands, f"commands in the doc the admin does not list: {sorted(documented - commands)}"


def test_the_metrics_table_names_every_series_the_coordinator_exports_and_every_refusal_reason(coordinator):
    status, metrics = http_get(coordinator, "/metrics")
    assert status == 200
    exported = dict(re.findall(r"^# TYPE (\S+) (\S+)$", metrics, re.M))
    assert "torchnative_rounds_total" in exported, metrics
    body = section("Health and metrics")
    documented = {match.group(1): match.group(2)
                  for match in re.finditer(r"^\| `([a-z_]+)[^`]*` \| (\w+) \|", body, re.M)}
    assert documented == exported, (documented, exported)

    sources = "".join(path.read_text() for path in sorted((ROOT / "server" / "coordinator" / "src").glob("*.cpp")))
    counted = set(re.findall(r'\b(?:refuse|count_refusal)\("([a-z_]+)"', sources))
    assert {"bad_signature", "contribution_refused", "tls_handshake_failed"} <= counted, counted
    paragraph = body.split("The refusal reasons:", 1)[1].split("Tests that read", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"request_timestamp_window_ms"}
    assert listed == counted, (sorted(listed - counted), sorted(counted - listed))
