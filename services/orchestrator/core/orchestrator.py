"""The Orchestrator facade: run, reattach, cancel, inspect, validate; plus lease takeover."""

from __future__ import annotations

import asyncio
import copy
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from services.common.context import deadline_var, new_trace_id, token_var, trace_id_var
from services.common.errors import (AbortedError, AgentCanvasError, FailedPreconditionError, InvalidArgumentError,
                                    ResourceExhaustedError, ViolationCollector)
from services.common.lru import LRU
from services.orchestrator.core import sessions, telemetry, text_delivery
from services.orchestrator.core.admission import Admission, InMemorySlots
from services.orchestrator.core.components.begin import missing_required_inputs
from services.orchestrator.core.context import Services
from services.orchestrator.core.dsl.loader import LoadResult
from services.orchestrator.core.dsl.model import CanvasSpec
from services.orchestrator.core.dsl.validate import check_mcp_servers, load_for_run, validate
from services.orchestrator.core.events import WORKFLOW_FINISHED, WORKFLOW_STARTED, Event
from services.orchestrator.core.feed import RunFeed
from services.orchestrator.core.loop import LoopSettings, RunLoop
from services.orchestrator.core.ports import RunError, RunRecord, RunStatus, RunStore, Step, acting_as
from services.orchestrator.core.run_request import RunRequest, file_value

logger = logging.getLogger(__name__)

# Attempts to lease a paused run that is being cancelled while its holder still hands its lease back
# (backoff 50 ms doubling: about 1.5 s in all).
_CANCEL_LEASE_ATTEMPTS = 5


_TURN_ATTEMPTS = 4


class _TurnMovedOn(Exception):
    """The session's turn key was held by a run that has ended: start the run again, past that run
    (`unrecorded_run_id`) when it never recorded its turn."""

    def __init__(self, unrecorded_run_id: str):
        super().__init__(unrecorded_run_id)
        self.unrecorded_run_id = unrecorded_run_id


# Inline canvases loaded and validated, by RunRequest.dsl_key (least recently used dropped first):
# the one cache of inline DSLs. Every run of a client that inlines its DSL would otherwise decode,
# parse and validate it again (~0.2 ms, the largest Python cost of starting a run). A loaded
# CanvasSpec is read-only to runs (components copy params before changing them), so runs share it;
# the tool context it is checked against is fixed per process. Only valid canvases are kept: a bad
# DSL is reported afresh every time. Only DSLs whose key is at most CACHEABLE_DSL_BYTES are kept:
# 128 of the largest allowed DSLs would pin gigabytes; a larger one is loaded per run.
CANVAS_CACHE_SIZE = 128
CACHEABLE_DSL_BYTES = 256 * 1024


def _check_begin_inputs(canvas: CanvasSpec, spec: dict[str, Any]) -> None:
    """Required Begin inputs (`optional: false`) must be answered by the run's inputs, the query
    shortcut or the field's default value: INVALID_ARGUMENT `inputs.<name>` for every missing one.
    Checked when a conversation starts (a run without a session, or a session's first turn); a
    resume or a later turn of the session is not asked for them again."""
    begin = canvas.nodes.get(canvas.begin_id)
    if begin is None:
        return
    problems = ViolationCollector()
    for name, description in missing_required_inputs(begin.params, spec.get("inputs"), spec["globals"].get("sys.query")):
        problems.add(f"inputs.{name}", description)
    problems.raise_if_any("required Begin inputs are missing")


@contextmanager
def _request_field(name: str) -> Iterator[None]:
    """A malformed id refused by the store names the request's field, not the store's (`id`)."""
    try:
        yield
    except InvalidArgumentError as exc:
        raise InvalidArgumentError.for_field(
            name, exc.violations[0].description if exc.violations else exc.message) from None


async def _each(batches: AsyncIterator[list[Event]]) -> AsyncIterator[Event]:
    async for batch in batches:
        for event in batch:
            yield event


