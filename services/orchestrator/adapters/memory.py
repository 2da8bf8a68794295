"""In-memory RunStore: the same contract as the canvas_store run-state RPCs, for unit tests, the
engine benchmark and single-process use. Leases are fenced exactly like the real store's."""

from __future__ import annotations

import asyncio
import copy
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from services.common.context import current_identity
from services.common.errors import AbortedError, InvalidArgumentError, NotFoundError
from services.orchestrator.core.events import Event
from services.orchestrator.core.values import plain_copy
from services.orchestrator.core.ports import (
    CommitResult, Lease, RunError, RunRecord, RunStatus, Session, Step, Usage,
)


def _now_ms() -> int:
    return int(time.time() * 1000)


_plain_copy = plain_copy


@dataclass
class _Run:
    record: RunRecord
    steps: list[Step] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    lease: Lease | None = None
    lease_counter: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class InMemoryRunStore:
    def __init__(self, clock_ms=_now_ms):
        self._runs: dict[str, _Run] = {}
        self._requests: dict[str, str] = {}
        self._sessions: dict[str, Session] = {}
        self._canvases: dict[str, dict[str, Any]] = {}
        self._clock = clock_ms

    # -- helpers for tests / embedded use ---------------------------------------------------------
    def put_canvas(self, canvas_id: str, dsl: dict[str, Any]) -> None:
        self._canvases[canvas_id] = copy.deepcopy(dsl)

    def create_session(self, canvas_id: str = "", user_id: str = "") -> Session:
        session = Session(id=secrets.token_hex(16), canvas_id=canvas_id, user_id=user_id, etag="1")
        self._sessions[session.id] = session
        return session

    def expire_lease(self, run_id: str) -> None:
        """Simulate a dead replica: its lease lapses now."""
        run = self._run(run_id)
        if run.lease:
            run.lease.expire_ms = 0

    def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        identity = current_identity()
        if run is not None and identity is not None and not identity.is_service and run.record.tenant_id \
                and run.record.tenant_id != identity.tenant_id:
            run = None  # another tenant's run: its existence must not leak (AIP-211)
        if run is None:
            raise NotFoundError(f"run {run_id} not found", resource_type="run", resource_name=run_id)
        return run

    # -- RunStore -------------------------------------------------------------------------------
    async def create_run(self, record: RunRecord, request_id: str = "") -> RunRecord:
        if request_id and request_id in self._requests:
            return self._copy(self._runs[self._requests[request_id]].record)
        # The spec is immutable once created (the core never changes it), so it is shared, not copied.
        stored = replace(record, create_time_ms=record.create_time_ms or self._clock(),
                         update_time_ms=self._clock(), status=RunStatus.PENDING)
        self._runs[record.id] = _Run(stored)
        if request_id:
            self._requests[request_id] = record.id
        return replace(stored)

    async def start_run(self, record: RunRecord, request_id: str, holder: str,
                        ttl_ms: int) -> tuple[RunRecord, Lease | None]:
        created = await self.create_run(record, request_id)
        run = self._runs[created.id]
        live = run.lease is not None and run.lease.expire_ms > self._clock()
        if created.status != RunStatus.PENDING or (live and run.lease.holder != holder):
            return created, None  # as the real store: only a run not yet started, free or already ours
        if live:
            run.lease.expire_ms = self._clock() + ttl_ms
            return created, replace(run.lease)
        return created, await self.acquire_lease(created.id, holder, ttl_ms)

    @staticmethod
    def _copy(record: RunRecord) -> RunRecord:
        return replace(record, outputs=_plain_copy(record.outputs))

    async def get_run(self, run_id: str) -> RunRecord:
        run = self._run(run_id)
        record = self._copy(run.record)
        record.last_seq = len(run.events)
        return record

    async def list_orphaned_runs(self, limit: int = 20) -> list[RunRecord]:
        now = self._clock()
        found = [
            self._copy(r.record) for r in self._runs.values()
            if r.record.status in (RunStatus.PENDING, RunStatus.RUNNING) and (r.lease is None or r.lease.expire_ms <= now)
        ]
        return found[:limit]

    async def acquire_lease(self, run_id: str, holder: str, ttl_ms: int) -> Lease:
        run = self._run(run_id)
        now = self._clock()
        if run.record.status.final:
            raise AbortedError(f"run {run_id} already ended", reason="RUN_ENDED")
        if run.lease is not None and run.lease.expire_ms > now and run.lease.holder != holder:
            raise AbortedError(f"run {run_id} is leased by another replica", reason="LEASE_HELD")
        run.lease_counter += 1
        run.lease = Lease(run_id, holder, run.lease_counter, now + ttl_ms, run.record.cancel_requested)
        # Leasing does not change the status (as the real store): the run's first commit moves it to RUNNING.
        return replace(run.lease)

    def _check_lease(self, run: _Run, token: int) -> None:
        if run.lease is None or run.lease.token != token:
            raise AbortedError(f"lease {token} on run {run.record.id} is no longer valid", reason="LEASE_LOST")

    async def renew_lease(self, run_id: str, holder: str, token: int, ttl_ms: int) -> Lease:
        run = self._run(run_id)
        self._check_lease(run, token)
        assert run.lease is not None
        if run.lease.expire_ms <= self._clock():
            raise AbortedError(f"lease {token} on run {run_id} expired", reason="LEASE_LOST")
        run.lease.expire_ms = self._clock() + ttl_ms
        run.lease.cancel_requested = run.record.cancel_requested
        return replace(run.lease)

    async def release_lease(self, run_id: str, token: int) -> None:
        run = self._run(run_id)
        if run.lease is not None and run.lease.token == token:
            run.lease.expire_ms = 0

    async def commit(self, run_id: str, lease_token: int, steps: Sequence[Step], events: Sequence[Event], *,
                     status: RunStatus = RunStatus.UNSPECIFIED, outputs: dict[str, Any] | None = None,
                     error: RunError | None = None, usage: Usage | None = None) -> CommitResult:
        run = self._run(run_id)
        self._check_lease(run, lease_token)
        if run.record.status.final:  # a PAUSED run may be written (e.g. cancelled), as in the real store
            raise AbortedError(f"run {run_id} already ended", reason="RUN_ENDED")
        for step in steps:
            # Committed data is immutable by contract (the core never touches it again), so it is kept
            # by reference; readers get copies of steps.
            run.steps.append(Step(step.node_id, step.state, step.attempt, len(run.steps) + 1))
        first = len(run.events) + 1 if events else 0
        for event in events:
            event.seq = len(run.events) + 1
            run.events.append(Event(event.kind, event.data, event.created_at_ms, event.seq))
        if status != RunStatus.UNSPECIFIED:
            run.record.status = status
        if outputs is not None:
            run.record.outputs = copy.deepcopy(outputs)
        if error is not None:
            run.record.error = error
        if usage is not None:
            run.record.usage = Usage.from_dict(usage.to_dict())
        run.record.last_seq = len(run.events)
        run.record.update_time_ms = self._clock()
        run.changed.set()  # wake every watcher; each waits on a fresh Event afterwards
        run.changed = asyncio.Event()
        return CommitResult(first, len(run.events), run.record.cancel_requested)

    async def list_steps(self, run_id: str, after_step: int = 0) -> list[Step]:
        return [Step(s.node_id, _plain_copy(s.state), s.attempt, s.step_index) for s in self._run(run_id).steps if s.step_index > after_step]

    async def list_events(self, run_id: str, after_seq: int = 0, limit: int = 500) -> list[Event]:
        if after_seq < 0:
            raise InvalidArgumentError.for_field("after_seq", "must be >= 0")
        return [copy.deepcopy(e) for e in self._run(run_id).events[after_seq:after_seq + limit]]

    async def watch_events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        run = self._run(run_id)
        if after_seq < 0:
            raise InvalidArgumentError.for_field("after_seq", "must be >= 0")
        seq = after_seq
        while True:
            while seq < len(run.events):
                event = run.events[seq]
                seq += 1
                yield event  # persisted events are immutable; readers must not modify them
                if event.terminal:
                    return
            if len(run.events) <= seq:
                await run.changed.wait()

    async def request_cancel(self, run_id: str) -> RunRecord:
        run = self._run(run_id)
        if not run.record.status.final:  # PAUSED too: a paused run that is cancelled is never resumed
            run.record.cancel_requested = True
        return await self.get_run(run_id)

    async def get_session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFoundError(f"session {session_id} not found", resource_type="session", resource_name=session_id)
        return copy.deepcopy(session)

    async def append_session_turn(self, session_id: str, messages: list[dict[str, Any]], state: dict[str, Any],
                                  etag: str = "") -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFoundError(f"session {session_id} not found", resource_type="session", resource_name=session_id)
        if etag and etag != session.etag:
            raise AbortedError("session changed concurrently", reason="STALE_ETAG")
        session.history.extend(copy.deepcopy(messages))
        session.state = copy.deepcopy(state)
        session.conversation_turns += 1
        session.etag = str(int(session.etag or "0") + 1)
        return copy.deepcopy(session)

    async def get_canvas_dsl(self, canvas_id: str, revision_id: str = "") -> tuple[dict[str, Any], str]:
        if canvas_id not in self._canvases:
            raise NotFoundError(f"canvas {canvas_id} not found", resource_type="canvas", resource_name=canvas_id)
        return copy.deepcopy(self._canvases[canvas_id]), revision_id or "head"
