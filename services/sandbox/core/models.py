"""Value types of the sandbox core: languages, limits, jobs and the events a job produces."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.common.errors import InvalidArgumentError

if TYPE_CHECKING:
    from services.sandbox.core.status import RunnerStatus, StatusProblem

LANGUAGE_ALIASES: dict[str, tuple[str, ...]] = {"python": ("python3",), "nodejs": ("javascript", "node", "js")}


def canonical_language(name: str) -> str:
    """"python3" -> "python", "javascript" -> "nodejs"; INVALID_ARGUMENT for anything else."""
    wanted = name.strip().lower()
    for canonical, aliases in LANGUAGE_ALIASES.items():
        if wanted == canonical or wanted in aliases:
            return canonical
    known = ", ".join(sorted([*LANGUAGE_ALIASES, *(a for aliases in LANGUAGE_ALIASES.values() for a in aliases)]))
    raise InvalidArgumentError.for_field("language", f"unknown language {name!r}; expected one of {known}")


class ExecMode(enum.Enum):
    AUTO = "auto"
    """main(**arguments) when the code defines main, else the script alone."""
    MAIN = "main"
    SCRIPT = "script"


class ExitReason(enum.Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"


@dataclass(frozen=True)
class Limits:
    """Per-job limits. In a request 0 means "server default"."""

    wall_time_ms: int = 0
    cpu_time_ms: int = 0
    memory_bytes: int = 0
    pids: int = 0
    output_bytes: int = 0
    file_size_bytes: int = 0
    open_files: int = 0

    def resolve(self, defaults: "Limits", caps: "Limits", floors: "Limits") -> "Limits":
        """Zero takes the default; anything above the cap is lowered to it, below the floor raised to it."""
        values: dict[str, int] = {}
        for name in self.__dataclass_fields__:
            requested = int(getattr(self, name))
            if requested < 0:
                raise InvalidArgumentError.for_field(f"limits.{name}", "must not be negative")
            value = requested or int(getattr(defaults, name))
            values[name] = max(int(getattr(floors, name)), min(value, int(getattr(caps, name))))
        return Limits(**values)


@dataclass(frozen=True)
class JobSpec:
    """One execution, with limits already resolved against the server's caps."""

    job_id: str
    language: str
    code: str
    arguments: dict[str, Any]
    mode: ExecMode
    limits: Limits
    request_id: str = ""


@dataclass(frozen=True)
class RuntimeInfo:
    language: str
    aliases: tuple[str, ...]
    version: str
    backend: str


@dataclass(frozen=True)
class Started:
    job_id: str
    backend: str
    language: str
    runtime_version: str
    request_id: str


@dataclass(frozen=True)
class Output:
    stream: str
    """"stdout" or "stderr"."""
    data: bytes


@dataclass(frozen=True)
class Result:
    json_text: str
    """main()'s return value as JSON text."""


@dataclass(frozen=True)
class ArtifactFile:
    name: str
    mime_type: str
    size: int
    content: bytes = b""
    truncated: bool = False


@dataclass(frozen=True)
class Exit:
    code: int
    signal: int
    reason: ExitReason
    message: str = ""
    wall_time_ms: int = 0
    output_truncated: bool = False


Event = Started | Output | Result | ArtifactFile | Exit


@dataclass(frozen=True)
class RawExit:
    """How the sandboxed process ended, as the backend saw it."""

    code: int
    signal: int = 0


@dataclass
class Collected:
    """What the job left behind, read only after every job process is dead."""

    status: "RunnerStatus | StatusProblem | None" = None
    """The runner's status record as `core.status.parse_status` read it (None: not read, i.e. missing)."""
    artifacts: list[ArtifactFile] = field(default_factory=list)
