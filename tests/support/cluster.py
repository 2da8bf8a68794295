"""Service processes on loopback, for scale-out tests and bench/scale.py.

    cluster = ProcessCluster(workdir, tokens=TOKENS)
    store = await cluster.spawn("store", "canvas_store", {"database_url": url, "seed_templates": False})
    gw = await cluster.spawn("gw-1", "llm_gateway", {"models": {...}})
    orch = await cluster.spawn("orch-a", "orchestrator", {...},
                               addresses={"canvas_store": store.address, "llm_gateway": f"ipv4:{gw.address}"})
    cluster.kill("orch-a")        # SIGKILL
    cluster.close()               # SIGTERM everything left, then SIGKILL stragglers

Every process gets its own YAML config (auth tokens, addresses, its section plus a Prometheus side
port) and writes its JSON logs to `<workdir>/<name>.log`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from services.common.health import wait_until_http_ready, wait_until_serving
from services.common.settings import SECTION_BY_SERVICE
from tests.support.databases import temporary_database

ROOT = Path(__file__).parents[2]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PROVIDER_ENV = ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "DASHSCOPE_API_KEY", "MOONSHOT_API_KEY", "ANTHROPIC_API_KEY",
                "GEMINI_API_KEY", "ZHIPUAI_API_KEY")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def postgres_database(prefix: str = "ac_scale") -> Iterator[str]:
    """A fresh, uniquely named PostgreSQL database (dropped afterwards); yields its URL."""
    with temporary_database("postgresql", prefix=prefix) as url:
        yield url


@dataclass
class Process:
    name: str
    service: str
    popen: subprocess.Popen
    port: int
    metrics_port: int
    log_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


class ProcessCluster:
    def __init__(self, workdir: Path, tokens: list[dict[str, str]], log_level: str = "INFO"):
        self.workdir = Path(workdir)
        self.tokens = tokens
        self.log_level = log_level
        self.processes: dict[str, Process] = {}

    async def spawn(self, name: str, service: str, section: dict[str, Any] | None = None, *,
                    addresses: dict[str, str] | None = None, extra: dict[str, Any] | None = None,
                    timeout: float = 90, config_path: Path | None = None, port: int | None = None) -> Process:
        """Start `python -m services.<service>` and wait until it is SERVING. With `config_path` the
        process reads that (shared) file instead of one generated from the other arguments."""
        port, metrics_port = port or free_port(), free_port()
        if config_path is None:
            config: dict[str, Any] = {
                "data_dir": str(self.workdir / name),
                "auth": {"embedded": False, "tokens": self.tokens},
                "addresses": addresses or {},
                "log": {"level": self.log_level, "format": "json"},
                SECTION_BY_SERVICE[service]: {**(section or {}), "metrics_port": metrics_port},
                **(extra or {}),
            }
            config_path = self.workdir / f"{name}.yaml"
            config_path.write_text(yaml.safe_dump(config))
        path = config_path
        env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "PORT": str(port),
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        # Settings a developer may have exported must not leak in, nor provider keys send a factory
        # to the real internet.
        for variable in ("AGENT_CANVAS_TOKEN", "METRICS_PORT", "AGENT_CANVAS_CONFIG", *PROVIDER_ENV):
            env.pop(variable, None)
        log_path = self.workdir / f"{name}.log"
        with log_path.open("ab") as log:
            popen = subprocess.Popen([sys.executable, "-m", f"services.{service}", "--config", str(path)],
                                     env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        process = Process(name, service, popen, port, metrics_port, log_path)
        self.processes[name] = process
        # the HTTP facade has no gRPC health: its /healthz answers 200 once its peers are SERVING
        await (wait_until_http_ready if service == "http_api" else wait_until_serving)(process.address, timeout=timeout)
        return process

    def kill(self, name: str) -> None:
        process = self.processes[name].popen
        process.send_signal(signal.SIGKILL)
        process.wait(30)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.processes[name].log_path if name in self.processes else self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def logs(self) -> str:
        return "".join(p.log_path.read_text(errors="replace") for p in self.processes.values() if p.log_path.exists())

    def close(self) -> None:
        alive = [p.popen for p in self.processes.values() if p.popen.poll() is None]
        for popen in alive:
            popen.terminate()
        for popen in alive:
            try:
                popen.wait(20)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(10)
