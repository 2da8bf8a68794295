"""`agent-canvas up` as an operator meets it: every listener of its children (gRPC and the Prometheus side
ports) on 127.0.0.1, modules planted in the working directory never imported, and log lines that name
their service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli_robustness import LOOPBACK, descendants, free_ports, gone, kill_tree, wait_for_line

SERVICES = ("canvas_store", "orchestrator", "llm_gateway", "sandbox", "http_api")
SECTIONS = {"canvas_store": "store", "orchestrator": "orchestrator", "llm_gateway": "gateway", "sandbox": "sandbox",
            "http_api": "http"}
PLANTED = ("secrets", "grpc")  # both imported by every service (auth tokens, the server)


def plant(directory: Path) -> None:
    """Modules that shadow the standard library's `secrets` and the `grpc` package if the working directory
    is on sys.path; importing one leaves a marker file behind."""
    for name in PLANTED:
        (directory / f"{name}.py").write_text(
            "import pathlib\n"
            f"pathlib.Path(__file__).with_name('{name}.imported').write_text('imported')\n")


def listeners_of(pids: set[int]) -> set[tuple[str, int]]:
    """(address as /proc/net shows it, port) of every listening TCP socket these processes hold."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
        except OSError:
            continue  # exited meanwhile
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN; field 9: the socket's inode
                address, port = fields[1].rsplit(":", 1)
                found.add((address, int(port, 16)))
    return found


def agent_canvas(*argv: str, cwd: Path, **kwargs) -> subprocess.Popen:
    # -P: run the CLI as its console script runs (the script's directory first on sys.path, not the working
    # directory); what is under test is what `up` does for its children.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_ADDR") and not k.startswith("AGENT_CANVAS")}
    return subprocess.Popen([sys.executable, "-P", "-m", "services.cli.main", *argv], cwd=cwd, env=env, **kwargs)


@pytest.mark.slow
def test_up_listens_only_on_loopback_ignores_planted_modules_and_names_services_in_logs(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    plant(workdir)
    ports = free_ports(2 * len(SERVICES))
    grpc_ports = dict(zip(SERVICES, ports[:len(SERVICES)]))  # the HTTP facade's is its HTTP port
    metrics_ports = dict(zip(SERVICES, ports[len(SERVICES):]))
    config = tmp_path / "config.yaml"
    lines = [f"data_dir: {tmp_path / 'data'}", "addresses:"]
    lines += [f"  {name}: 127.0.0.1:{port}" for name, port in grpc_ports.items()]
    for name, port in metrics_ports.items():
        lines += [f"{SECTIONS[name]}:", f"  metrics_port: {port}"]
    config.write_text("\n".join(lines) + "\n")
    canvas = tmp_path / "echo.json"
    canvas.write_text(json.dumps({"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["msg"], "upstream": []},
        "msg": {"obj": {"component_name": "Message", "params": {"content": ["echo: {sys.query}"]}},
                "downstream": [], "upstream": ["begin"]}}}))
    log = tmp_path / "up.log"
    with log.open("wb") as sink:
        process = agent_canvas("up", "--config", str(config), cwd=workdir, stdout=subprocess.DEVNULL, stderr=sink)
    children: set[int] = set()
    try:
        wait_for_line(log, "press Ctrl-C to stop", process, 180)
        children = descendants(process.pid)
        listening = listeners_of(children)
        # the metrics side ports too, not only the services' own
        assert {port for _, port in listening} >= set(grpc_ports.values()) | set(metrics_ports.values()), listening
        assert {address for address, _ in listening} <= LOOPBACK, listening

        run = agent_canvas("run", str(canvas), "--query", "hello", "--remote", "--config", str(config), cwd=workdir,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err.decode(errors="replace")
        assert "echo: hello" in out.decode()
        # `python -m` in this directory would import both (and every RunCanvas would fail INTERNAL)
        assert sorted(p.name for p in workdir.glob("*.imported")) == []

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 0
        assert gone(children, 30) == set()
        services = set()
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                services.add(json.loads(line).get("service"))
        assert services == set(SERVICES), services  # every JSON line names its service
    finally:
        kill_tree(process, children)
