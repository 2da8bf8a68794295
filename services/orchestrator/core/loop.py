"""A run's lifecycle on one replica: rebuild from the journal, lease heartbeat, execute, finish.

Every run ends with exactly one WorkflowFinished (SUCCEEDED, FAILED, CANCELLED or PAUSED) unless the
lease is lost, in which case the replica that took the run over writes it. Nothing is written after
an asyncio cancellation (process shutdown or crash simulation): the lease simply expires.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from services.common.errors import AbortedError, AgentCanvasError, InvalidArgumentError
from services.orchestrator.core import events as ev
from services.orchestrator.core import sessions
from services.orchestrator.core.context import Services
from services.orchestrator.core.dsl.model import CanvasSpec
from services.orchestrator.core.dsl.validate import load_for_run
from services.orchestrator.core.feed import RunFeed
from services.orchestrator.core.journal import Journal, JournalFailed
from services.orchestrator.core.ports import Lease, RunError, RunRecord, RunStatus, RunStore, Step, Usage
from services.orchestrator.core.runner import Execution, Limits, RunFailed, RunPaused
from services.orchestrator.core.state import RunState
from services.orchestrator.core.values import json_copy

logger = logging.getLogger(__name__)


UNLOADABLE_REASON = "RUN_SPEC_INVALID"
"""ErrorDetail.reason of a run that cannot be loaded (its spec holds no valid canvas)."""


class UnloadableRun(Exception):
    """The run record's spec cannot be executed; the message says why."""


@dataclass(frozen=True)
class LoopSettings:
    holder: str
    lease_ttl_ms: int = 15_000
    flush_interval_s: float = 0.02
    history_window: int = 50
    cancel_poll_s: float = 1.0
    limits: Limits = field(default_factory=Limits)


@dataclass
class Rebuilt:
    replay: dict[str, dict[str, Any]]
    started: bool
    usage: Usage
    interrupted: dict[str, int] = field(default_factory=dict)
    """Attempts of nodes that had started, but not finished, when the previous holder stopped."""
    streamed: set[str] = field(default_factory=set)
    """Of those, the nodes whose interrupted attempt had streamed text."""
    base_cancelled: bool = False
    """The paused run this run continues was cancelled (a CancelRun that raced with this resume)."""


async def _interrupted_attempts(store: RunStore, run_id: str) -> tuple[dict[str, int], set[str]]:
    """From the persisted log, read only on a takeover: per node, the NodeStarted events without a later
    NodeFinished (so that a node started again continues its attempt count: side effects are keyed by
    run, node and attempt), and the nodes whose interrupted attempt had streamed text (its new attempt
    is announced by MessageReset, so that clients drop that text)."""
    open_attempts: dict[str, int] = {}
    streamed: set[str] = set()
    after = 0
    while True:
        page = await store.list_events(run_id, after)
        for event in page:
            node_id = event.data.get("component_id", "")
            if event.kind == ev.NODE_STARTED:
                open_attempts[node_id] = open_attempts.get(node_id, 0) + 1
                streamed.discard(node_id)
            elif event.kind == ev.NODE_FINISHED:
                open_attempts.pop(node_id, None)
                streamed.discard(node_id)
            elif event.kind in ev.TEXT_KINDS and node_id in open_attempts:
                streamed.add(node_id)
        if not page:
            return open_attempts, streamed
        after = page[-1].seq


