"""Fixtures: a canary secret in the server's environment and canary files on the host, a podman API
socket with the sandbox image, and one real gRPC sandbox server per backend."""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from services.sandbox.adapters.podman_service import ensure_image, start_service
from tests.sandbox.harness import SandboxUnderTest, base_config, start_sandbox, stop_sandbox

PODMAN_SOCKET = os.environ.get("SANDBOX_TEST_PODMAN_SOCKET", "/run/podman/podman.sock")
BACKENDS = ("local", "docker")


class Canary:
    def __init__(self) -> None:
        self.secret = "canary-" + secrets.token_hex(12)
        self.env_name = "AGENTCANVAS_TEST_CANARY"
        self.token = secrets.token_hex(6)
        self.private_file = Path("/root") / f".agentcanvas-canary-{self.token}"
        self.public_file = Path(tempfile.gettempdir()) / f"agentcanvas-canary-{self.token}"


@pytest.fixture(scope="session")
def canary():
    """A secret the job must never see: in the server's environment and in two host files."""
    value = Canary()
    os.environ[value.env_name] = value.secret
    value.private_file.write_text(value.secret)
    os.chmod(value.private_file, stat.S_IRUSR | stat.S_IWUSR)
    value.public_file.write_text(value.secret)
    os.chmod(value.public_file, 0o644)  # world-readable on the host: only isolation keeps it out
    yield value
    os.environ.pop(value.env_name, None)
    value.private_file.unlink(missing_ok=True)
    value.public_file.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def podman_url():
    process = start_service(PODMAN_SOCKET)
    url = f"unix://{PODMAN_SOCKET}"
    ensure_image(url)
    yield url
    if process is not None:
        process.terminate()
        process.wait(timeout=30)


def sandbox_section(backend: str, work_root: Path, podman_url: str | None, **overrides) -> dict:
    section = {
        "backend": backend,
        "pool": {"python": 2, "nodejs": 1},
        "max_concurrent": 4,
        "max_queue": 16,
        "work_root": str(work_root),
        "defaults": {"wall_time_ms": 15_000, "cpu_time_ms": 15_000, "memory_bytes": 128 << 20, "pids": 64,
                     "output_bytes": 64 << 10, "file_size_bytes": 4 << 20, "open_files": 128},
        "reap_interval_s": 3600,
        "work_dir_bytes": 32 << 20,
    }
    if podman_url:
        section["docker"] = {"base_url": podman_url}
    section.update(overrides)
    return section


@pytest.fixture(scope="session")
def work_root():
    root = Path(tempfile.gettempdir()) / f"agentcanvas-sandbox-test-{os.getpid()}"
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session", params=BACKENDS)
async def sandbox(request, canary, work_root, tmp_path_factory) -> SandboxUnderTest:
    backend = request.param
    url = request.getfixturevalue("podman_url") if backend == "docker" else None
    config = base_config(tmp_path_factory.mktemp(f"data-{backend}"), sandbox_section(backend, work_root, url))
    under_test = await start_sandbox(backend, config)
    yield under_test
    await stop_sandbox(under_test)
