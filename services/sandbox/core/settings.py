"""The `sandbox` config section as a frozen dataclass (keys and defaults documented in README.md)."""

from __future__ import annotations

import sysconfig
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from services.common.errors import InvalidArgumentError
from services.common.settings import SERVER_KEYS
from services.sandbox.core.models import Limits

MiB = 1 << 20

DEFAULT_LIMITS = Limits(
    wall_time_ms=10_000, cpu_time_ms=10_000, memory_bytes=256 * MiB, pids=64,
    output_bytes=1 * MiB, file_size_bytes=16 * MiB, open_files=256,
)
CAP_LIMITS = Limits(
    wall_time_ms=120_000, cpu_time_ms=120_000, memory_bytes=2048 * MiB, pids=512,
    output_bytes=16 * MiB, file_size_bytes=256 * MiB, open_files=4096,
)
# Below these an interpreter cannot even start; requests are raised to them.
FLOOR_LIMITS = Limits(
    wall_time_ms=100, cpu_time_ms=100, memory_bytes=48 * MiB, pids=8,
    output_bytes=1, file_size_bytes=4096, open_files=32,
)


def _limits(raw: Any, base: Limits, key: str) -> Limits:
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise InvalidArgumentError.for_field(f"sandbox.{key}", "must be a mapping")
    unknown = set(raw) - {f.name for f in fields(Limits)}
    if unknown:
        raise InvalidArgumentError.for_field(f"sandbox.{key}", f"unknown keys {sorted(unknown)}")
    return Limits(**{f.name: int(raw.get(f.name, getattr(base, f.name))) for f in fields(Limits)})


def _default_site_packages() -> tuple[str, ...]:
    """The server's own site-packages (matplotlib, numpy, ...), bound read-only into Python jobs."""
    purelib = sysconfig.get_paths().get("purelib")
    return (purelib,) if purelib and Path(purelib).is_dir() else ()


@dataclass(frozen=True)
class DockerSettings:
    base_url: str = "unix:///run/podman/podman.sock"
    image: str = "localhost/agentcanvas-sandbox:1"
    runtime: str = ""
    """OCI runtime, e.g. "runsc" for gVisor; empty = the engine's default."""
    bind_host_usr: bool = True
    """Mount the host's /usr read-only (the registry-free image carries no interpreters)."""
    python: str = "/usr/bin/python3"
    node: str = "/usr/bin/node"
    seccomp: str = "auto"
    """auto | inline | path | default: how our seccomp profile reaches the engine (see README)."""
    tmpfs_bytes: int = 64 * MiB
    nano_cpus: int = 1_000_000_000


@dataclass(frozen=True)
class SandboxSettings:
    backend: str = "local"
    pool: Mapping[str, int] = field(default_factory=lambda: {"python": 2, "nodejs": 1})
    """Pre-spawned single-use workers per language."""
    max_concurrent: int = 4
    max_queue: int = 16
    defaults: Limits = DEFAULT_LIMITS
    caps: Limits = CAP_LIMITS
    max_code_bytes: int = 1 * MiB
    max_arguments_bytes: int = 1 * MiB
    max_artifacts: int = 10
    max_artifact_bytes: int = 10 * MiB
    work_root: str = ""
    """Where per-job directories live; must be traversable by uid 65534. Default: <tmp>/agentcanvas-sandbox."""
    reap_interval_s: float = 60.0
    static_checks: str = "off"
    """off | warn: advisory findings are written to the job's stderr; isolation never depends on them."""
    python: str = "/usr/bin/python3"
    node: str = "/usr/bin/node"
    python_paths: tuple[str, ...] = field(default_factory=_default_site_packages)
    cpu_quota_cores: float = 1.0
    work_dir_bytes: int = 128 * MiB
    """local: size of the tmpfs mounted on each job's /work (its directory would otherwise fill the host's disk)."""
    docker: DockerSettings = DockerSettings()

    @property
    def work_root_path(self) -> Path:
        return Path(self.work_root) if self.work_root else Path(tempfile.gettempdir()) / "agentcanvas-sandbox"

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> "SandboxSettings":
        known = {f.name for f in fields(cls)} | SERVER_KEYS
        unknown = set(section) - known
        if unknown:
            raise InvalidArgumentError.for_field("sandbox", f"unknown keys {sorted(unknown)}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in section:
                continue
            raw = section[f.name]
            if f.name in {"defaults", "caps"}:
                values[f.name] = _limits(raw, getattr(cls, f.name), f.name)
            elif f.name == "docker":
                if not isinstance(raw, Mapping):
                    raise InvalidArgumentError.for_field("sandbox.docker", "must be a mapping")
                allowed = {d.name: d for d in fields(DockerSettings)}
                bad = set(raw) - set(allowed)
                if bad:
                    raise InvalidArgumentError.for_field("sandbox.docker", f"unknown keys {sorted(bad)}")
                values["docker"] = DockerSettings(**raw)
            elif f.name == "pool":
                values["pool"] = {str(k): int(v) for k, v in dict(raw).items()}
            elif f.name == "python_paths":
                values["python_paths"] = tuple(str(p) for p in raw)
            else:
                values[f.name] = type(getattr(cls(), f.name))(raw)
        settings = cls(**values)
        if settings.backend not in {"local", "docker"}:
            raise InvalidArgumentError.for_field("sandbox.backend", f"must be 'local' or 'docker', not {settings.backend!r}")
        if settings.static_checks not in {"off", "warn"}:
            raise InvalidArgumentError.for_field("sandbox.static_checks", "must be 'off' or 'warn'")
        if settings.max_concurrent < 1 or settings.max_queue < 0:
            raise InvalidArgumentError.for_field("sandbox.max_concurrent", "must be >= 1 (and max_queue >= 0)")
        return settings