async def rebuild(store: RunStore, record: RunRecord, *, fresh: bool = False) -> Rebuilt:
    """Journal of this run plus, for a resumed run, the journal chain of the runs it continues.
    `fresh`: this replica holds the run's first lease ever (token 1). Every commit is fenced by a
    lease token, so no step of this run exists yet and reading them is skipped."""
    replay: dict[str, dict[str, Any]] = {}
    chain: list[str] = []
    base = record.spec.get("resume_from") or ""
    base_cancelled = False
    while base and base not in chain:
        chain.append(base)
        base_record = await store.get_run(base)
        if len(chain) == 1:  # the paused run this one continues
            base_cancelled = base_record.cancel_requested or base_record.status == RunStatus.CANCELLED
        base = base_record.spec.get("resume_from") or ""
    for run_id in reversed(chain):
        for step in await store.list_steps(run_id):
            if step.state.get("key") and not step.state.get("failed"):
                replay[step.state["key"]] = {**step.state, "answer": None}
    started = False
    usage = Usage()
    for step in (await store.list_steps(record.id)) if not fresh else ():
        if step.state.get("kind") == "started":
            started = True
        elif step.state.get("key") and not step.state.get("failed"):
            replay[step.state["key"]] = step.state
            if step.state.get("usage"):
                usage.add(Usage.from_dict(step.state["usage"]))
    interrupted, streamed = await _interrupted_attempts(store, record.id) if started else ({}, set())
    return Rebuilt(replay, started, usage, interrupted, streamed, base_cancelled=base_cancelled)


