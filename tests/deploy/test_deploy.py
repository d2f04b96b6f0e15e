"""deploy/ checked against the real executables: the systemd units by systemd-analyze verify and
their flags by each binary's --help; the Kubernetes manifests rendered offline by kubectl
kustomize, their configuration run by a real coordinator (TLS from a certificate made here),
whose /healthz and /metrics the probes and annotations must name; the Grafana dashboard's
metric and label names against that coordinator's /metrics; the Dockerfile and compose file
against the configuration they ship. The image build runs only where a Docker daemon answers.
"""
import ipaddress
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "federated"))
from federation import wait_for  # noqa: E402  (the federated suites' one poll-until-true)

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
VENV_BIN = Path(os.environ.get("TORCHNATIVE_BIN", REPO / ".venv" / "bin"))
BUILD_PATHS = {"torchnative-coordinator": "server/coordinator", "torchnative-admin": "server/admin",
               "torchnative-device": "client"}
OPENSSL = "/usr/bin/openssl"


def tool(name):
    """The executable from .venv/bin (make setup) or $TORCHNATIVE_BIN, else the build tree."""
    for path in (VENV_BIN / name, REPO / "build" / BUILD_PATHS[name] / name):
        if path.exists():
            return str(path)
    pytest.fail(f"{name} is missing from {VENV_BIN} and build/: run `make setup`")


def real_flags(name):
    usage = subprocess.run([tool(name), "--help"], capture_output=True, text=True, timeout=10, check=True).stdout
    flags = set(re.findall(r"--[a-z][a-z-]*", usage))
    assert len(flags) > 3, usage
    return flags


def flags_in(arguments):
    return [a for a in arguments if a.startswith("--")]


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def admin_public_key(key_file):
    return subprocess.run([tool("torchnative-admin"), "--key", str(key_file), "public-key"], check=True,
                          capture_output=True, text=True, timeout=10).stdout.strip()


def run_coordinator(directory, config, extra):
    """Starts the coordinator on `config` (a dict written to a file) with flags `extra`; returns
    the process and its "listening" event, or fails with its log."""
    path = directory / "coordinator.json"
    path.write_text(json.dumps(config))
    log = directory / "coordinator.log"
    with open(log, "w") as out:
        process = subprocess.Popen([tool("torchnative-coordinator"), "--config", str(path), *extra], stderr=out)

    def listening():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("event") == "listening" or entry.get("message") == "listening":
                return entry
        assert process.poll() is None, f"the coordinator exited {process.returncode}: {log.read_text()}"
        return None

    try:
        return process, wait_for("the coordinator to listen", listening, 10)
    except BaseException:
        process.kill()
        process.wait()
        raise


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def local_overrides(directory, key):
    """Flags that keep a shipped configuration's meaning but run it here: free ports on loopback,
    a temporary state directory, a real administrator key."""
    return ["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--state-dir", str(directory / "state"),
            "--admin-key", key]


def port_of(address):
    return int(address.rsplit(":", 1)[1])


# ---------------------------------------------------------------------------------------- systemd

UNITS = ["torchnative-coordinator.service", "torchnative-device@.service"]


def unit_lines(path, key):
    return [line.split("=", 1)[1] for line in path.read_text().splitlines() if line.startswith(key + "=")]


