"""Use cases for durable run state (the orchestrator's journal, events and leases)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from services.canvas_store.core import validation
from services.canvas_store.core.canvases import canvas_target, ensure_live
from services.canvas_store.core.dsl import canonical_json, validate_dsl
from services.canvas_store.core.ids import new_id
from services.canvas_store.core.page_tokens import PageTokenCodec
from services.canvas_store.core.policy import Action, Caller, Kind, Target, authorize, permits
from services.canvas_store.core.types import (
    CommitResult, Page, RunCommit, RunLease, RunRecord, RunStatus, RunStep, StoredEvent, TenantRole,
)
from services.common.errors import AgentCanvasError, InvalidArgumentError, NotFoundError, UnavailableError

MAX_EVENTS_PAGE = 5000
DEFAULT_EVENTS_PAGE = 500
MAX_EVENTS_PER_COMMIT = 10_000
MAX_COMMITS_PER_BATCH = 1000
MAX_EVENT_TYPE = 64
MAX_HOLDER = 255
MAX_EVENT_PAYLOAD = 4 << 20
CONTINUATION_PREFIX = "resume:"
"""A request_id `resume:<run id>` claims the one continuation of that paused run (see RunService._key_user)."""
TURN_PREFIX = "turn:"
"""A request_id `turn:<session id>:<suffix>` claims one turn of that session (see RunService._key_user)."""


class RunService:
    def __init__(self, runs: Any, canvases: Any, sessions: Any, tokens: PageTokenCodec, *,
                 default_ttl_ms: int, max_ttl_ms: int, max_spec_bytes: int):
        self._runs = runs
        self._canvases = canvases
        self._sessions = sessions
        self._tokens = tokens
        self._default_ttl = default_ttl_ms
        self._max_ttl = max_ttl_ms
        self._max_spec_bytes = max_spec_bytes

    def create(self, caller: Caller, run: RunRecord, request_id: str) -> RunRecord:
        record = self._new_record(caller, run, request_id)
        return self._runs.create(record, request_id, _replayable_by(caller), key_user=self._key_user(caller, request_id))

    def start(self, caller: Caller, run: RunRecord, request_id: str, holder: str,
              ttl_ms: int) -> tuple[RunRecord, RunLease | None]:
        """create + the first lease in one transaction (see RunRepository.start for replays)."""
        holder, ttl_ms = _holder(holder), self._ttl(ttl_ms)
        record = self._new_record(caller, run, request_id)
        return self._runs.start(record, request_id, holder, ttl_ms, _replayable_by(caller),
                                key_user=self._key_user(caller, request_id))

    def _key_user(self, caller: Caller, request_id: str) -> str:
        """Whose idempotency key `request_id` is: the caller's, except for a continuation claim.

        `resume:<run id>` claims the one continuation of a paused run, and every user who may read that run
        competes for the same claim, so the key is tenant-wide (user ''): of two users resuming at once,
        exactly one creates the run and the other gets it back (or, if they may not read it, ABORTED).
        The claimed run must exist in the caller's tenant. (Reading it is not required: a TEAM member may
        continue a session whose paused run another member started.)"""
        if request_id.startswith(TURN_PREFIX):
            # The orchestrator's claim of a session's next turn: every user of the session competes for it,
            # so two messages sent at once make one run (the other caller gets it back and is refused).
            session_id = request_id[len(TURN_PREFIX):].split(":", 1)[0]
            found = self._sessions.get(session_id, full=False) if session_id else None
            if found is None or found[1].tenant_id != caller.tenant_id:
                raise NotFoundError(f"session {session_id!r} (request_id {request_id!r} claims its turn) not found",
                                    resource_type="session", resource_name=session_id)
            return ""
        if not request_id.startswith(CONTINUATION_PREFIX):
            return caller.user_id
        claimed_id = request_id[len(CONTINUATION_PREFIX):]
        claimed = self._runs.get(claimed_id, with_spec=False) if claimed_id else None
        if claimed is None or claimed.tenant_id != caller.tenant_id:
            raise NotFoundError(f"run {claimed_id!r} (request_id {request_id!r} claims its continuation) not found",
                                resource_type="run", resource_name=claimed_id)
        return ""

    def _new_record(self, caller: Caller, run: RunRecord, request_id: str) -> RunRecord:
        """Validate a new run: its canvas (visible, live), its revision (of that canvas) and its session (of that
        canvas, whose canvas is live). The canvas may come from the session alone."""
        validation.request_id(request_id)
        if run.canvas_id:
            validation.resource_id(run.canvas_id, "run.canvas_id")
        if run.revision_id:
            validation.resource_id(run.revision_id, "run.revision_id")
        if run.session_id:
            validation.resource_id(run.session_id, "run.session_id")
        canvas_id = run.canvas_id
        if run.canvas_id:
            self._live_canvas(caller, run.canvas_id, "run.canvas_id")
        if run.session_id:
            found = self._sessions.get(run.session_id, full=False)
            if found is None:
                raise NotFoundError(f"session {run.session_id!r} not found", resource_type="session",
                                    resource_name=run.session_id)
            session, target = found
            if not caller.is_service:
                authorize(caller, Action.RUN, target)
            if run.canvas_id and session.canvas_id != run.canvas_id:
                raise InvalidArgumentError.for_field(
                    "run.session_id",
                    f"belongs to canvas {session.canvas_id!r}, not to run.canvas_id {run.canvas_id!r}")
            if not run.canvas_id:
                canvas_id = session.canvas_id
                self._live_canvas(caller, canvas_id, "run.session_id", authorized=True)
        if run.revision_id:
            if not canvas_id:
                raise InvalidArgumentError.for_field("run.canvas_id", "is required with run.revision_id")
            if self._canvases.get_revision(canvas_id, run.revision_id) is None:
                raise NotFoundError(f"revision {run.revision_id!r} of canvas {canvas_id!r} not found",
                                    resource_type="revision", resource_name=run.revision_id)
        validation.json_depth(run.spec, "run.spec")
        spec_size = len(canonical_json(run.spec or {}))
        if spec_size > self._max_spec_bytes:
            raise InvalidArgumentError.for_field("run.spec", f"is {spec_size} bytes; at most {self._max_spec_bytes}")
        run_spec(run.spec, self._max_spec_bytes)
        return RunRecord(id=new_id(), tenant_id=caller.tenant_id, creator_id=caller.user_id, canvas_id=run.canvas_id,
                         revision_id=run.revision_id, session_id=run.session_id, spec=run.spec or {})

    def _live_canvas(self, caller: Caller, canvas_id: str, field: str, *, authorized: bool = False) -> None:
        """NOT_FOUND for an unknown canvas, the policy's answer for RUN (unless `authorized` already, or a
        service principal), FAILED_PRECONDITION (CANVAS_DELETED) for a soft-deleted one."""
        canvas = self._canvases.get_canvas(canvas_id, with_dsl=False)
        if canvas is None:
            raise NotFoundError(f"canvas {canvas_id!r} ({field}) not found", resource_type="canvas",
                                resource_name=canvas_id)
        if not (authorized or caller.is_service):
            authorize(caller, Action.RUN, canvas_target(canvas))
        ensure_live(canvas)

    def get(self, caller: Caller, run_id: str) -> RunRecord:
        validation.resource_id(run_id, "id")
        run = self._runs.get(run_id)
        if run is None:
            raise NotFoundError(f"run {run_id!r} not found", resource_type="run", resource_name=run_id)
        authorize(caller, Action.READ_RUN, _target(run))
        return run

    def list(self, caller: Caller, *, statuses: list[RunStatus], lease_expired_only: bool, session_id: str,
             page_size: int, page_token: str) -> Page:
        size = validation.page_size(page_size)
        if session_id:
            validation.resource_id(session_id, "session_id")
        binding = PageTokenCodec.binding("runs", caller.tenant_id, caller.user_id, caller.is_service,
                                         sorted(s.value for s in statuses), lease_expired_only, session_id)
        after = self._tokens.decode(page_token, binding)
        if after is not None and len(after) != 2:
            raise InvalidArgumentError.for_field("page_token", "is malformed; start again without it")
        rows = self._runs.list(all_tenants=caller.is_service, tenant_id=caller.tenant_id, user_id=caller.user_id,
                               tenant_owner=not caller.is_service and caller.role is TenantRole.OWNER,
                               statuses=statuses, lease_expired_only=lease_expired_only, session_id=session_id,
                               after=after, limit=size)
        token = ""
        if len(rows) > size:
            rows = rows[:size]
            token = self._tokens.encode(binding, [rows[-1].create_time_ms, rows[-1].id])
        return Page(rows, token)

    def acquire(self, caller: Caller, run_id: str, holder: str, ttl_ms: int) -> RunLease:
        validation.resource_id(run_id, "run_id")
        return self._runs.acquire(run_id, _holder(holder), self._ttl(ttl_ms), self._check(caller, Action.WRITE_RUN))

    def renew(self, caller: Caller, run_id: str, holder: str, token: int, ttl_ms: int) -> RunLease:
        validation.resource_id(run_id, "run_id")
        return self._runs.renew(run_id, _holder(holder), _token(token), self._ttl(ttl_ms),
                                self._check(caller, Action.WRITE_RUN))

    def release(self, caller: Caller, run_id: str, token: int) -> None:
        validation.resource_id(run_id, "run_id")
        self._runs.release(run_id, _token(token), self._check(caller, Action.WRITE_RUN))

    def commit(self, caller: Caller, commit: RunCommit) -> CommitResult:
        self._validate_commit(commit)
        return self._runs.commit(commit, self._check(caller, Action.WRITE_RUN))

    def commit_many(self, caller: Caller, commits: list[RunCommit]) -> list[CommitResult | AgentCanvasError]:
        """Every commit in one transaction; an invalid or stale item gets its own error, the others are written."""
        if not commits:
            raise InvalidArgumentError.for_field("commits", "is required (at least one commit)")
        if len(commits) > MAX_COMMITS_PER_BATCH:
            raise InvalidArgumentError.for_field("commits", f"at most {MAX_COMMITS_PER_BATCH} per call")
        results: list[CommitResult | AgentCanvasError | None] = [None] * len(commits)
        valid: list[int] = []
        for index, commit in enumerate(commits):
            try:
                self._validate_commit(commit)
                valid.append(index)
            except InvalidArgumentError as exc:
                results[index] = exc  # field paths are relative to the item
        if valid:
            written = self._runs.commit_many([commits[i] for i in valid], self._check(caller, Action.WRITE_RUN))
            for index, result in zip(valid, written):
                results[index] = result
        return results  # type: ignore[return-value]

    @staticmethod
    def _validate_commit(commit: RunCommit) -> None:
        validation.resource_id(commit.run_id, "run_id")
        _token(commit.lease_token, "lease_token")
        if len(commit.events) > MAX_EVENTS_PER_COMMIT:
            raise InvalidArgumentError.for_field("events", f"at most {MAX_EVENTS_PER_COMMIT} events per commit")
        for index, event in enumerate(commit.events):
            if len(event.event_type) > MAX_EVENT_TYPE:
                raise InvalidArgumentError.for_field(f"events[{index}].event_type", f"longer than {MAX_EVENT_TYPE}")
            if len(event.payload) > MAX_EVENT_PAYLOAD:
                raise InvalidArgumentError.for_field(f"events[{index}].payload", f"larger than {MAX_EVENT_PAYLOAD} bytes")
        for index, step in enumerate(commit.steps):
            if len(step.node_id) > 255:
                raise InvalidArgumentError.for_field(f"steps[{index}].node_id", "longer than 255 characters")
            validation.json_depth(step.state, f"steps[{index}].state")
        if commit.outputs is not None:
            validation.json_depth(commit.outputs, "outputs")

    def list_steps(self, caller: Caller, run_id: str, after_step: int) -> list[RunStep]:
        self.get_summary(caller, run_id)
        return self._runs.list_steps(run_id, max(0, after_step))

    def list_events(self, caller: Caller, run_id: str, after_seq: int, page_size: int) -> list[StoredEvent]:
        size = validation.page_size(page_size, default=DEFAULT_EVENTS_PAGE, maximum=MAX_EVENTS_PAGE)
        self.get_summary(caller, run_id)
        return self._runs.events_since(run_id, max(0, after_seq), size)[0]

    def events_since(self, run_id: str, after_seq: int) -> tuple[list[StoredEvent], RunStatus | None]:
        """For WatchRunEvents after its initial authorisation."""
        return self._runs.events_since(run_id, after_seq, DEFAULT_EVENTS_PAGE)

    def request_cancel(self, caller: Caller, run_id: str) -> RunRecord:
        validation.resource_id(run_id, "id")
        return self._runs.request_cancel(run_id, self._check(caller, Action.CANCEL_RUN))

    def get_summary(self, caller: Caller, run_id: str) -> RunRecord:
        validation.resource_id(run_id, "run_id")
        run = self._runs.get(run_id, with_spec=False)
        if run is None:
            raise NotFoundError(f"run {run_id!r} not found", resource_type="run", resource_name=run_id)
        authorize(caller, Action.READ_RUN, _target(run))
        return run

    def _ttl(self, ttl_ms: int) -> int:
        if ttl_ms < 0:
            raise InvalidArgumentError.for_field("ttl_ms", "must not be negative")
        if ttl_ms > self._max_ttl:
            raise InvalidArgumentError.for_field("ttl_ms", f"must be at most {self._max_ttl} (store.max_lease_ttl_ms)")
        return ttl_ms or self._default_ttl

    @staticmethod
    def _check(caller: Caller, action: Action) -> Callable[[Target], None]:
        return lambda target: authorize(caller, action, target)


def run_spec(spec: Any, max_bytes: int) -> None:
    """What a run record must hold for an orchestrator to load it: a spec object with the canvas's DSL (an
    object with a `components` object), and, when present, `globals`/`inputs` objects and `resume_from` a
    string. A record without them would be taken over, and fail to load, on every replica in turn."""
    if not isinstance(spec, dict) or not spec:
        raise InvalidArgumentError.for_field("run.spec", "is required: an object holding the canvas's `dsl`")
    if "dsl" not in spec:
        raise InvalidArgumentError.for_field("run.spec.dsl", "is required (the canvas's DSL)")
    validate_dsl(spec["dsl"], field="run.spec.dsl", max_bytes=max_bytes)
    for key in ("globals", "inputs"):
        if key in spec and not isinstance(spec[key], dict):
            raise InvalidArgumentError.for_field(f"run.spec.{key}", "must be an object")
    for key in ("resume_from", "query", "session_id"):
        if key in spec and not isinstance(spec[key], str):
            raise InvalidArgumentError.for_field(f"run.spec.{key}", "must be a string")


def _replayable_by(caller: Caller) -> Callable[[Target], bool]:
    """A replayed request_id hands back its run only when the caller could Get that run now."""
    return lambda target: permits(caller, Action.READ_RUN, target)


def _target(run: RunRecord) -> Target:
    return Target(Kind.RUN, run.tenant_id, run.id, creator_id=run.creator_id)


def _holder(holder: str) -> str:
    if not holder:
        raise InvalidArgumentError.for_field("holder", "is required (replica identity)")
    if len(holder) > MAX_HOLDER:
        raise InvalidArgumentError.for_field("holder", f"longer than {MAX_HOLDER} characters")
    return holder


def _token(token: int, field: str = "token") -> int:
    if token <= 0:
        raise InvalidArgumentError.for_field(field, "must be the positive fencing token from AcquireRunLease")
    return token


class RunNotifier:
    """In-process wake-ups for watchers: a commit in this process wakes them at once; commits made by
    other store processes are found by polling."""

    def __init__(self) -> None:
        self._events: weakref.WeakValueDictionary[str, asyncio.Event] = weakref.WeakValueDictionary()

    def waiter(self, run_id: str) -> asyncio.Event:
        event = self._events.get(run_id)
        if event is None:
            event = asyncio.Event()
            self._events[run_id] = event
        return event

    def notify(self, run_id: str) -> None:
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()


async def watch_events(fetch: Callable[[int], Awaitable[tuple[list[StoredEvent], RunStatus | None]]],
                       notifier: RunNotifier, run_id: str, after_seq: int, poll_interval_s: float,
                       closing: asyncio.Event | None = None) -> AsyncIterator[StoredEvent]:
    """Replay events after `after_seq`, then follow new ones; stop after the terminal event (or when the
    run is finished or paused and fully replayed). When the store shuts down the stream fails with UNAVAILABLE so the
    client reattaches (with the last seq it saw) to another replica."""
    cursor = max(0, after_seq)
    while True:
        if closing is not None and closing.is_set():
            raise UnavailableError("the store is shutting down; reattach with after_seq", reason="SHUTTING_DOWN")
        wake = notifier.waiter(run_id)  # taken before reading, so a commit in between is not missed
        events, status = await fetch(cursor)
        for event in events:
            cursor = event.seq
            yield event
            if event.terminal:
                return
        if events:
            continue  # a full page may mean more is waiting
        if status is None or status.is_final or status is RunStatus.PAUSED:
            return  # caught up with a run that will not produce more events (until it is resumed)
        try:
            await asyncio.wait_for(wake.wait(), poll_interval_s)
        except TimeoutError:
            pass
