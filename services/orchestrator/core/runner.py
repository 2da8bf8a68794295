"""Executes a run's graph: one asyncio loop, bounded concurrency, per-node readiness (core/schedule).

Event order (documented in README): for each node, NodeStarted is queued when the node starts; its
MessageDelta/Think*/MessageEnd events while it runs; NodeFinished (then NodeSkipped for every node
its completion ruled out, in canvas order) when it completes. Completions that arrive together are
handled in canvas order. Containers emit NodeStarted before their body and NodeFinished after it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.orchestrator.core import events as ev
from services.orchestrator.core import telemetry
from services.orchestrator.core.components import registry
from services.orchestrator.core.components.base import Outcome
from services.orchestrator.core.context import Frame, NodeContext, Services
from services.orchestrator.core.dsl.model import CanvasSpec
from services.orchestrator.core.errors import ModelCallError, NodeError, NodeTimeoutError
from services.orchestrator.core.journal import Journal, JournalFailed
from services.orchestrator.core.ports import Step, Usage
from services.orchestrator.core.refs import UnknownReferenceError
from services.orchestrator.core.retry import DEFAULT, FAIL, GOTO, NodePolicy, policy_for
from services.orchestrator.core.schedule import Frontier
from services.orchestrator.core.state import RunState
from services.orchestrator.core.values import json_copy

logger = logging.getLogger(__name__)

# Failures a component may raise while processing user data; they become node errors under the
# node's policy. Anything else is a bug: it is logged with its traceback and the node fails with a
# generic INTERNAL error (under its policy too), so the run still ends with its WorkflowFinished
# instead of crashing on every replica that takes it over. Signals of the run pass through.
NODE_FAILURES = (NodeError, UnknownReferenceError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                 ArithmeticError, OSError, json.JSONDecodeError, LookupError)


class RunFailed(Exception):
    def __init__(self, component_id: str, reason: str, message: str):
        super().__init__(message)
        self.component_id = component_id
        self.reason = reason
        self.message = message


class RunPaused(Exception):
    """A node inside a container body is waiting for user input."""

    def __init__(self, pauses: list[tuple[str, dict[str, Any]]]):
        super().__init__("paused")
        self.pauses = pauses


@dataclass
class NodeResult:
    node_id: str
    outcome: Outcome | None = None
    error: NodeError | None = None
    attempt: int = 1
    elapsed_ms: int = 0
    writes: list[tuple[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    replayed: dict[str, Any] | None = None
    pause: dict[str, Any] | None = None
    exit_loop: bool = False


@dataclass
class Limits:
    max_concurrency: int = 16
    max_backoff_s: float = 30.0
    node_timeout_s: float | None = None  # overrides every component default when set




class Execution:
    """One run's graph execution while this replica holds the lease."""

    def __init__(self, canvas: CanvasSpec, state: RunState, journal: Journal, services: Services, limits: Limits,
                 replay: dict[str, dict[str, Any]], interrupted: dict[str, int] | None = None,
                 streamed: set[str] | None = None):
        self.canvas = canvas
        self.state = state
        self.journal = journal
        self.services = services
        self.limits = limits
        self.replay = replay
        self.interrupted = dict(interrupted or {})  # node → attempts already made by a previous holder
        self.streamed = set(streamed or ())  # nodes whose interrupted attempt had streamed text
        self.slots = asyncio.Semaphore(limits.max_concurrency)
        self.pauses: list[tuple[str, dict[str, Any]]] = []
        self.in_flight: dict[tuple[str, str], str] = {}  # (scope, node) → node id, started and not finished
        self.last_node = ""
        self._rng = random.Random(state.spec.get("seed", ""))
        self._rank = {node_id: i for i, node_id in enumerate(canvas.nodes)}
        self._policies: dict[str, NodePolicy] = {}

    # -- events ---------------------------------------------------------------------------------
    def emit(self, kind: str, data: dict[str, Any]) -> None:
        self.journal.publish(ev.Event(kind, data))

    # -- scopes ---------------------------------------------------------------------------------
    async def run_top(self) -> None:
        await self.run_scope("", "", None)
        if self.pauses:
            raise RunPaused(self.pauses)

    async def run_body(self, container_id: str, frame: Frame, parent_scope: str) -> None:
        scope = f"{parent_scope}/{container_id}#{frame.index}" if parent_scope else f"{container_id}#{frame.index}"
        for node_id in self.canvas.children(container_id):
            self.state.outputs[node_id] = {}  # a fresh pass: no stale outputs from the previous one
            self.state.routes.pop(node_id, None)
        pauses_before = len(self.pauses)
        await self.run_scope(container_id, scope, frame)
        if len(self.pauses) > pauses_before:
            raise RunPaused(self.pauses[pauses_before:])

    async def run_scope(self, parent_id: str, scope: str, frame: Frame | None) -> None:
        entries = [self.canvas.begin_id] if not parent_id else [self.canvas.start_child(parent_id)]
        turn_entry = frame.item.get("entry") if frame is not None and isinstance(frame.item, dict) else None
        if turn_entry:  # a conversation's turn starts at the node it waits at now (dsl/conversation.py)
            entries = [turn_entry]
        frontier = Frontier(self.canvas.scope_nodes(parent_id), self.canvas.scope_edges(parent_id), entries)
        if turn_entry:
            waiting = self.canvas.nodes[parent_id].params.get("waiting") or []
            frontier.skip([w for w in waiting if w != turn_entry])
        done: asyncio.Queue[tuple[str, asyncio.Task]] = asyncio.Queue()
        tasks: dict[str, asyncio.Task] = {}
        # Node spans are children of the scope's span (run or container), also when a streaming
        # producer launches its Message from inside its own task.
        scope_trace = telemetry.current_context()

        def launch() -> None:
            for node_id in frontier.take_ready():
                task = asyncio.create_task(self._node_task(node_id, scope, frame, frontier, launch, scope_trace))
                tasks[node_id] = task
                task.add_done_callback(lambda t, n=node_id: done.put_nowait((n, t)))

        launch()
        try:
            while tasks:
                finished = [await done.get()]
                if len(tasks) > 1:
                    await asyncio.sleep(0)  # let siblings finishing in the same tick join this group commit
                while not done.empty():
                    finished.append(done.get_nowait())
                finished.sort(key=lambda item: self._rank[item[0]])
                results = []
                for node_id, task in finished:
                    del tasks[node_id]
                    results.append(task.result())  # RunFailed / RunPaused-in-body propagate
                await self._apply(results, frontier, scope)
                launch()
        finally:
            for task in tasks.values():
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks.values(), return_exceptions=True)

    async def _apply(self, results: list[NodeResult], frontier: Frontier, scope: str) -> None:
        steps: list[Step] = []
        events: list[ev.Event] = []
        failure: RunFailed | None = None
        for result in results:
            node = self.canvas.nodes[result.node_id]
            self.in_flight.pop((scope, result.node_id), None)
            if result.pause is not None:
                if "nested" not in result.pause:  # nested pauses were recorded by the body's scope
                    self.pauses.append((result.node_id, result.pause))
                continue
            if result.replayed is not None:
                saved = result.replayed
                frontier.complete(node.id, saved.get("taken"), exception=bool(saved.get("exception")))
                self.state.routes[node.id] = saved.get("taken")
                continue
            outcome = result.outcome or Outcome()
            taken = outcome.next
            exception = False
            error = result.error
            if error is not None:
                policy = self._policy(node)
                if policy.on_error == GOTO:
                    taken, exception = list(policy.goto), True
                    outcome = Outcome(outputs={"_ERROR": error.message})
                elif policy.on_error == DEFAULT:
                    outcome = Outcome(outputs=policy.default_outputs(node.params))
                else:
                    failure = failure or RunFailed(node.id, error.reason, error.message)
                self._close_stream(node.id, outcome, error, policy.on_error)
                self.state.outputs[node.id] = dict(outcome.outputs)
            else:
                self._close_stream(node.id, outcome, None, "")
            if failure is not None and failure.component_id == node.id:
                events.append(self._finished_event(node.id, result, outcome))
                steps.append(Step(node.id, {"key": self._key(scope, node.id), "failed": True}, result.attempt))
                continue
            step = frontier.complete(node.id, taken, exception=exception)
            self.state.routes[node.id] = list(taken) if taken is not None else None
            self.last_node = node.id
            snapshot = json_copy(self.state.outputs.get(node.id, {}))  # shared by step and event
            events.append(self._finished_event(node.id, result, outcome, snapshot))
            for skipped, cause in step.skipped:
                events.append(ev.Event(ev.NODE_SKIPPED, {
                    "component_id": skipped, "component_type": self.canvas.nodes[skipped].type,
                    "reason": f"branch not taken by {cause}"}))
            steps.append(Step(node.id, {
                "key": self._key(scope, node.id),
                "outputs": snapshot,
                "writes": json_copy([list(w) for w in result.writes]),
                "taken": taken, "exception": exception,
                "usage": result.usage.to_dict() if result.usage.calls or result.usage.total_tokens else None,
                "exit_loop": result.exit_loop,
                "answer": outcome.outputs.get("content") if node.type == "Message" else None,
                "references": json_copy(outcome.references) if outcome.references else None,
            }, result.attempt))
        if (steps or events) and failure is None and not scope and frontier.idle and not self.pauses:
            # The run's last step: nothing starts after it, so it need not be awaited; the terminal
            # commit that follows at once carries it in the same store transaction.
            self.journal.stage(steps, events)
        elif steps or events:
            await self.journal.commit(steps, events)
        if failure is not None:
            raise failure

    def unfinished_events(self, reason: str, message: str) -> list[ev.Event]:
        """NodeFinished for nodes that started but were stopped by the run's end (no orphan starts)."""
        events = []
        for (_scope, node_id) in list(self.in_flight):
            node = self.canvas.nodes[node_id]
            events.append(ev.Event(ev.NODE_FINISHED, {
                "component_id": node_id, "component_name": node.name, "component_type": node.type,
                "parent_id": node.parent_id, "inputs": {}, "outputs": {},
                "error": {"reason": reason, "message": message, "component_id": node_id}}))
        self.in_flight.clear()
        return events

    def _close_stream(self, node_id: str, outcome: Outcome, error: NodeError | None, on_error: str) -> None:
        stream = self.state.streams.get(node_id)
        if stream is None or stream.closed:
            return
        if error is not None and on_error == DEFAULT and not stream.text_so_far():
            stream.push("text", str(outcome.outputs.get("content", "")))
            stream.close()
        elif error is not None and on_error != DEFAULT:
            stream.close(error.message)
        else:
            stream.close()

    def _finished_event(self, node_id: str, result: NodeResult, outcome: Outcome,
                        outputs: dict[str, Any] | None = None) -> ev.Event:
        node = self.canvas.nodes[node_id]
        data: dict[str, Any] = {
            "component_id": node_id, "component_name": node.name, "component_type": node.type,
            "parent_id": node.parent_id, "inputs": json_copy(outcome.inputs),
            "outputs": outputs if outputs is not None else json_copy(self.state.outputs.get(node_id, {})),
            "elapsed_ms": result.elapsed_ms, "attempt": result.attempt,
        }
        if result.error is not None:
            data["error"] = {"reason": result.error.reason, "message": result.error.message, "component_id": node_id}
        if outcome.next is not None:
            data["next"] = list(outcome.next)
        if outcome.branch:
            data["branch"] = outcome.branch
        return ev.Event(ev.NODE_FINISHED, data)

    @staticmethod
    def _key(scope: str, node_id: str) -> str:
        return f"{scope}/{node_id}" if scope else node_id

    def _policy(self, node) -> NodePolicy:
        cached = self._policies.get(node.id)
        if cached is not None:
            return cached
        cls = registry.get(node.type)
        default_timeout = cls.default_timeout_s if cls else 60.0
        policy = policy_for(node.params, default_timeout, max_backoff_s=self.limits.max_backoff_s,
                            timeout_override_s=self.limits.node_timeout_s if default_timeout is not None else None)
        self._policies[node.id] = policy
        return policy

    # -- one node -------------------------------------------------------------------------------
    async def _node_task(self, node_id: str, scope: str, frame: Frame | None, frontier: Frontier,
                         relaunch: Callable[[], None], scope_trace: Any = None) -> NodeResult:
        key = self._key(scope, node_id)
        saved = self.replay.get(key)
        node = self.canvas.nodes[node_id]
        if saved is not None:
            self._restore(node_id, saved, frame)
            if not saved.get("failed"):
                return NodeResult(node_id, replayed=saved)
        cls = registry.get(node.type)
        if cls is None:
            return NodeResult(node_id, error=NodeError(f"component {node.type} is not supported", reason="UNSUPPORTED_COMPONENT"))
        component = cls(node)
        policy = self._policy(node)
        container = cls.default_timeout_s is None
        attempt = self.interrupted.pop(node_id, 0)
        while True:
            attempt += 1
            ctx = NodeContext(node=node, state=self.state, services=self.services, scope=scope, attempt=attempt,
                              emit=self.emit, run_body=lambda cid, fr: self.run_body(cid, fr, scope), frame=frame)
            ctx.open_stream = self._stream_opener(ctx, frontier, relaunch)  # type: ignore[method-assign]
            started = time.perf_counter()
            self.in_flight[(scope, node_id)] = node_id
            if node_id in self.streamed:
                # The text the interrupted attempt streamed is in the log: tell clients to drop it
                # before this attempt streams its own (MessageReset comes right before its NodeStarted).
                self.streamed.discard(node_id)
                self.emit(ev.MESSAGE_RESET, {"component_id": node_id, "attempt": attempt})
            self.emit(ev.NODE_STARTED, {"component_id": node_id, "component_name": node.name, "component_type": node.type,
                                        "parent_id": node.parent_id, "thoughts": component.thoughts(ctx), "attempt": attempt})
            if component.durable_start:
                # Durable before the first side effect (a model or tool call): a takeover then counts this
                # attempt, and the next one gets its own number (and request id) instead of reusing it.
                await self.journal.flush()
            error: NodeError | None = None
            outcome: Outcome | None = None
            with telemetry.node_span(node_id, node.type, attempt, scope, parent=scope_trace) as node_trace:
                try:
                    if container:
                        outcome = await component.invoke(ctx)
                    else:
                        async with self.slots:
                            async with asyncio.timeout(policy.timeout_s):
                                outcome = await component.invoke(ctx)
                except TimeoutError:
                    error = NodeTimeoutError(node_id, policy.timeout_s or 0)
                except NodeError as exc:
                    error = exc
                except RunPaused as paused:
                    return NodeResult(node_id, pause={"nested": paused.pauses}, attempt=attempt)
                except NODE_FAILURES as exc:
                    error = NodeError(f"{type(exc).__name__}: {exc}", reason="COMPONENT_ERROR")
                except (RunFailed, JournalFailed):
                    raise  # a body node failed the run / the store refused a commit: not this node's error
                except Exception:
                    logger.exception("run %s: node %s (%s) failed unexpectedly", self.state.spec.get("run_id", ""),
                                     node_id, node.type)
                    error = NodeError(f"{node_id} failed with an internal error", reason="INTERNAL")
                elapsed = int((time.perf_counter() - started) * 1000)
                if error is None and outcome is not None and outcome.error:
                    error = NodeError(outcome.error)
                telemetry.node_finished(node_trace, node.type, time.perf_counter() - started, error.reason if error else None)
            if ctx.usage.calls or ctx.usage.total_tokens:
                telemetry.record_tokens(ctx.usage)
            if error is None and outcome is not None:
                if outcome.pause is not None:
                    self.state.outputs[node_id] = dict(outcome.outputs)
                    return NodeResult(node_id, outcome=outcome, attempt=attempt, pause=outcome.pause)
                self.state.outputs[node_id] = dict(outcome.outputs)
                result = NodeResult(node_id, outcome=outcome, attempt=attempt, elapsed_ms=elapsed, writes=ctx.writes, usage=ctx.usage)
                result.exit_loop = bool(frame and frame.exit_requested and node.type == "ExitLoop")
                if ctx.usage.calls or ctx.usage.total_tokens:
                    self.state.usage.add(ctx.usage)
                return result
            if ctx.usage.calls or ctx.usage.total_tokens:
                self.state.usage.add(ctx.usage)
            assert error is not None
            if error.retryable and attempt <= policy.max_retries:
                delay = policy.backoff(attempt, self._rng)
                logger.info("node %s attempt %d failed (%s); retrying in %.2fs", node_id, attempt, error.reason, delay)
                await asyncio.sleep(delay)
                continue
            if isinstance(error, ModelCallError):  # otherwise only in RunEvents: an operator greps the log for it
                run_id = self.state.spec.get("run_id", "")
                logger.warning("run %s: node %s: model %s failed for good (%s): %s", run_id, node_id, error.model,
                               error.kind, error.message, extra={"run_id": run_id, "component_id": node_id,
                                                                 "model": error.model, "reason": error.kind})
            return NodeResult(node_id, error=error, attempt=attempt, elapsed_ms=elapsed, usage=ctx.usage)

    def _stream_opener(self, ctx: NodeContext, frontier: Frontier, relaunch: Callable[[], None]):
        original = NodeContext.open_stream

        def open_stream():
            stream = original(ctx)
            targets = [d for d in ctx.node.downstream if d in self.canvas.nodes and self.canvas.nodes[d].type == "Message"]
            frontier.release(ctx.node.id, targets)
            relaunch()
            return stream

        return open_stream

    def _restore(self, node_id: str, saved: dict[str, Any], frame: Frame | None) -> None:
        if saved.get("failed"):
            return
        self.state.outputs[node_id] = dict(saved.get("outputs") or {})
        for expr, value in saved.get("writes") or []:
            self.state.write(expr, value)
        if saved.get("answer") is not None:
            self.state.answers.append(saved["answer"])
        if saved.get("references"):
            self.state.reference_bucket().add(saved["references"])
        if saved.get("exit_loop") and frame is not None:
            frame.exit_requested = True
        self.last_node = node_id


__all__ = ["Execution", "Limits", "RunFailed", "RunPaused", "FAIL"]