def test_systemd_units_verify_cleanly(tmp_path):
    """systemd-analyze verify, on the units and the TLS drop-in, with the executables pointed at
    the build: any warning (an unknown or misspelt key, a missing binary) fails."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is absent (Debian package systemd)")
    binaries = {f"/usr/local/bin/{name}": tool(name) for name in BUILD_PATHS}
    shutil.copytree(DEPLOY / "systemd", tmp_path / "units")
    for path in (tmp_path / "units").rglob("*"):
        if path.suffix in (".service", ".conf"):
            text = path.read_text()
            for installed, built in binaries.items():
                text = text.replace(installed, built)
            path.write_text(text)
    units = tmp_path / "units"
    shutil.copy(units / "torchnative-device@.service", units / "torchnative-device@lab.service")
    assert (units / "torchnative-coordinator.service.d" / "tls.conf").exists()
    result = subprocess.run([analyze, "verify", str(units / "torchnative-coordinator.service"),
                             str(units / "torchnative-device@lab.service")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "" and result.stdout.strip() == "", result.stderr + result.stdout


def test_systemd_units_are_hardened():
    required = {"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes",
                "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
                "Restart": "on-failure", "RestartPreventExitStatus": "2"}
    for unit in UNITS:
        path = DEPLOY / "systemd" / unit
        for key, value in required.items():
            assert value in unit_lines(path, key), f"{unit}: {key}={value} missing"
        assert unit_lines(path, "StateDirectory"), unit
    coordinator = DEPLOY / "systemd" / "torchnative-coordinator.service"
    # The state directory the daemon is given is StateDirectory=.
    (state,) = unit_lines(coordinator, "StateDirectory")
    (exec_start,) = unit_lines(coordinator, "ExecStart")
    arguments = shlex.split(exec_start)
    assert arguments[arguments.index("--state-dir") + 1] == f"/var/lib/{state}"
    device = DEPLOY / "systemd" / "torchnative-device@.service"
    (state,) = unit_lines(device, "StateDirectory")
    arguments = shlex.split(unit_lines(device, "ExecStart")[0])
    assert arguments[arguments.index("--key-dir") + 1] == f"%S/{state}"
    # A device that exits 0 when its task ends would not be restarted by Restart=on-failure.
    assert arguments[arguments.index("--when-no-task") + 1] == "wait"


def test_systemd_flags_are_real():
    coordinator_flags, device_flags = real_flags("torchnative-coordinator"), real_flags("torchnative-device")
    starts = unit_lines(DEPLOY / "systemd" / "torchnative-coordinator.service", "ExecStart") + \
        [s for s in unit_lines(DEPLOY / "systemd" / "torchnative-coordinator.service.d" / "tls.conf", "ExecStart") if s]
    assert len(starts) == 2
    for start in starts:
        used = flags_in(shlex.split(start))
        assert used and set(used) <= coordinator_flags, (used, coordinator_flags)
    (start,) = unit_lines(DEPLOY / "systemd" / "torchnative-device@.service", "ExecStart")
    env = dict(line.split("=", 1) for line in (DEPLOY / "systemd" / "device.env").read_text().splitlines()
               if line and not line.startswith("#"))
    used = flags_in(shlex.split(start)) + flags_in(env["TORCHNATIVE_FLAGS"].split())
    assert "TORCHNATIVE_SERVER" in env and "${TORCHNATIVE_SERVER}" in start and "$TORCHNATIVE_FLAGS" in start
    assert set(used) <= device_flags, (used, device_flags)


def test_systemd_configuration_is_accepted(tmp_path):
    """deploy/systemd/coordinator.json runs (its paths and the placeholder key swapped for local ones)."""
    config = json.loads((DEPLOY / "systemd" / "coordinator.json").read_text())
    assert config["data_plane"]["spool_directory"] == "/var/cache/torchnative"  # CacheDirectory=torchnative
    assert config["state_directory"] == "/var/lib/torchnative"
    config["data_plane"]["spool_directory"] = str(tmp_path)
    key = admin_public_key(tmp_path / "admin.key")
    process, listening = run_coordinator(tmp_path, config, local_overrides(tmp_path, key) +
                                         ["--data-plane-host", "127.0.0.1"])
    try:
        assert http_get(listening["http_port"], "/healthz")[0] == 200
    finally:
        stop(process)


# ------------------------------------------------------------------------------------- Kubernetes

def kubectl():
    found = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is absent (Debian package kubernetes-client provides it)")
    return found


@pytest.fixture(scope="module")
def rendered():
    result = subprocess.run([kubectl(), "kustomize", str(DEPLOY / "kubernetes")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    by_kind = {}
    for document in documents:
        by_kind.setdefault(document["kind"], []).append(document)
    return by_kind


def k8s_config(rendered):
    (config_map,) = rendered["ConfigMap"]
    return config_map, json.loads(config_map["data"]["coordinator.json"])


def make_certificate(directory):
    if not Path(OPENSSL).exists():
        pytest.fail(f"{OPENSSL} is missing (Debian package openssl)")
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt")],
                   check=True, capture_output=True, timeout=60)
    return directory / "tls.crt", directory / "tls.key"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A coordinator on the Kubernetes ConfigMap's configuration, with the StatefulSet's arguments,
    TLS from a certificate made here; a refusal provoked so that every series is exported. Read
    from the sources kustomize renders (it changes neither), so this runs without kubectl."""
    directory = tmp_path_factory.mktemp("k8s")
    config = json.loads((DEPLOY / "kubernetes" / "coordinator.json").read_text())
    (statefulset,) = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "statefulset.yaml").read_text())
                      if d and d["kind"] == "StatefulSet"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    arguments = list(container["args"])
    config_path = arguments[arguments.index("--config") + 1]
    del arguments[arguments.index("--config"):arguments.index("--config") + 2]
    certificate, key = make_certificate(directory)
    admin_key = directory / "admin.key"
    public_key = admin_public_key(admin_key)
    process, listening = run_coordinator(directory, config, arguments + local_overrides(directory, public_key) +
                                         ["--tls-cert", str(certificate), "--tls-key", str(key)])
    try:
        # An administrator the coordinator does not know: refused, and counted.
        stranger = directory / "stranger.key"
        admin_public_key(stranger)
        refused = subprocess.run([tool("torchnative-admin"), "--server", f"127.0.0.1:{listening['grpc_port']}",
                                  "--key", str(stranger), "--tls-ca", str(certificate), "devices"],
                                 capture_output=True, text=True, timeout=30)
        assert refused.returncode != 0 and "unknown_admin_key" not in refused.stdout, refused.stdout
        assert "key" in refused.stderr, refused.stderr  # refused for its key, not by TLS

        def scraped():
            status, body = http_get(listening["http_port"], "/metrics")
            return body if status == 200 and "torchnative_requests_refused_total{" in body else None

        metrics = wait_for("a refusal in /metrics", scraped, 10)
        yield {"listening": listening, "metrics": metrics, "config": config, "config_path": config_path}
    finally:
        stop(process)


