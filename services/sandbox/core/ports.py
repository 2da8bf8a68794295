"""The one backend interface. `local` (bubblewrap) and `docker` (Docker API, e.g. podman) implement it.

A backend owns its warm pool: `launch()` takes a pre-spawned single-use worker, applies the job's
limits, sends it the job and returns a RunningJob. The supervisor (core/supervisor.py) does the rest:
output cap, timers, classification, artifacts, clean-up. Workers are never reused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from services.sandbox.core.models import Collected, JobSpec, RawExit, RuntimeInfo


class RunningJob(Protocol):
    """One job inside its sandbox."""

    def output(self) -> AsyncIterator[tuple[str, bytes]]:
        """("stdout"|"stderr", chunk) as the job writes them; ends when both streams are closed."""
        ...

    async def wait(self) -> RawExit:
        """Waits for the main process to end."""
        ...

    async def kill(self) -> None:
        """Kills every process of the job (idempotent)."""
        ...

    async def memory_exceeded(self) -> bool:
        """True when the kernel OOM-killed something in the job (a fact from cgroups / the engine)."""
        ...

    async def collect(self, max_artifacts: int, max_artifact_bytes: int) -> Collected:
        """Reads the runner's status and the output directory. Called only after kill()."""
        ...

    async def cleanup(self) -> None:
        """Removes the job's processes, cgroups, containers and directories."""
        ...


class SandboxBackend(Protocol):
    """An isolation technology plus its warm pool."""

    name: str

    async def start(self) -> None:
        """Checks prerequisites, reaps leftovers of earlier runs and fills the pools."""
        ...

    async def stop(self) -> None:
        """Kills idle workers and in-flight jobs' leftovers."""
        ...

    def runtimes(self) -> list[RuntimeInfo]:
        """Languages with real versions (probed at start)."""
        ...

    async def launch(self, job: JobSpec) -> RunningJob:
        """Starts the job in a fresh sandbox and returns at once; output streams from then on."""
        ...

    async def reap(self) -> int:
        """Removes stale cgroups, containers and directories; returns how many were removed."""
        ...
