"""Shared helpers for the sandbox tests: a real gRPC server per backend, a runner that collects a
job's events, and the host-side checks (no process, cgroup, container or file left behind; no
secret read)."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import RunningServer, start_server
from services.common.settings import Config
from services.common.structs import from_value, to_struct
from services.sandbox.app import build_definition
from services.sandbox.core.service import Sandbox
from services.sandbox.core.supervisor import drain_teardowns

TOKEN = "t-sandbox-tests"
METADATA = [("authorization", f"Bearer {TOKEN}")]
REASON = sandbox_pb2.ExitReason


@dataclass
class Outcome:
    events: list[sandbox_pb2.ExecEvent] = field(default_factory=list)

    def of(self, kind: str) -> list[Any]:
        return [getattr(e, kind) for e in self.events if e.WhichOneof("event") == kind]

    @property
    def stdout(self) -> str:
        return b"".join(c.data for c in self.of("stdout")).decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return b"".join(c.data for c in self.of("stderr")).decode("utf-8", "replace")

    @property
    def exit(self) -> sandbox_pb2.ExecExit:
        exits = self.of("exit")
        assert len(exits) == 1 and self.events[-1].WhichOneof("event") == "exit", self.events
        return exits[0]

    @property
    def reason(self) -> str:
        return REASON.Name(self.exit.reason)

    @property
    def result(self) -> Any:
        results = self.of("result")
        return from_value(results[0].value) if results else None

    @property
    def artifacts(self) -> list[sandbox_pb2.Artifact]:
        return self.of("artifact")

    def everything(self) -> str:
        """All text a job could have smuggled out (for secret checks)."""
        parts = [self.stdout, self.stderr, self.exit.message]
        parts += [r.json for r in self.of("result")]
        parts += [a.content.decode("utf-8", "replace") for a in self.artifacts]
        return "\n".join(parts)


@dataclass
class SandboxUnderTest:
    name: str
    running: RunningServer
    channel: grpc.aio.Channel
    stub: sandbox_pb2_grpc.SandboxStub
    sandbox: Sandbox

    @property
    def backend(self) -> Any:
        return self.sandbox.backend

    async def run(self, code: str, language: str = "python", *, arguments: dict[str, Any] | None = None,
                  mode: int = sandbox_pb2.EXEC_MODE_UNSPECIFIED, request_id: str = "", **limits: int) -> Outcome:
        request = sandbox_pb2.ExecuteRequest(language=language, code=code, arguments=to_struct(arguments or {}),
                                             mode=mode, limits=sandbox_pb2.ResourceLimits(**limits), request_id=request_id)
        outcome = Outcome()
        async for event in self.stub.Execute(request, metadata=METADATA, timeout=120):
            outcome.events.append(event)
        return outcome

    async def no_leftovers(self, timeout_s: float = 30.0) -> None:
        """Waits until nothing but live pool workers exists: no stray process, cgroup, dir or container."""
        deadline = time.monotonic() + timeout_s
        # Every clean-up the server has begun ends here. The host is still polled after it: a cancelled
        # call's clean-up starts only once the server sees the cancel, and a busy cgroup is the reaper's.
        await asyncio.wait_for(drain_teardowns(), timeout_s)
        problems: list[str] = []
        while time.monotonic() < deadline:
            problems = await asyncio.to_thread(self._leftovers)
            if not problems:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name}: leftovers after the job: {problems}")

    def _leftovers(self) -> list[str]:
        backend = self.backend
        live = set(backend._live)
        problems: list[str] = []
        if self.name == "local":
            for name in backend.layout.children():
                if name.split("-")[1] == str(os.getpid()) and name not in live:
                    problems.append(f"cgroup {name}")
            for entry in backend.jobs_dir.iterdir():
                if entry.name.split("-")[1] == str(os.getpid()) and entry.name not in live:
                    problems.append(f"dir {entry}")
            for pid, cgroup in sandbox_processes():
                name = cgroup.rsplit("/", 1)[-1]
                if name not in live:
                    problems.append(f"process {pid} in {cgroup}")
        else:
            for summary in backend.api.containers(all=True, filters={"label": "dev.agentcanvas.sandbox"}):
                names = [n.lstrip("/") for n in summary.get("Names") or []]
                if any(n.split("-")[1:2] == [str(os.getpid())] for n in names) and not set(names) & live:
                    problems.append(f"container {names}")
        return problems


def sandbox_processes() -> list[tuple[int, str]]:
    """Host processes that live in a sandbox cgroup of this test process."""
    found = []
    marker = f"/agentcanvas-sandbox/sbx-{os.getpid()}-"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for line in (entry / "cgroup").read_text().splitlines():
                if ":memory:" in line and marker in line:
                    found.append((int(entry.name), line.split(":", 2)[2]))
        except OSError:
            continue
    return found


def host_uid_processes(uid: int = 65534) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids


def base_config(tmp: Path, sandbox_section: dict[str, Any]) -> Config:
    return Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "acme", "user": "alice"}]},
        "sandbox": sandbox_section,
    })


async def start_sandbox(name: str, config: Config) -> SandboxUnderTest:
    from services.sandbox.app import build_sandbox

    sandbox = build_sandbox(config)
    running = await start_server(build_definition(config, sandbox), config,
                                 authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    return SandboxUnderTest(name, running, channel, sandbox_pb2_grpc.SandboxStub(channel), sandbox)


async def stop_sandbox(under_test: SandboxUnderTest) -> None:
    await under_test.channel.close()
    await under_test.running.stop(5)


# Blocks until the host creates `release` (see release()): a job that is certainly still running
# whenever the test acts. It polls for the file because nothing the host can do on both backends
# (a bind-mounted directory, a copy into a container) wakes a blocked reader; its wall time bounds it.
BLOCKING_PYTHON = """
import os, socket, time
open('ready-{token}', 'w').write('1')
print('first', socket.gethostname(), flush=True)
while not os.path.exists('release'):
    time.sleep(0.01)
print('second')
"""


def release_local(jobs_dir: Path, token: str) -> None:
    """Creates `release` in the directory of the local-backend job that wrote ready-<token>."""
    for entry in jobs_dir.iterdir():
        if (entry / f"ready-{token}").exists():
            (entry / "release").write_text("go")
            return
    raise AssertionError(f"job directory with ready-{token} not found")


async def release(under_test: SandboxUnderTest, token: str, hostname: str) -> None:
    """Creates `release` in the job's working directory from the host side."""
    if under_test.name == "local":
        release_local(under_test.backend.jobs_dir, token)
        return
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("release")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"go"))
    api = under_test.backend.api
    matches = [c["Id"] for c in api.containers(filters={"label": "dev.agentcanvas.sandbox"}) if c["Id"].startswith(hostname)]
    assert matches, f"no container for hostname {hostname}"
    await asyncio.to_thread(api.put_archive, matches[0], "/work/job", buffer.getvalue())