def test_kubernetes_kinds(rendered):
    assert {"StatefulSet", "Service", "ConfigMap"} <= set(rendered), set(rendered)
    (statefulset,) = rendered["StatefulSet"]
    assert statefulset["spec"]["serviceName"] in [s["metadata"]["name"] for s in rendered["Service"]]
    assert any(s["spec"].get("clusterIP") == "None" for s in rendered["Service"])


def test_kubernetes_configuration_runs_with_tls(rendered, live):
    _, config = k8s_config(rendered)
    assert config == live["config"]  # the ConfigMap holds what the coordinator ran
    (statefulset,) = rendered["StatefulSet"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert live["config_path"] in container["args"]
    assert live["listening"]["tls"] is True
    assert live["config"]["data_plane"]["enabled"] is False  # so TLS covers every byte


def test_kubernetes_mounts(rendered, live):
    """The ConfigMap, the TLS Secret and the state claim are mounted where the configuration and
    the arguments look for them."""
    config_map, config = k8s_config(rendered)
    (statefulset,) = rendered["StatefulSet"]
    pod = statefulset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    claims = [c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]]
    state_mounts = [name for name in claims if mounts.get(name) == config["state_directory"]]
    assert state_mounts, (claims, mounts, config["state_directory"])

    def volume_at(path):
        for name, mount in mounts.items():
            if os.path.dirname(path) == mount.rstrip("/"):
                return volumes[name]
        pytest.fail(f"nothing is mounted at {os.path.dirname(path)}: {mounts}")

    assert volume_at(live["config_path"])["configMap"]["name"] == config_map["metadata"]["name"]
    assert os.path.basename(live["config_path"]) in config_map["data"]
    tls = config["tls"]
    for path, key in ((tls["certificate_chain"], "tls.crt"), (tls["private_key"], "tls.key")):
        volume = volume_at(path)
        assert "secret" in volume, volume
        assert os.path.basename(path) == key  # the keys of a kubernetes.io/tls Secret
    secret_name = volume_at(tls["private_key"])["secret"]["secretName"]
    assert secret_name == "torchnative-coordinator-tls"
    mode = volume_at(tls["private_key"])["secret"].get("defaultMode", 0o644)
    assert mode & 0o040, "the key must be readable by the fsGroup the coordinator runs as"
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0


