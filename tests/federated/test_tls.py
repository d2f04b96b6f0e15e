"""The coordinator's gRPC port over TLS, with certificates made by the openssl CLI at test time: a
CA, a server certificate it signs for 127.0.0.1 and localhost, and an unrelated CA.

A FedAvg round completes over TLS (two Python devices and a torchnative-device given the CA, the
administrator's CLI too) with the bits of an independently computed weighted average. A client
given the unrelated CA is refused with the certificate verification failure in its error, and
plaintext clients are refused; none of them registers anything, the daemon stays up, and a client
given the right CA is served afterwards. (TLS covers the gRPC channel; the data plane of a round,
hub and store, is a separate plaintext TCP connection.)
"""
import json
import subprocess

import numpy as np
import pytest

from federation import (CLOSED_ROUND_STATES, PYTHON, admin_json, fedavg, http_get, log_events, read_safetensors, start_coordinator, tool,
                        wait_for, write_safetensors)

OPENSSL = "/usr/bin/openssl"

CA_CONFIG = """[req]
distinguished_name = dn
prompt = no
x509_extensions = v3_ca
[dn]
CN = {name}
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
"""
SERVER_CONFIG = """[req]
distinguished_name = dn
prompt = no
[dn]
CN = 127.0.0.1
[v3_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
# What gRPC says of a handshake that failed, and OpenSSL 3 (its TLS library here) of a chain it
# cannot verify: "... last error: UNKNOWN: ipv4:127.0.0.1:PORT: Ssl handshake failed: SSL_ERROR_SSL:
# error:0A000086:SSL routines::certificate verify failed".
HANDSHAKE_FAILED = "Ssl handshake failed: SSL_ERROR_SSL: "
VERIFY_FAILED = "certificate verify failed"


def openssl(*arguments, cwd):
    result = subprocess.run([OPENSSL, *arguments], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"openssl {' '.join(arguments)}: {result.stderr}"
    return result.stdout


def make_ca(directory, stem, name):
    (directory / f"{stem}.cnf").write_text(CA_CONFIG.format(name=name))
    openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{stem}.key", "-out", f"{stem}.pem", "-days", "2", "-config", f"{stem}.cnf", cwd=directory)
    return directory / f"{stem}.pem"


@pytest.fixture
def pki(tmp_path):
    """The CA, the server's certificate chain and key, and an unrelated CA, as PEM files."""
    directory = tmp_path / "pki"
    directory.mkdir()
    ca = make_ca(directory, "ca", "torchnative test CA")
    other_ca = make_ca(directory, "other-ca", "unrelated test CA")
    (directory / "server.cnf").write_text(SERVER_CONFIG)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-config", "server.cnf", cwd=directory)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "2",
            "-days", "2", "-extfile", "server.cnf", "-extensions", "v3_server", "-out", "server.pem", cwd=directory)
    # The test's own premise: the server's certificate verifies under the CA and not the other one.
    openssl("verify", "-CAfile", "ca.pem", "server.pem", cwd=directory)
    refused = subprocess.run([OPENSSL, "verify", "-CAfile", "other-ca.pem", "server.pem"], cwd=directory,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0, refused.stdout
    text = openssl("x509", "-in", "server.pem", "-noout", "-ext", "subjectAltName", cwd=directory)
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text, text
    return {"ca": ca, "other_ca": other_ca, "certificate": directory / "server.pem", "key": directory / "server.key"}


@pytest.fixture
def tls_coordinator(tmp_path, pki, request):
    """A coordinator serving gRPC over TLS only; its admin command line trusts the CA. Its data
    plane is on unless the test's parameter (indirect) is False."""
    tls = {"certificate_chain": str(pki["certificate"]), "private_key": str(pki["key"])}
    for coordinator in start_coordinator(tmp_path, tls=tls, data_plane_enabled=getattr(request, "param", True)):
        plaintext_admin = list(coordinator["admin"])
        coordinator["admin"] = plaintext_admin + ["--tls-ca", str(pki["ca"])]
        coordinator["plaintext_admin"] = plaintext_admin
        yield coordinator


def listening_entry(coordinator):
    listening = log_events(coordinator["log"], "listening")
    assert listening, "no listening line in the coordinator's log"
    return listening[0]


ROUND_DEVICE_SCRIPT = r'''
import json, sys
from torchnative.device import Device
server, key_file, tls_ca, shift, examples = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
device = Device(server, key_file, tls_ca=tls_ca, check_in_wait=2.0)
device.device_id  # registers now: a handshake that fails raises here, where run() would retry it
seen = {}
def train(state, config):
    trained = {name: (t + shift if t.is_floating_point() else t.clone()) for name, t in state.items()}
    seen.update({name: t.tolist() for name, t in trained.items()})
    return trained, examples
reports = device.run(train, rounds=1)
print(json.dumps({"device_id": device.device_id, "contributed": reports[0].contributed,
                  "error": reports[0].error, "round_id": reports[0].round_id, "trained": seen}))
'''


# With the data plane off, the devices (which asked for it) take part over gRPC alone, so TLS
# covers every byte of the round.
@pytest.mark.parametrize("tls_coordinator", [True, False], indirect=True, ids=["data_plane", "no_data_plane"])
def test_a_fedavg_round_over_tls_has_the_bits_of_an_independent_average(tls_coordinator, tmp_path, pki):
    coordinator = tls_coordinator
    assert listening_entry(coordinator)["tls"] is True
    initial = {"weight": np.random.default_rng(7).standard_normal((2, 3)).astype(np.float32),
               "steps": np.array([7], dtype=np.int64)}
    write_safetensors(tmp_path / "initial.safetensors", initial)
    task = admin_json(coordinator, "create-task", "--strategy", "fedavg", "--rounds", "1",
                      "--devices-per-round", "3", "--min-updates", "3", "--min-available", "3",
                      "--round-timeout-ms", "20000", "--model", str(tmp_path / "initial.safetensors"))["task_id"]

    port = coordinator["grpc_port"]
    plans = [(0.5, 10), (-0.25, 30)]  # shift, examples
    python_devices = [subprocess.Popen([PYTHON, "-c", ROUND_DEVICE_SCRIPT, f"127.0.0.1:{port}",
                                        str(tmp_path / f"python{i}.key"), str(pki["ca"]), str(shift), str(examples)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                      for i, (shift, examples) in enumerate(plans)]
    # By name, so that the certificate's DNS:localhost is the one checked.
    native = subprocess.Popen([tool("torchnative-device"), "--server", f"localhost:{port}", "--tls-ca", str(pki["ca"]),
                               "--key-dir", str(tmp_path / "keys"), "--devices", "1", "--rounds", "1",
                               "--examples", "20", "--report-dir", str(tmp_path / "reports"),
                               "--check-in-wait-ms", "2000"],
                              stderr=subprocess.PIPE, text=True)
    trained = {}  # device id -> (num_examples, {tensor: values})
    try:
        for process, (_, examples) in zip(python_devices, plans):
            out, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
            output = json.loads(out)
            assert output["contributed"] and output["error"] == "" and output["round_id"] == 1, output
            trained[output["device_id"]] = (examples, output["trained"])
        _, native_log = native.communicate(timeout=60)
        assert native.returncode == 0, native_log
    finally:
        for process in python_devices + [native]:
            if process.poll() is None:
                process.kill()
                process.wait()
    reports = list((tmp_path / "reports").glob("*-round1.json"))
    assert len(reports) == 1, reports
    report = json.loads(reports[0].read_text())
    assert report["contributed"] and report["error"] == "" and report["task_id"] == task, report
    trained[report["device_id"]] = (report["num_examples"],
                                    {name: tensor["values"] for name, tensor in report["tensors"].items()})

    rounds = wait_for("the round to close", lambda: [r for r in admin_json(coordinator, "rounds", task)
                                                     if r["state"] in CLOSED_ROUND_STATES] or None, 30)
    entry = rounds[0]
    assert entry["state"] == "ROUND_STATE_COMPLETED", entry
    assert entry["contributors"] == sorted(trained) and entry["missing"] == [], entry
    registered = sorted((device["device_id"], device["platform"]) for device in admin_json(coordinator, "devices"))
    assert [device for device, _ in registered] == sorted(trained)
    assert sorted(platform for _, platform in registered) == ["python", "python", "synthetic"], registered

    # FedAvg: float64 products and sums in device-id order, rounded once to float32.
    expected = fedavg((trained[device][0], np.reshape(trained[device][1]["weight"], (2, 3)))
                      for device in sorted(trained))
    admin_json(coordinator, "fetch-model", entry["output_model_version"], "--out", str(tmp_path / "out.safetensors"))
    model = read_safetensors(tmp_path / "out.safetensors")
    assert np.array_equal(model["weight"].view(np.uint32), expected.view(np.uint32)), (model["weight"], expected)
    assert not np.array_equal(model["weight"], initial["weight"])
    assert model["steps"].tolist() == [7]
    [data_plane] = log_events(coordinator["log"], "round_data_plane")
    data_plane_on = json.loads((tmp_path / "coordinator.json").read_text())["data_plane"]["enabled"]
    assert data_plane["grpc_devices"] == (0 if data_plane_on else 3), data_plane
    assert ("join_seconds" in data_plane) == data_plane_on, data_plane


REGISTER_SCRIPT = r'''
import json, sys
from torchnative.device import Device
server, key_file, tls_ca = sys.argv[1], sys.argv[2], sys.argv[3] or None
device = Device(server, key_file, tls_ca=tls_ca, check_in_wait=2.0)
try:
    if sys.argv[4] == "run":  # the device loop, which retries what waiting can fix
        device.run(lambda state, config: (state, 1), rounds=1)
    print(json.dumps({"device_id": device.device_id}))
except RuntimeError as error:
    print(json.dumps({"error": str(error)}))
    sys.exit(3)
'''


def test_a_wrong_ca_and_plaintext_are_refused_and_the_daemon_goes_on(tls_coordinator, tmp_path, pki):
    coordinator = tls_coordinator
    server = f"127.0.0.1:{coordinator['grpc_port']}"

    def python_device(key, tls_ca, call="register"):
        result = subprocess.run([PYTHON, "-c", REGISTER_SCRIPT, server, str(tmp_path / key), tls_ca, call],
                                capture_output=True, text=True, timeout=60)
        return result.returncode, json.loads(result.stdout), result.stderr

    # A Python device that trusts only the unrelated CA: Register fails on the handshake, by name,
    # and the device loop raises it rather than retrying what no wait can fix.
    for call in ("register", "run"):
        code, output, err = python_device("wrong-ca.key", str(pki["other_ca"]), call)
        assert code == 3, (call, output, err)
        assert output["error"].startswith("Register failed: 14 "), (call, output)  # UNAVAILABLE
        assert HANDSHAKE_FAILED in output["error"] and VERIFY_FAILED in output["error"], (call, output)

    # So does torchnative-device, and the administrator's CLI.
    native = subprocess.run([tool("torchnative-device"), "--server", server, "--tls-ca", str(pki["other_ca"]),
                             "--key-dir", str(tmp_path / "keys"), "--devices", "1", "--rounds", "1"],
                            capture_output=True, text=True, timeout=60)
    assert native.returncode == 1, native.stderr
    fatal = [json.loads(line) for line in native.stderr.splitlines() if line.startswith('{"device"')]
    assert len(fatal) == 1 and fatal[0]["fatal"].startswith("Register failed: 14 "), native.stderr
    assert HANDSHAKE_FAILED in fatal[0]["fatal"] and VERIFY_FAILED in fatal[0]["fatal"], native.stderr
    wrong_admin = subprocess.run(coordinator["plaintext_admin"] + ["--tls-ca", str(pki["other_ca"]), "devices"],
                                 capture_output=True, text=True, timeout=60)
    assert wrong_admin.returncode == 1, wrong_admin.stderr
    assert "ListDevices failed with status 14: " in wrong_admin.stderr, wrong_admin.stderr
    assert HANDSHAKE_FAILED in wrong_admin.stderr and VERIFY_FAILED in wrong_admin.stderr, wrong_admin.stderr

    # Plaintext clients against the TLS port: the server takes their HTTP/2 preface for a TLS
    # record of the wrong version and closes the connection, which is all gRPC tells the client.
    closed = f"last error: UNAVAILABLE: ipv4:{server}: Socket closed"
    code, output, err = python_device("plaintext.key", "")
    assert code == 3, (output, err)
    assert output["error"].startswith("Register failed: 14 ") and closed in output["error"], output
    assert "this device speaks plaintext: a coordinator serving TLS closes" in output["error"], output
    plaintext_admin = subprocess.run(coordinator["plaintext_admin"] + ["devices"],
                                     capture_output=True, text=True, timeout=60)
    assert plaintext_admin.returncode == 1, plaintext_admin.stderr
    expected = f"ListDevices failed with status 14: failed to connect to all addresses; {closed}"
    assert expected in plaintext_admin.stderr, plaintext_admin.stderr

    # The daemon is still up, nothing was registered, and a client given the CA is served.
    assert coordinator["process"].poll() is None, coordinator["log"].read_text()
    # The two plaintext clients failed at least one handshake each (a channel may try again
    # before it is closed); the coordinator's log says why, in JSON like all its lines, and
    # /metrics counts them. The four wrong-CA clients refused the certificate after the server
    # had finished its side of the TLS 1.3 handshake: to the server they are connections that
    # closed, not failed handshakes, and only the clients can say why.
    failed = log_events(coordinator["log"], "tls_handshake_failed")
    assert len(failed) >= 2, coordinator["log"].read_text()
    assert all("wrong version number" in entry["error"] for entry in failed), failed
    _, metrics = http_get(coordinator, "/metrics")
    assert f'torchnative_requests_refused_total{{reason="tls_handshake_failed"}} {len(failed)}\n' in metrics, metrics
    assert http_get(coordinator, "/healthz") == (200, "ok\n")
    assert admin_json(coordinator, "devices") == []
    code, output, err = python_device("right-ca.key", str(pki["ca"]))
    assert code == 0, (output, err)
    assert [device["device_id"] for device in admin_json(coordinator, "devices")] == [output["device_id"]]