class Orchestrator:
    def __init__(self, store: RunStore, services: Services, settings: LoopSettings, *, takeover_interval_s: float = 2.0,
                 admission: Admission | None = None):
        self.store = store
        self.admission = admission or Admission(InMemorySlots(), limit=0)
        self.services = services
        self.settings = settings
        self.loop = RunLoop(store, services, settings)
        self.takeover_interval_s = takeover_interval_s
        self._runs: dict[str, asyncio.Task] = {}
        self._cancels: dict[str, asyncio.Event] = {}
        self._leases: dict[str, int] = {}
        self._feeds: dict[str, RunFeed] = {}
        self._claiming: set[str] = set()  # runs between their lease and their task (see _claim)
        self._canvases: LRU[bytes, CanvasSpec] = LRU(CANVAS_CACHE_SIZE)
        self._reaper: asyncio.Task | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self, *, takeover: bool = True) -> None:
        if takeover and self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_forever())
        self.admission.start()

    async def stop(self, grace: float = 0.0) -> None:
        """Stop taking work; give running runs `grace` seconds, then abandon them (their leases expire
        and another replica continues them)."""
        if self._reaper:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
            self._reaper = None
        running = {run_id: t for run_id, t in self._runs.items() if not t.done()}
        if running and grace > 0:
            await asyncio.wait(running.values(), timeout=grace)
        abandoned = {run_id: self._leases.get(run_id) for run_id, t in running.items() if not t.done()}
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        for run_id, token in abandoned.items():
            if token is None:
                continue
            try:  # hand the run over at once instead of waiting for the lease to lapse
                await self.store.release_lease(run_id, token)
            except AgentCanvasError as exc:
                logger.info("run %s: could not release the lease: %s", run_id, exc.message)
        await self.admission.close()

    # -- RPC operations -------------------------------------------------------------------------
    async def validate(self, dsl: dict[str, Any] | None, canvas_id: str = "") -> LoadResult:
        if dsl is None:
            dsl, _ = await self.store.get_canvas_dsl(canvas_id)
        result = validate(dsl, self._tool_context())
        await check_mcp_servers(result, self._tool_context())
        return result

    def _tool_context(self):
        return self.services.tools.context() if self.services.tools is not None else None

    async def start_run(self, request: RunRequest, tenant_id: str = "", user_id: str = "") -> RunRecord:
        passed_over: list[str] = []
        contested = 0
        while True:
            try:
                return await self._start_run(request, tenant_id, user_id, passed_over)
            except _TurnMovedOn as moved:
                # Moving past a run that ended without its turn is progress (there are finitely many such runs),
                # so only the races that gain nothing count against the attempts: else runs that ended unrecorded
                # (cancelled while pending, unloadable) would block the session's next message for good.
                if moved.unrecorded_run_id and moved.unrecorded_run_id not in passed_over:
                    passed_over.append(moved.unrecorded_run_id)
                    continue
                contested += 1
                if contested >= _TURN_ATTEMPTS:
                    raise AbortedError(f"session {request.session_id}: its turns keep changing; retry",
                                       reason="TURN_IN_PROGRESS") from None

    async def _start_run(self, request: RunRequest, tenant_id: str, user_id: str, passed_over: list[str]) -> RunRecord:
        session = None
        previous: RunRecord | None = None
        session_id = request.session_id
        if request.resume_run_id:
            with _request_field("resume_run_id"):
                previous = await self.store.get_run(request.resume_run_id)  # NOT_FOUND, also for another tenant's
            if session_id and session_id != previous.session_id:
                raise InvalidArgumentError.for_field("resume_run_id", f"run {previous.id} belongs to "
                                                     f"{'session ' + previous.session_id if previous.session_id else 'no session'}, not to session {session_id}")
            session_id = previous.session_id
        if session_id:
            with _request_field("session_id"):
                session = await self.store.get_session(session_id)
            done = session.state.get("last_run_id")
            if request.request_id and done and session.state.get("last_request_id") == request.request_id:
                return await self.store.get_run(done)  # a retry of a turn that already ended: reattach
            paused = session.state.get("paused_run_id") or ""
            if previous is not None and paused != previous.id:
                raise FailedPreconditionError(
                    f"run {previous.id} is not the paused run of session {session_id} any more "
                    f"({'it waits on run ' + paused if paused else 'nothing is paused'}); resume that one",
                    reason="NOT_PAUSED", metadata={"run_id": previous.id, "paused_run_id": paused})
            if paused and previous is None:
                previous = await self.store.get_run(paused)
                if previous.status in (RunStatus.PENDING, RunStatus.RUNNING):
                    # Its turn is written but its terminal commit is not (or it crashed in between and
                    # waits for a takeover): resuming now would start the conversation over.
                    raise AbortedError(f"session {session_id}: run {paused} is still finishing its turn; retry",
                                       reason="TURN_IN_PROGRESS", metadata={"run_id": paused})
                if previous.status != RunStatus.PAUSED:
                    previous = None
        if previous is not None and previous.status == RunStatus.PAUSED and previous.cancel_requested:
            # Cancelled while paused (its end may not be written yet if that CancelRun lost a race):
            # it is never resumed. A session's next message then starts afresh, as after any end.
            previous = await self._end_paused(previous)
            if not request.resume_run_id:
                previous = None
            elif previous.status == RunStatus.PAUSED:
                raise FailedPreconditionError(f"run {previous.id} was cancelled: it cannot be resumed",
                                              reason="NOT_PAUSED", metadata={"run_id": previous.id})
        if previous is not None and previous.status != RunStatus.PAUSED:
            raise FailedPreconditionError(
                f"run {previous.id} is {previous.status.name}, not PAUSED: only a paused run can be resumed",
                reason="NOT_PAUSED", metadata={"run_id": previous.id})
        if previous is not None:  # its own DSL: a request naming another canvas is refused
            canvas_id, revision_id = previous.canvas_id, previous.revision_id
            canvas = load_for_run(previous.spec["dsl"], self._tool_context())
            self._check_resume_source(request, previous, canvas)
        elif request.dsl is not None or request.decode_dsl is not None:
            canvas_id, revision_id = "", ""
            canvas = self._inline_canvas(request)
        elif request.canvas_id or (session and session.canvas_id):
            canvas_id = request.canvas_id or session.canvas_id
            pinned = session.revision_id if session and session.canvas_id == canvas_id else ""
            dsl, revision_id = await self.store.get_canvas_dsl(canvas_id, request.revision_id or pinned)
            canvas = load_for_run(dsl, self._tool_context())
        else:
            raise InvalidArgumentError.for_field("source", "give a canvas_id, an inline dsl or a session_id")
        pending = None
        if previous is not None:
            pending = list(session.state.get("pending") or []) if session else \
                await sessions.paused_components(self.store, previous)
        spec = self._spec(canvas, request, session, previous, pending)
        if previous is None and (session is None or not session.conversation_turns):
            _check_begin_inputs(canvas, spec)  # a conversation's first run: before anything exists or runs
        record = RunRecord(id=secrets.token_hex(16), spec=spec, canvas_id=canvas_id, revision_id=revision_id,
                           session_id=session_id, tenant_id=tenant_id, creator_id=user_id,
                           create_time_ms=int(time.time() * 1000))
        spec["trace_id"] = trace_id_var.get() or new_trace_id()
        # The one continuation of a paused run is created under a key derived from that run: the
        # store's unique key decides which of two concurrent resumes proceeds (sessions.py).
        # A session's new turn likewise, under a key naming the session's turn count: turns are serialised.
        if previous is not None:
            key = sessions.resume_request_id(previous.id)
        elif session is not None:
            key = sessions.turn_request_id(session.id, session.conversation_turns, passed_over)
            spec["turn_claim"] = secrets.token_hex(8)
        else:
            key = request.request_id
        try:
            await self.admission.admit(tenant_id, record.id)  # RESOURCE_EXHAUSTED before any record exists
        except ResourceExhaustedError:
            telemetry.ADMISSION_REJECTED.inc()
            raise
        try:
            # The record and its first lease in one store call: a fresh run needs no AcquireRunLease.
            created, lease = await self.store.start_run(record, key, self.settings.holder, self.settings.lease_ttl_ms)
        except BaseException:
            await self.admission.release(tenant_id, record.id)
            raise
        claim = "resume_claim" if previous is not None else "turn_claim" if session is not None else ""
        if claim and created.spec.get(claim) != spec[claim]:
            if not (request.request_id and created.spec.get("request_id") == request.request_id):
                await self.admission.release(tenant_id, record.id)
                if lease is not None:  # we hold the concurrent turn's lease (it was still free): drive it
                    try:
                        await self._claim(created, None, lease)
                    except AgentCanvasError as exc:  # the lease lapses and a takeover drives it
                        logger.warning("run %s: not claimed: %s", created.id, exc.message)
                if previous is None:
                    await self._turn_taken(session, created)
                raise AbortedError(
                    f"run {previous.id} was already resumed by run {created.id} (a concurrent turn); this "
                    "turn was not applied: follow that run, then send the message again",
                    reason="ALREADY_RESUMED", metadata={"run_id": created.id, "paused_run_id": previous.id})
            # else: a retry of the request that created it: reattach as for any request_id
        fresh = created.status == RunStatus.PENDING
        # The store assigns the run id: the provisional slot moves to it. A retried request that
        # reattached to a run already under way keeps that run's own slot.
        await self.admission.rename(tenant_id, record.id, created.id if fresh else "")
        if fresh:
            telemetry.RUNS_STARTED.labels("resume" if previous is not None else "new").inc()
            # The store names the run; it is the one made from this request (not an earlier run of
            # the same request_id) when its spec is ours, and then the canvas loaded above is its canvas.
            ours = created.spec is spec or created.spec == spec
            if lease is None or not await self._claim(created, canvas if ours else None, lease):
                self.admission.forget(created.id)  # not ours to renew: whoever claims it adopts it
        return created

    async def _turn_taken(self, session, holder: RunRecord) -> None:
        """Another run holds this session turn's key. Still running: this message is refused (ABORTED,
        TURN_IN_PROGRESS). Ended or paused: either its turn was recorded since the session was read (start
        again from the session as it is now) or it never will be (start again past it)."""
        if holder.status in (RunStatus.PENDING, RunStatus.RUNNING):
            raise AbortedError(f"session {session.id}: run {holder.id} is still answering the previous message; "
                               "this one was not applied: send it again when that run has finished",
                               reason="TURN_IN_PROGRESS", metadata={"run_id": holder.id})
        current = await self.store.get_session(session.id)
        raise _TurnMovedOn(holder.id if current.conversation_turns == session.conversation_turns else "")

    def _check_resume_source(self, request: RunRequest, previous: RunRecord, canvas: CanvasSpec) -> None:
        """A resume continues the paused run on its own canvas. A request that also names a canvas
        must name that one (the same canvas_id, or the same inline DSL), else it is refused rather
        than silently running another canvas than the client asked for."""
        paused = f"run {previous.id} is paused on " + (f"canvas {previous.canvas_id}" if previous.canvas_id else "an inline DSL")
        if request.canvas_id and request.canvas_id != previous.canvas_id:
            raise InvalidArgumentError.for_field(
                "canvas_id", f"{paused}, not on canvas {request.canvas_id}: give that canvas_id or none to resume it")
        if request.revision_id and request.revision_id not in ("latest", "published") and previous.revision_id \
                and request.revision_id != previous.revision_id:
            raise InvalidArgumentError.for_field(
                "revision_id", f"{paused} at revision {previous.revision_id}, not {request.revision_id}: "
                "a resume continues the revision it started on")
        if request.dsl is None and request.decode_dsl is None:
            return
        if previous.canvas_id:
            raise InvalidArgumentError.for_field("dsl", f"{paused}: resume it without an inline DSL (or with canvas_id)")
        if self._inline_canvas(request).dsl != canvas.dsl:
            raise InvalidArgumentError.for_field("dsl", f"{paused} that differs from the DSL sent: resume it without "
                                                 "a DSL, or with the same one")

    def _inline_canvas(self, request: RunRequest) -> CanvasSpec:
        key = request.dsl_key if len(request.dsl_key) <= CACHEABLE_DSL_BYTES else b""
        canvas = self._canvases.hit(key) if key else None
        if canvas is not None:
            return canvas
        dsl = request.dsl if request.dsl is not None else request.decode_dsl()
        canvas = load_for_run(dsl, self._tool_context())  # raises for a bad DSL: nothing cached
        return self._canvases.keep(key, canvas) if key else canvas

    def _spec(self, canvas, request: RunRequest, session, previous: RunRecord | None,
              pending: list[str] | None) -> dict[str, Any]:
        base_globals = copy.deepcopy(previous.spec["globals"]) if previous else copy.deepcopy(canvas.globals)
        history = list((session.state.get("history") if session else None) or [])
        if session:
            base_globals.update((session.state.get("env") or {}) if not previous else {})
        if session:
            turns = session.conversation_turns + 1
        else:  # a run without a session counts its own resumes
            turns = int((previous.spec["globals"].get("sys.conversation_turns") or 0) if previous else 0) + 1
        globals_ = base_globals
        if request.query or not previous:
            globals_["sys.query"] = request.query or globals_.get("sys.query", "")
        if request.user_id:
            globals_["sys.user_id"] = request.user_id
        globals_["sys.files"] = [file_value(f) for f in request.files]  # files belong to this turn only, never to the next
        globals_["sys.conversation_turns"] = turns
        globals_["sys.history"] = sessions.history_lines(history + ([{"role": "user", "content": request.query}] if request.query else []))[-self.settings.history_window:]
        globals_["sys.date"] = time.strftime("%Y-%m-%d %H:%M:%S")
        spec: dict[str, Any] = {
            "dsl": canvas.dsl, "globals": globals_, "query": request.query, "inputs": dict(request.inputs),
            "user_id": request.user_id, "history": history, "session_id": session.id if session else "",
            "request_id": request.request_id,
        }
        if request.webhook_payload is not None:
            spec["webhook_payload"] = request.webhook_payload
        if previous is not None:
            spec.update(resume_from=previous.id, resume_pending=list(pending or []),
                        resume_inputs=dict(request.inputs), seed=previous.spec.get("seed", previous.id),
                        resume_claim=secrets.token_hex(8))  # tells our continuation from a concurrent one
        return spec

    def stream_batches(self, run_id: str, after_seq: int = 0, *, confirmed_text: bool = False) -> AsyncIterator[list[Event]]:
        """Persisted events after `after_seq`, then new ones, up to the terminal one, grouped as they
        were committed (one batch per store commit while followed locally, one event per batch from the
        store). A run executing here is followed through its local feed (taken now, so a run that ends
        before the caller iterates is still served), anything else through the store. `confirmed_text`:
        TEXT_DELIVERY_CONFIRMED (core/text_delivery.py)."""
        batches = self._follow(self._feeds.get(run_id), run_id, after_seq)
        return text_delivery.confirmed(batches) if confirmed_text else batches

    def stream_events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """stream_batches one event at a time (the feed is taken now, as there)."""
        return _each(self.stream_batches(run_id, after_seq))

    async def _follow(self, feed: RunFeed | None, run_id: str, after_seq: int) -> AsyncIterator[list[Event]]:
        last = after_seq
        if feed is not None:
            async for batch in feed.follow(after_seq):
                yield batch
                last = batch[-1].seq
                if batch[-1].terminal:
                    return
        # Not (or no longer) written here: the store has every persisted event after `last`.
        async for event in self.store.watch_events(run_id, last):
            yield [event]

    async def cancel(self, run_id: str) -> RunRecord:
        with _request_field("run_id"):
            record = await self.store.request_cancel(run_id)
        local = self._cancels.get(run_id)
        if local is not None:
            local.set()  # executed here: stop now; elsewhere the owner learns it from its heartbeat
        if record.status == RunStatus.PAUSED:
            # Nobody executes a paused run, so nobody would act on the flag: end it here.
            record = await self._end_paused(record)
        elif record.status == RunStatus.PENDING and local is None:
            # Created but not started: a holder sees the flag on its next renew, but a run nobody holds
            # (its creator died before leasing it, or it was created without a lease) would wait for a
            # takeover. End it here when its lease is free.
            record = await self._end_paused(record)
        return record

    async def _end_paused(self, record: RunRecord) -> RunRecord:
        """End a PAUSED (or a PENDING, unheld) run whose cancel was requested: lease it, append WorkflowFinished(CANCELLED)
        after its pause and write the status, in one commit. Its resume is refused from the moment
        the flag is set (start_run), so this only makes the end durable and visible. A lease still
        held (the replica that paused it has not handed it back yet) is waited for a little; a run
        left PAUSED with its flag set is still never resumed and is ended by the next attempt."""
        for attempt in range(_CANCEL_LEASE_ATTEMPTS):
            task = self._runs.get(record.id)
            if task is not None:  # paused here a moment ago and still handing its lease back
                await asyncio.gather(asyncio.shield(task), return_exceptions=True)
            try:
                lease = await self.store.acquire_lease(record.id, self.settings.holder, self.settings.lease_ttl_ms)
                break
            except FailedPreconditionError:
                return await self.store.get_run(record.id)  # it already ended
            except AbortedError as exc:
                if exc.reason == "RUN_ENDED" or record.status == RunStatus.PENDING:
                    return await self.store.get_run(record.id)  # (a PENDING run's holder sees the flag)
                await asyncio.sleep(0.05 * 2 ** attempt)  # held: its holder releases it after the pause
        else:
            logger.warning("run %s: cancelled while paused, but its lease is held; it stays PAUSED (never resumed)",
                           record.id)
            return await self.store.get_run(record.id)
        current = await self.store.get_run(record.id)
        if current.status != record.status:  # not expected: the lease fences every writer out
            await self._release_quietly(record.id, lease.token)
            return current
        paused = current.status == RunStatus.PAUSED
        error = RunError("CANCELLED", "the run was cancelled while paused" if paused else "the run was cancelled before it started")
        finished = {"status": int(RunStatus.CANCELLED), "outputs": current.outputs, "usage": current.usage.to_dict(),
                    "elapsed_ms": max(0, int(time.time() * 1000) - current.create_time_ms) if current.create_time_ms else 0,
                    "error": error.to_dict()}
        steps, events = [], [Event(WORKFLOW_FINISHED, finished)]
        if not current.last_seq:  # a run that never started: its log still opens with WorkflowStarted
            steps = [Step("", {"kind": "started"})]
            events.insert(0, Event(WORKFLOW_STARTED, {"inputs": {}, "canvas_id": current.canvas_id,
                                                      "revision_id": current.revision_id, "resumed": False, "query": ""}))
        try:
            await self.store.commit(record.id, lease.token, steps, events, status=RunStatus.CANCELLED, error=error)
        except (AbortedError, FailedPreconditionError) as exc:
            logger.info("run %s: not ended as cancelled: %s", record.id, exc.message)
        else:
            telemetry.RUNS_FINISHED.labels(RunStatus.CANCELLED.name).inc()
        return await self.store.get_run(record.id)

    async def _release_quietly(self, run_id: str, token: int) -> None:
        try:
            await self.store.release_lease(run_id, token)
        except AgentCanvasError as exc:
            logger.info("run %s: could not release the lease: %s", run_id, exc.message)

    async def get_run(self, run_id: str) -> RunRecord:
        with _request_field("run_id"):
            return await self.store.get_run(run_id)

    async def reattach(self, run_id: str, after_seq: int) -> RunRecord:
        """The run a client follows again from `after_seq` (the last seq it has)."""
        if after_seq < 0:
            raise InvalidArgumentError.for_field("after_seq", "must be >= 0")
        record = await self.get_run(run_id)
        if after_seq > record.last_seq:
            # Every seq a client was sent is persisted first, so this one was never sent: following from
            # it would wait for events that may never come and end without a terminal event.
            raise InvalidArgumentError.for_field(
                "after_seq", f"{after_seq} is past the run's last event (seq {record.last_seq})")
        return record

    # -- execution and takeover -----------------------------------------------------------------
    async def _claim(self, record: RunRecord, canvas=None, lease=None) -> bool:
        if lease is None:
            try:
                lease = await self.store.acquire_lease(record.id, self.settings.holder, self.settings.lease_ttl_ms)
            except (AbortedError, FailedPreconditionError):
                return False  # another replica holds it, or it already ended
        elif record.id in self._runs or record.id in self._claiming:
            return False  # the lease start_run handed back is this replica's own: the run is driven here already
        self._claiming.add(record.id)  # no await between the check above and this
        try:
            full = record if record.spec.get("dsl") else await self.store.get_run(record.id)
            await self.admission.adopt(full.tenant_id, full.id)
        finally:
            self._claiming.discard(record.id)
        cancel = asyncio.Event()
        feed = RunFeed()
        task = asyncio.create_task(self._drive(full, lease, cancel, canvas, feed))
        self._runs[record.id] = task
        self._cancels[record.id] = cancel
        self._leases[record.id] = lease.token
        self._feeds[record.id] = feed

        def forget(_task: asyncio.Task, run_id: str = record.id) -> None:
            self._runs.pop(run_id, None)
            self._cancels.pop(run_id, None)
            self._leases.pop(run_id, None)
            self._feeds.pop(run_id, None)
            feed.close()  # also when the task was cancelled before it started

        task.add_done_callback(forget)
        return True

    async def _drive(self, record: RunRecord, lease, cancel: asyncio.Event, canvas=None, feed: RunFeed | None = None) -> None:
        deadline_var.set(None)  # the run outlives the RPC that started it
        if record.tenant_id and not token_var.get():
            # A takeover runs outside any RPC: the service token acts on behalf of the run's creator.
            acting_as.set(f"{record.tenant_id}/{record.creator_id}")
        if not trace_id_var.get() and record.spec.get("trace_id"):
            trace_id_var.set(str(record.spec["trace_id"]))  # logs of a takeover carry the run's trace id
        status = None
        released = False

        async def release_slot() -> None:
            # Ends or pauses here: free the tenant's slot before the terminal event is visible, so a
            # client that starts its next run on seeing WorkflowFinished is not refused.
            nonlocal released
            released = True
            try:
                await self.admission.release(record.tenant_id, record.id)
            except AgentCanvasError as exc:
                logger.warning("run %s: admission slot not released: %s", record.id, exc.message)

        try:
            with telemetry.run_span(record) as run_trace:
                status = await self.loop.drive(record, lease, cancel, canvas, before_finish=release_slot, feed=feed)
                run_trace.set_attribute("run.status", status.name if status is not None else "ABANDONED")
        except (AgentCanvasError, FailedPreconditionError) as exc:
            logger.error("run %s stopped: %s", record.id, exc.message)
        except Exception:  # a bug: log it now (the task is not awaited) and let the lease lapse for a takeover
            logger.exception("run %s crashed", record.id)
        finally:
            if not released:  # abandoned or lease lost: the next owner adopts the slot
                self.admission.forget(record.id)
        if status is not None:
            telemetry.RUNS_FINISHED.labels(status.name).inc()

    async def reap_once(self) -> int:
        """Take over runs whose lease expired (their replica died). Returns how many were claimed."""
        claimed = 0
        now_ms = time.time() * 1000
        for record in await self.store.list_orphaned_runs():
            if record.id in self._runs:
                continue
            if (record.status == RunStatus.PENDING and not record.last_seq
                    and now_ms - record.create_time_ms < self.settings.lease_ttl_ms):
                # Just created, nothing written: its RunCanvas is about to lease it (CreateRunRecord and
                # AcquireRunLease are two calls). Taking it here would run it away from its caller's
                # identity; a creator that died before writing anything leaves it for one lease TTL
                # after creation, like a lapsed lease. A run with events is taken at once.
                continue
            if await self._claim(record):
                logger.info("took over run %s", record.id)
                telemetry.RUNS_TAKEN_OVER.inc()
                claimed += 1
        return claimed

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.takeover_interval_s)
            try:
                await self.reap_once()
            except AgentCanvasError as exc:
                logger.warning("takeover scan failed: %s", exc.message)

    async def wait_idle(self) -> None:
        """Tests and shutdown: wait for the runs this replica executes."""
        while self._runs:
            await asyncio.gather(*list(self._runs.values()), return_exceptions=True)