def test_kubernetes_probes_and_ports(rendered, live):
    """Probes and Prometheus annotations name endpoints the coordinator serves, on its HTTP port."""
    config = live["config"]
    http_port, grpc_port = port_of(config["http_listen"]), port_of(config["listen"])
    (statefulset,) = rendered["StatefulSet"]
    template = statefulset["spec"]["template"]
    (container,) = template["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": http_port, "grpc": grpc_port}
    served_port = live["listening"]["http_port"]
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
        assert port == http_port, (probe, get)
        status, body = http_get(served_port, get["path"])
        assert status == 200 and body == "ok\n", (probe, get["path"], status)
    assert http_get(served_port, "/nonexistent")[0] == 404  # a wrong path would fail above
    annotated = [template["metadata"]] + [s["metadata"] for s in rendered["Service"]
                                          if "annotations" in s["metadata"]]
    assert len(annotated) >= 2
    for metadata in annotated:
        annotations = metadata["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert int(annotations["prometheus.io/port"]) == http_port
        assert http_get(served_port, annotations["prometheus.io/path"])[0] == 200
    service = next(s for s in rendered["Service"] if s["spec"].get("clusterIP") != "None")
    for port in service["spec"]["ports"]:
        assert ports[port["targetPort"]] == port["port"], port


# ---------------------------------------------------------------------------------------- Grafana

def exported_series(metrics):
    """{metric name: set of label names} of a /metrics page."""
    series = {}
    for line in metrics.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        assert match, line
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", match.group(3) or ""))
        series.setdefault(match.group(1), set()).update(labels)
    return series


def dashboard_queries():
    dashboard = json.loads((DEPLOY / "grafana" / "torchnative-coordinator.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    queries = [(target["expr"], target.get("legendFormat", "")) for panel in dashboard["panels"]
               for target in panel["targets"]]
    queries += [(v["query"], "") for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return queries


def test_grafana_queries_exported_metrics(live):
    """Every torchnative_* name and every label a query groups or names by is in /metrics."""
    series = exported_series(live["metrics"])
    # Labels Prometheus adds when it scrapes, not the coordinator.
    target_labels = {"job", "instance"}
    used = set()
    for expr, legend in dashboard_queries():
        names = re.findall(r"\btorchnative_[a-z0-9_]+", expr)
        assert names, expr
        for name in names:
            assert name in series, f"{name} (in {expr}) is not exported: {sorted(series)}"
            used.add(name)
        labels = set(re.findall(r"by \(([^)]*)\)", expr))
        labels = {l.strip() for group in labels for l in group.split(",")}
        labels |= set(re.findall(r"\{\{(\w+)\}\}", legend))
        available = set().union(*(series[name] for name in names)) | target_labels
        assert labels <= available, (expr, labels, available)
    # rounds, devices, bytes, durations, refusals: every family the coordinator exports is shown.
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in series}
    shown = {re.sub(r"_(bucket|sum|count)$", "", n) for n in used}
    assert families == shown, families ^ shown


# ------------------------------------------------------------------------------- Docker and compose

def dockerfile():
    return (DEPLOY / "Dockerfile").read_text()


def test_dockerfile_runs_setup_as_the_project_does():
    text = dockerfile()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms and all(f == "debian:bookworm" for f in froms), froms
    assert "make system-packages" in text and "make build" in text
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^system-packages:", makefile, re.M) and re.search(r"^build:", makefile, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    for source in re.findall(r"^COPY (?!--from)(\S+)", text, re.M):
        assert source == "." or (REPO / source).exists(), source


def test_dockerfile_healthcheck_matches_the_image_configuration(tmp_path):
    """The HEALTHCHECK's URL is /healthz on http_listen's port of the configuration the image ships,
    and that configuration runs (the placeholder key replaced, as compose does with --admin-key)."""
    text = dockerfile()
    (command,) = re.findall(r"^HEALTHCHECK .*?CMD (.*)$", text.replace("\\\n", " "), re.M)
    (url,) = re.findall(r"http://127\.0\.0\.1:(\d+)(/\S*)", command)
    config = json.loads((DEPLOY / "docker" / "coordinator.json").read_text())
    assert int(url[0]) == port_of(config["http_listen"]) and url[1] == "/healthz"
    assert config["http_listen"].startswith("0.0.0.0:")  # reachable from outside the container
    exposed = {int(p) for p in re.findall(r"^EXPOSE (.*)$", text, re.M)[0].split()}
    assert exposed == {port_of(config["listen"]), port_of(config["http_listen"])}
    config["data_plane"]["spool_directory"] = str(tmp_path)
    key = admin_public_key(tmp_path / "admin.key")
    process, listening = run_coordinator(tmp_path, config, ["--state-dir", str(tmp_path / "state"),
                                                            "--listen", "127.0.0.1:0", "--http-listen",
                                                            "127.0.0.1:0", "--admin-key", key,
                                                            "--data-plane-host", "127.0.0.1"])
    try:
        assert http_get(listening["http_port"], url[1]) == (200, "ok\n")
    finally:
        stop(process)


def test_runtime_packages_cover_the_executables():
    """deploy/runtime-packages.sh, as the image's build stage runs it, here: every library the
    executables load is in a package it lists."""
    result = subprocess.run([str(DEPLOY / "runtime-packages.sh")] + [tool(n) for n in BUILD_PATHS],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    packages = result.stdout.split()
    assert {"libgrpc++1.51", "libsodium23", "libstdc++6"} <= set(packages), packages


def test_runtime_packages_fail_naming_a_library_no_package_holds(tmp_path):
    """A library loaded from outside every package (here a copy of libsodium found first through
    LD_LIBRARY_PATH) fails the script with status 1, naming it: the image would lack it."""
    sodium = next(line.split()[2] for line in subprocess.run(
        ["ldd", tool("torchnative-admin")], capture_output=True, text=True, check=True).stdout.splitlines()
        if "libsodium" in line)
    shutil.copy(sodium, tmp_path)
    result = subprocess.run([str(DEPLOY / "runtime-packages.sh"), tool("torchnative-admin")], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "LD_LIBRARY_PATH": str(tmp_path)})
    assert result.returncode == 1, (result.returncode, result.stdout)
    assert f"runtime-packages.sh: no Debian package holds {tmp_path / Path(sodium).name}" in result.stderr, \
        result.stderr


def test_compose_file():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    coordinator, device = services["coordinator"], services["device"]
    assert device["deploy"]["replicas"] >= 2
    assert device["depends_on"]["coordinator"]["condition"] == "service_healthy"
    config = json.loads((DEPLOY / "docker" / "coordinator.json").read_text())
    published = {int(p.split(":")[-1]) for p in coordinator["ports"]}
    assert published == {port_of(config["listen"]), port_of(config["http_listen"])}
    arguments = coordinator["command"]
    assert set(flags_in(arguments)) <= real_flags("torchnative-coordinator")
    assert set(flags_in(device["command"])) <= real_flags("torchnative-device")
    assert device["entrypoint"] == ["/usr/local/bin/torchnative-device"]
    # The data plane binds an IP literal: the coordinator's fixed address on the network.
    host = arguments[arguments.index("--data-plane-host") + 1]
    assert coordinator["networks"]["federation"]["ipv4_address"] == host
    subnet = ipaddress.ip_network(compose["networks"]["federation"]["ipam"]["config"][0]["subnet"])
    assert ipaddress.ip_address(host) in subnet
    server = device["command"][device["command"].index("--server") + 1]
    assert server == f"coordinator:{port_of(config['listen'])}"
    # restart: on-failure does not restart a device that exited 0 because its task ended.
    assert device["command"][device["command"].index("--when-no-task") + 1] == "wait"
    assert coordinator["volumes"][0].split(":")[1] == config["state_directory"]


def test_image_builds():
    """Only where a Docker daemon answers (see deploy/README.md: not here)."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is absent")
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=30)
    if info.returncode != 0:
        pytest.skip("no Docker daemon: " + (info.stderr.strip().splitlines() or ["docker info failed"])[-1])
    result = subprocess.run([docker, "build", "-f", str(DEPLOY / "Dockerfile"), "-t", "torchnative:test", str(REPO)],
                            capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, result.stderr[-4000:]
