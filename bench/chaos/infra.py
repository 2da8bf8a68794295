"""What the chaos suite starts besides the services: its own PostgreSQL and Redis (never the machine's shared
ones, which other work uses) and a scripted OpenAI-compatible model server whose faults can be switched on.

PostgreSQL: `initdb` into a temporary directory with the installed server binaries
(/usr/lib/postgresql/<newest>/bin), run as the `postgres` user through `runuser` when we are root (the server
refuses to run as root), listening on 127.0.0.1 on a free port; `fsync=off`, as it is thrown away afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.cluster import free_port
from tests.support.openai_server import Fail, ScriptedOpenAIServer, Stream


class OwnPostgres:
    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
        if not found:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
        self.bin = Path(found[-1]).parent
        self.root = Path(tempfile.mkdtemp(prefix="ac-chaos-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._as_root = os.geteuid() == 0
        if self._as_root:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = 120) -> None:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> "OwnPostgres":
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "server.log"), "-w", "start")
        return self

    def restart(self) -> None:
        """What an operator's restart does: stop (fast: open connections are ended) and start again."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "restart")

    def close(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)


class OwnRedis:
    def __init__(self) -> None:
        if not shutil.which("redis-server"):
            raise RuntimeError("redis-server is not installed")
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ac-chaos-redis-"))
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "OwnRedis":
        self._process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


ANSWER_WORDS = 12


class ChaosModel:
    """The scripted OpenAI-compatible server: every call streams ANSWER_WORDS pieces `chunk_delay_s` apart (so
    that faults land mid-call). `errors_for(s)` answers 500 and 429 alternately for s seconds; `drop_next(n)`
    cuts the connection of the next n streams after two pieces."""

    def __init__(self, chunk_delay_s: float = 0.03) -> None:
        self.delay = chunk_delay_s
        self._lock = threading.Lock()
        self._errors_until = 0.0
        self._drops = 0
        self._flip = False
        self.calls = 0
        self.call_started = threading.Event()
        self.server = ScriptedOpenAIServer(default=self._answer)

    def start(self) -> "ChaosModel":
        self.server.start()
        return self

    def close(self) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def errors_for(self, seconds: float) -> None:
        with self._lock:
            self._errors_until = time.monotonic() + seconds

    def drop_next(self, count: int) -> None:
        with self._lock:
            self._drops += count

    def _answer(self, body: dict[str, Any]):
        with self._lock:
            self.calls += 1
            self.call_started.set()
            if time.monotonic() < self._errors_until:
                self._flip = not self._flip
                return Fail(500) if self._flip else Fail(429, retry_after=0.5)
            drop = self._drops > 0
            self._drops -= drop
        words = [f"w{i} " for i in range(ANSWER_WORDS)]
        return Stream(chunks=[{"content": w} for w in words], chunk_delay_s=self.delay,
                      drop_after=2 if drop else None)
