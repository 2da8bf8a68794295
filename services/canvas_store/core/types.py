"""Plain value types of the canvas store. No grpc, no SQL: server.py and the SQL adapter both map to these."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from services.common.structs import StoredJson

JsonObject = dict[str, Any]


class Permission(str, enum.Enum):
    """Who besides the owner may see a canvas."""

    ME = "ME"
    TEAM = "TEAM"


class Category(str, enum.Enum):
    """Agent workflow or ingestion pipeline."""

    AGENT = "AGENT"
    DATAFLOW = "DATAFLOW"


class RunStatus(str, enum.Enum):
    """Lifecycle of a run. PAUSED counts as terminal for a stream: the run waits for user input."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_final(self) -> bool:
        """No more commits are accepted (PAUSED runs may be resumed, so they are not final)."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class TenantRole(str, enum.Enum):
    OWNER = "owner"
    MEMBER = "member"


@dataclass
class Canvas:
    """A canvas row. `dsl` is None in list results (it is not loaded). A point read (GetCanvas, the
    single-statement update) leaves it as the stored text (`StoredJson`; `.value` parses it): those calls
    only return it, and the reply's Struct is cached by that text."""

    id: str
    tenant_id: str
    owner_id: str
    title: str
    description: str = ""
    avatar: str = ""
    permission: Permission = Permission.ME
    release: bool = False
    category: Category = Category.AGENT
    tags: list[str] = field(default_factory=list)
    dsl: JsonObject | StoredJson | None = None
    etag: str = ""
    create_time_ms: int = 0
    update_time_ms: int = 0
    head_revision_id: str = ""
    published_revision_id: str = ""
    delete_time_ms: int = 0
    """Soft delete (AIP-164): when it was deleted, 0 while live."""
    expire_time_ms: int = 0
    """When the purge removes a deleted canvas for good, 0 while live."""

    @property
    def deleted(self) -> bool:
        return self.delete_time_ms != 0


@dataclass(frozen=True)
class DslChange:
    """A new head DSL: saved as a new revision unless it equals the head's content (canvas_store.proto,
    CanvasRevision.content_hash)."""

    dsl: JsonObject
    content_hash: str
    author_id: str
    description: str = ""


@dataclass
class Revision:
    """An immutable DSL snapshot of a canvas."""

    id: str
    canvas_id: str
    tenant_id: str
    content_hash: str
    seq: int
    create_time_ms: int
    author_id: str = ""
    description: str = ""
    released: bool = False
    dsl: JsonObject | None = None
    alternate_ids: list[str] = field(default_factory=list)


@dataclass
class Template:
    """A bundled canvas template."""

    id: str
    title: dict[str, str]
    description: dict[str, str]
    canvas_type: str
    category: Category
    avatar: str = ""
    dsl: JsonObject | None = None


@dataclass
class Session:
    """A conversation pinned to one revision of a canvas."""

    id: str
    tenant_id: str
    canvas_id: str
    revision_id: str
    user_id: str
    creator_id: str
    conversation_turns: int = 0
    history: list[JsonObject] | None = None
    state: JsonObject | None = None
    etag: str = ""
    create_time_ms: int = 0
    update_time_ms: int = 0


@dataclass(frozen=True)
class TenantMember:
    tenant_id: str
    user_id: str
    role: TenantRole


@dataclass
class RunLease:
    run_id: str
    holder: str
    token: int
    expire_time_ms: int
    cancel_requested: bool = False


@dataclass
class RunRecord:
    """The durable record of one run."""

    id: str
    tenant_id: str
    creator_id: str
    canvas_id: str = ""
    revision_id: str = ""
    session_id: str = ""
    status: RunStatus = RunStatus.PENDING
    spec: JsonObject | None = None
    outputs: JsonObject | None = None
    error: JsonObject | None = None
    usage: JsonObject | None = None
    last_seq: int = 0
    step_count: int = 0
    cancel_requested: bool = False
    lease: RunLease | None = None
    create_time_ms: int = 0
    update_time_ms: int = 0


@dataclass
class RunStep:
    """One journal entry; `step_index` is assigned by the store."""

    node_id: str
    attempt: int
    state: JsonObject
    step_index: int = 0
    create_time_ms: int = 0


@dataclass
class StoredEvent:
    """A persisted run event; `seq` is assigned by the store at commit."""

    event_type: str
    payload: bytes
    terminal: bool = False
    seq: int = 0
    run_id: str = ""


@dataclass
class RunCommit:
    """What one CommitRunStep writes atomically."""

    run_id: str
    lease_token: int
    steps: list[RunStep]
    events: list[StoredEvent]
    status: RunStatus | None = None
    outputs: JsonObject | None = None
    error: JsonObject | None = None
    usage: JsonObject | None = None


@dataclass(frozen=True)
class CommitResult:
    first_seq: int
    last_seq: int
    cancel_requested: bool


@dataclass
class Page:
    """A page of results plus the opaque token for the next one ("" at the end)."""

    items: list[Any]
    next_page_token: str = ""