class RunLoop:
    def __init__(self, store: RunStore, services: Services, settings: LoopSettings):
        self.store = store
        self.services = services
        self.settings = settings

    async def drive(self, record: RunRecord, lease: Lease, cancel: asyncio.Event | None = None,
                    canvas: CanvasSpec | None = None,
                    before_finish: Callable[[], Awaitable[None]] | None = None,
                    feed: RunFeed | None = None) -> RunStatus | None:
        """Execute (or continue) a run under `lease`. `cancel` lets the local replica cancel at once;
        other replicas' cancels arrive through commit replies and the heartbeat. `feed` receives every
        batch once it is persisted, and is closed when this replica stops writing the run."""
        try:
            return await self._drive(record, lease, cancel, canvas, before_finish, feed)
        finally:
            if feed is not None:
                feed.close()

    async def _drive(self, record: RunRecord, lease: Lease, cancel: asyncio.Event | None, canvas: CanvasSpec | None,
                     before_finish: Callable[[], Awaitable[None]] | None, feed: RunFeed | None) -> RunStatus | None:
        # The store assigns run ids; the id seeds variant choices and keys model request ids.
        spec = {**record.spec, "run_id": record.id}
        spec.setdefault("seed", record.id)
        if canvas is None:  # a takeover or a resume: load the normalised DSL stored with the run
            try:
                canvas = self._load(spec)
            except UnloadableRun as exc:
                return await self._end_unloadable(record, lease, exc)
        rebuilt = await rebuild(self.store, record, fresh=lease.token == 1)
        state = RunState(canvas=canvas, spec=spec, globals=copy.deepcopy(spec.get("globals") or canvas.globals))
        state.usage.add(rebuilt.usage)
        cancel = cancel or asyncio.Event()
        lost = asyncio.Event()
        journal = Journal(self.store, record.id, lease.token, flush_interval_s=self.settings.flush_interval_s,
                          on_cancel_requested=cancel.set, on_persisted=feed.publish if feed is not None else None)
        execution = Execution(canvas, state, journal, self.services, self.settings.limits, rebuilt.replay,
                              interrupted=rebuilt.interrupted, streamed=rebuilt.streamed)
        heartbeat = asyncio.create_task(self._heartbeat(record.id, lease, cancel, lost))
        try:
            if record.cancel_requested or (rebuilt.base_cancelled and not rebuilt.started):
                # A resume that raced with a CancelRun of the paused run it continues (start_run
                # refuses one that comes after it): the continuation ends CANCELLED before any node.
                cancel.set()
            elif not rebuilt.started:
                # Staged, not awaited: it goes to the store with the first node's commit (one
                # transaction less per run). Before that commit nothing of the run is persisted, so
                # a takeover in between starts the run afresh, as it would before this commit. That
                # commit also moves the record from PENDING to RUNNING (the store does not do it on
                # leasing; a run that ends in its first commit gets its final status instead).
                journal.stage([Step("", {"kind": "started"})], [ev.Event(ev.WORKFLOW_STARTED, {
                    "inputs": json_copy(spec.get("inputs") or {}), "canvas_id": record.canvas_id, "revision_id": record.revision_id,
                    "resumed": bool(spec.get("resume_from")), "query": spec.get("query", "")})],
                    status=RunStatus.RUNNING)
            outcome = await self._execute(execution, cancel, lost)
            if outcome is None:
                return None
            if before_finish is not None:  # e.g. free the admission slot before clients can see the end
                await before_finish()
                before_finish = None
            return await self._finish(record, execution, journal, *outcome, cancel=cancel)
        except JournalFailed as failed:
            if failed.refused:
                if before_finish is not None:
                    await before_finish()
                return await self._end_refused(record, execution, journal, failed.cause,
                                               started=rebuilt.started or journal.last_seq > 0)
            logger.warning("run %s: stopping, journal unavailable (%s)", record.id, failed.cause.message)
            return None
        except asyncio.CancelledError:
            journal.abandon()  # shutdown or crash simulation: nothing more is written
            raise
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)

    def _load(self, spec: dict[str, Any]) -> CanvasSpec:
        """The run's canvas, checked as RunCanvas checks it. A run record made some other way (the store's
        CreateRunRecord called directly, a record written by an older version) may hold anything."""
        if not isinstance(spec.get("dsl"), dict):
            raise UnloadableRun("the run's spec holds no DSL object")
        for key in ("globals", "inputs"):
            if spec.get(key) is not None and not isinstance(spec[key], dict):
                raise UnloadableRun(f"the run's spec.{key} is not an object")
        if not isinstance(spec.get("resume_from") or "", str):
            raise UnloadableRun("the run's spec.resume_from is not a run id")
        tools = self.services.tools
        try:
            return load_for_run(spec["dsl"], tools.context() if tools is not None else None)
        except AgentCanvasError as exc:
            raise UnloadableRun(exc.message) from None

    async def _end_unloadable(self, record: RunRecord, lease: Lease, cause: UnloadableRun) -> RunStatus | None:
        """End a run that cannot be loaded FAILED (RUN_SPEC_INVALID) in one commit: loading it again
        fails the same way on every replica, so leaving it unfinished would have each of them take it over and
        fail on it again and again."""
        logger.warning("run %s: cannot be loaded (%s); ending it FAILED", record.id, cause)
        error = RunError(UNLOADABLE_REASON, f"the run cannot be loaded: {cause}")
        events: list[ev.Event] = []
        steps: list[Step] = []
        if not record.last_seq:  # nothing of the run is logged: it still starts with WorkflowStarted
            steps.append(Step("", {"kind": "started"}))
            events.append(ev.Event(ev.WORKFLOW_STARTED, {"inputs": {}, "canvas_id": record.canvas_id,
                                                         "revision_id": record.revision_id, "resumed": False,
                                                         "query": ""}))
        events.append(ev.Event(ev.WORKFLOW_FINISHED, {
            "status": int(RunStatus.FAILED), "outputs": {}, "usage": record.usage.to_dict(), "error": error.to_dict(),
            "elapsed_ms": max(0, ev.now_ms() - record.create_time_ms) if record.create_time_ms else 0}))
        try:
            await self.store.commit(record.id, lease.token, steps, events, status=RunStatus.FAILED, outputs={},
                                    error=error)
        except AgentCanvasError as exc:  # lease lost or store down: whoever takes it over ends it the same way
            logger.warning("run %s: could not end the unloadable run: %s", record.id, exc.message)
            return None
        return RunStatus.FAILED

    async def _execute(self, execution: Execution, cancel: asyncio.Event, lost: asyncio.Event):
        """(status, error, pauses) or None when the lease was lost."""
        if cancel.is_set():
            return RunStatus.CANCELLED, None, []
        work = asyncio.create_task(execution.run_top())
        cancel_wait = asyncio.create_task(cancel.wait())
        lost_wait = asyncio.create_task(lost.wait())
        try:
            await asyncio.wait({work, cancel_wait, lost_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (cancel_wait, lost_wait):
                waiter.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, cancel_wait, lost_wait, return_exceptions=True)
        if lost.is_set():
            return None
        if work.cancelled():
            return RunStatus.CANCELLED, RunError("CANCELLED", "the run was cancelled"), []
        exc = work.exception()
        if exc is None:
            return RunStatus.SUCCEEDED, None, []
        if isinstance(exc, RunFailed):
            return RunStatus.FAILED, RunError(exc.reason, exc.message, exc.component_id), []
        if isinstance(exc, RunPaused):
            return RunStatus.PAUSED, None, exc.pauses
        if isinstance(exc, JournalFailed):
            if exc.lease_lost:
                logger.warning("run %s: stopping without a terminal event (%s)", execution.state.spec.get("run_id", ""),
                               exc.cause.message)
                return None
            raise exc
        # A bug outside any component (components' own failures are node errors): end the run FAILED
        # with a generic error rather than leave it to crash again on every replica that takes it over.
        logger.error("run %s: execution failed unexpectedly", execution.state.spec.get("run_id", ""), exc_info=exc)
        return RunStatus.FAILED, RunError("INTERNAL", "the run failed with an internal error"), []

    async def _finish(self, record: RunRecord, execution: Execution, journal: Journal, status: RunStatus,
                      error: RunError | None, pauses: list[tuple[str, dict[str, Any]]],
                      cancel: asyncio.Event | None = None) -> RunStatus:
        state = execution.state
        answer = "\n\n".join(a for a in state.answers if a)
        last = execution.last_node
        outputs = {"content": answer, "component_id": last, "outputs": json_copy(state.outputs.get(last, {})) if last else {}}
        events: list[ev.Event] = []
        if status in (RunStatus.FAILED, RunStatus.CANCELLED):
            events.extend(execution.unfinished_events(
                "CANCELLED" if status == RunStatus.CANCELLED else "RUN_FAILED",
                "stopped: the run was cancelled" if status == RunStatus.CANCELLED else "stopped: another node failed"))
        for node_id, pause in pauses:
            events.append(ev.Event(ev.USER_INPUTS_REQUIRED, {"component_id": node_id, "inputs": pause.get("inputs", {}),
                                                             "tips": pause.get("tips", "")}))
        finished: dict[str, Any] = {"status": int(status), "outputs": outputs, "usage": state.usage.to_dict(),
                                    "elapsed_ms": max(0, ev.now_ms() - record.create_time_ms) if record.create_time_ms else 0}
        if error is not None:
            finished["error"] = error.to_dict()
        events.append(ev.Event(ev.WORKFLOW_FINISHED, finished))
        if record.session_id:
            # The last node's step is only staged: make it durable before the turn is recorded, so a
            # takeover after a crash between the two replays no node and the recorded answer is the
            # run's own output (one more commit, for session runs only).
            await journal.flush()
            await self._record_turn(record, state, answer, status, pauses)
        await journal.commit([], events, status=status, outputs=outputs, error=error, usage=state.usage)
        if status == RunStatus.PAUSED and cancel is not None and cancel.is_set():
            # The pausing commit's reply says a cancel was requested meanwhile: a paused run that was
            # cancelled is never resumed, so end it now, while it is still leased here.
            cancelled = RunError("CANCELLED", "the run was cancelled while paused")
            await journal.commit([], [ev.Event(ev.WORKFLOW_FINISHED, {**finished, "status": int(RunStatus.CANCELLED),
                                                                      "error": cancelled.to_dict()})],
                                 status=RunStatus.CANCELLED, error=cancelled)
            return RunStatus.CANCELLED
        if status == RunStatus.PAUSED:
            # A final run (succeeded, failed, cancelled) is never leased or written again, so its
            # lease needs no release (one store call less per run); a paused one is handed back.
            try:
                await self.store.release_lease(record.id, journal.lease_token)
            except AgentCanvasError as exc:
                logger.info("run %s: lease release failed: %s", record.id, exc.message)
        return status

    async def _end_refused(self, record: RunRecord, execution: Execution, journal: Journal, cause: AgentCanvasError,
                           *, started: bool) -> RunStatus:
        """The store refused a commit of this run as invalid (e.g. an event over its payload limit).
        Writing it again cannot succeed, here or on a replica that takes the run over (it would replay
        up to the same commit and be refused again, for ever): end the run FAILED (COMMIT_REFUSED) in a
        terminal commit without outputs. What was refused is not in the log; seqs stay consecutive."""
        logger.warning("run %s: the store refused a commit (%s); ending it FAILED", record.id, cause.message)
        journal.reopen()
        state = execution.state
        error = RunError("COMMIT_REFUSED", f"the run's progress could not be persisted: {cause.message}")
        steps: list[Step] = []
        events: list[ev.Event] = []
        if not started:  # the refused batch held WorkflowStarted: the log still starts with one
            steps.append(Step("", {"kind": "started"}))
            events.append(ev.Event(ev.WORKFLOW_STARTED, {
                "inputs": {}, "canvas_id": record.canvas_id, "revision_id": record.revision_id,
                "resumed": bool(state.spec.get("resume_from")), "query": ""}))
        events.extend(execution.unfinished_events("RUN_FAILED", "stopped: the run's progress could not be persisted"))
        events.append(ev.Event(ev.WORKFLOW_FINISHED, {
            "status": int(RunStatus.FAILED), "outputs": {}, "usage": state.usage.to_dict(), "error": error.to_dict(),
            "elapsed_ms": max(0, ev.now_ms() - record.create_time_ms) if record.create_time_ms else 0}))
        if record.session_id:  # the user's message is the turn; the answer is what could not be stored
            await self._record_turn(record, state, "", RunStatus.FAILED, [])
        await journal.commit(steps, events, status=RunStatus.FAILED, outputs={}, error=error, usage=state.usage)
        return RunStatus.FAILED

    async def _record_turn(self, record: RunRecord, state: RunState, answer: str, status: RunStatus,
                           pauses: list[tuple[str, dict[str, Any]]]) -> None:
        """The run's turn in its session. A turn the store refuses (over its size limit) is recorded without
        the answer, else not at all: raising would leave the run unfinished, and every replica taking it
        over would be refused the same way."""
        for attempt_answer in dict.fromkeys((answer, "")):
            try:
                await self._update_session(record, state, attempt_answer, status, pauses)
                return
            except InvalidArgumentError as exc:
                logger.warning("run %s: the store refused its turn%s: %s", record.id,
                               " with the answer" if attempt_answer else "", exc.message)

    async def _update_session(self, record: RunRecord, state: RunState, answer: str, status: RunStatus,
                              pauses: list[tuple[str, dict[str, Any]]]) -> None:
        # Once per run (keyed by run id in the session state), so a takeover after a crash between
        # this write and the terminal commit converges instead of appending the turn twice.
        env = {k: v for k, v in state.globals.items() if k.startswith("env.")}
        await sessions.record_turn(self.store, record, answer=answer, status=status, pauses=pauses, env=env,
                                   window=self.settings.history_window)

    async def _heartbeat(self, run_id: str, lease: Lease, cancel: asyncio.Event, lost: asyncio.Event) -> None:
        interval = max(0.05, min(self.settings.lease_ttl_ms / 3000, self.settings.cancel_poll_s))
        while True:
            await asyncio.sleep(interval)
            try:
                renewed = await self.store.renew_lease(run_id, self.settings.holder, lease.token, self.settings.lease_ttl_ms)
            except AbortedError:
                logger.warning("run %s: lease lost", run_id)
                lost.set()
                return
            except AgentCanvasError as exc:
                logger.warning("run %s: lease renewal failed: %s", run_id, exc.message)
                continue
            if renewed.cancel_requested:
                cancel.set()
