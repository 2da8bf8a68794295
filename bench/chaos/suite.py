"""The load, the faults and the figures of the chaos suite (see bench/chaos/__init__.py)."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from bench.chaos.cluster import CANVAS, ORCHESTRATORS, USER_TOKEN, ChaosCluster
from services.common.clients import create_channel
from services.common.structs import to_struct

AUTH = (("authorization", f"Bearer {USER_TOKEN}"),)
TERMINAL_WITHIN_S = 60.0
"""A run without its terminal event this long after it started is lost."""
STATUS = {common_pb2.RUN_STATUS_SUCCEEDED: "SUCCEEDED", common_pb2.RUN_STATUS_FAILED: "FAILED",
          common_pb2.RUN_STATUS_CANCELLED: "CANCELLED", common_pb2.RUN_STATUS_PAUSED: "PAUSED"}


@dataclass
class Track:
    """One run as its client saw it."""

    started: float
    confirmed: bool
    run_id: str = ""
    status: str = ""  # SUCCEEDED | FAILED | CANCELLED | LOST | NOT_STARTED
    reason: str = ""
    message: str = ""
    resets: int = 0
    """MessageReset events seen (a Message started again after a takeover while it streamed)."""
    duplicated: int = 0
    """Deltas this client was shown twice: a seq delivered again, or text beyond the Message's final answer."""
    ended: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Client:
    """Runs the canvas through either replica; on a broken stream it reattaches (StreamRunEvents after the last
    seq it got) through the other one, and retries a start that failed with the same request_id. Half the runs
    stream with TEXT_DELIVERY_LIVE (applying MessageReset), half with TEXT_DELIVERY_CONFIRMED (appending every
    delta, as an SSE reader does)."""

    def __init__(self, cluster: ChaosCluster) -> None:
        self._channels = [create_channel(cluster.address(name)) for name in ORCHESTRATORS]
        self._stubs = [orchestrator_pb2_grpc.OrchestratorStub(c) for c in self._channels]
        self._canvas = to_struct(CANVAS)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def run(self, track: Track) -> None:
        try:
            await self._run(track)
        finally:
            track.ended = time.monotonic()
            track.done.set()

    async def _run(self, track: Track) -> None:
        delivery = orchestrator_pb2.TEXT_DELIVERY_CONFIRMED if track.confirmed else orchestrator_pb2.TEXT_DELIVERY_LIVE
        request = orchestrator_pb2.RunCanvasRequest(dsl=self._canvas, query=f"energy {uuid.uuid4().hex[:6]}",
                                                    request_id=uuid.uuid4().hex, text_delivery=delivery)
        replica = random.randrange(len(self._stubs))
        last_seq = 0
        shown: dict[str, str] = {}
        refusal = ""
        while (left := TERMINAL_WITHIN_S - (time.monotonic() - track.started)) > 0:
            stub = self._stubs[replica % len(self._stubs)]
            call = (stub.RunCanvas(request, metadata=AUTH, timeout=left) if not track.run_id else
                    stub.StreamRunEvents(orchestrator_pb2.StreamRunEventsRequest(
                        run_id=track.run_id, after_seq=last_seq, text_delivery=delivery), metadata=AUTH, timeout=left))
            try:
                async for event in call:
                    if event.HasField("heartbeat"):
                        continue
                    track.run_id = event.run_id
                    if event.seq <= last_seq:
                        track.duplicated += 1
                        continue
                    last_seq = event.seq
                    if self._show(event, shown, track):
                        return
            except grpc.aio.AioRpcError as exc:
                refusal = exc.code().name
            replica += 1  # the other replica next time
            await asyncio.sleep(0.2)
        track.status = "LOST" if track.run_id else "NOT_STARTED"
        track.reason = "" if track.run_id else refusal

    @staticmethod
    def _show(event: orchestrator_pb2.RunEvent, shown: dict[str, str], track: Track) -> bool:
        kind = event.WhichOneof("event")
        if kind == "node_started":
            shown[event.node_started.component_id] = ""  # a Message's text starts with its (new) attempt
        elif kind == "message_reset":
            shown[event.message_reset.component_id] = ""
            track.resets += 1
        elif kind == "message_delta":
            component = event.message_delta.component_id
            shown[component] = shown.get(component, "") + event.message_delta.content
        elif kind == "message_end":
            text = shown.get(event.message_end.component_id, "") if event.message_end.component_id else \
                "".join(shown.values())
            if len(text) > len(event.message_end.content):
                track.duplicated += 1
        elif kind == "workflow_finished":
            final = event.workflow_finished
            track.status = STATUS.get(final.status, str(final.status))
            track.reason = final.error.reason
            track.message = final.error.message[:160]
            return True
        return False


@dataclass
class Fault:
    name: str
    inject: Callable[[ChaosCluster, bool], Awaitable[None]]
    """Injects the fault and repairs it (restart, window over); `short` makes windows shorter."""


async def _kill_orchestrator(cluster: ChaosCluster, short: bool) -> None:
    name = random.choice(ORCHESTRATORS)
    await cluster.kill(name)
    await cluster.restart(name)


async def _kill_store(cluster: ChaosCluster, short: bool) -> None:
    await cluster.kill("store")
    await cluster.restart("store")


async def _kill_gateway_mid_call(cluster: ChaosCluster, short: bool) -> None:
    cluster.model.call_started.clear()
    await asyncio.to_thread(cluster.model.call_started.wait, 10)  # a model call has just begun
    await cluster.kill("gateway")
    await cluster.restart("gateway")


async def _kill_sandbox_mid_call(cluster: ChaosCluster, short: bool) -> None:
    cluster.model.call_started.clear()  # a run that reaches the model has run its CodeExec: the next one follows
    await asyncio.to_thread(cluster.model.call_started.wait, 10)
    await asyncio.sleep(random.uniform(0.0, 0.3))
    await cluster.kill("sandbox")
    await cluster.restart("sandbox")


async def _restart_postgres(cluster: ChaosCluster, short: bool) -> None:
    assert cluster.postgres is not None
    await asyncio.to_thread(cluster.postgres.restart)


async def _redis_down(cluster: ChaosCluster, short: bool) -> None:
    assert cluster.redis is not None
    cluster.redis.kill()
    await asyncio.sleep(3 if short else 10)
    await asyncio.to_thread(cluster.redis.start)


async def _model_errors(cluster: ChaosCluster, short: bool) -> None:
    seconds = 3 if short else 10
    cluster.model.errors_for(seconds)
    await asyncio.sleep(seconds)


async def _model_drops(cluster: ChaosCluster, short: bool) -> None:
    before = cluster.model.calls
    cluster.model.drop_next(2)
    deadline = time.monotonic() + 15
    while cluster.model.calls < before + 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


FAULTS = [
    Fault("orchestrator_kill9", _kill_orchestrator),
    Fault("store_kill9_restart", _kill_store),
    Fault("gateway_kill9_mid_call", _kill_gateway_mid_call),
    Fault("sandbox_kill9_mid_call", _kill_sandbox_mid_call),
    Fault("postgres_restart", _restart_postgres),
    Fault("redis_down", _redis_down),
    Fault("model_500_429", _model_errors),
    Fault("model_drops_mid_stream", _model_drops),
]


class Load:
    """`clients` closed loops, each starting its next run when the last one ended."""

    def __init__(self, client: Client, clients: int) -> None:
        self.client = client
        self.tracks: list[Track] = []
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._loop(i)) for i in range(clients)]

    async def _loop(self, index: int) -> None:
        confirmed = bool(index % 2)
        while not self._stop.is_set():
            track = Track(time.monotonic(), confirmed)
            self.tracks.append(track)
            await self.client.run(track)
            confirmed = not confirmed

    def in_flight(self) -> list[Track]:
        return [t for t in self.tracks if not t.done.is_set()]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)


async def _recovered(load: Load, injected: float, in_flight: list[Track]) -> float:
    """Seconds from `injected` until the runs in flight then have ended and a run started after the fault was
    repaired has succeeded (at most TERMINAL_WITHIN_S more)."""
    repaired = time.monotonic()
    deadline = repaired + TERMINAL_WITHIN_S
    await asyncio.wait_for(asyncio.gather(*(t.done.wait() for t in in_flight)), TERMINAL_WITHIN_S)
    drained = max((t.ended for t in in_flight), default=injected)
    while time.monotonic() < deadline:
        done = [t.ended for t in load.tracks if t.started >= repaired and t.status == "SUCCEEDED"]
        if done:
            return max(drained, min(done)) - injected
        await asyncio.sleep(0.05)
    return float("nan")


async def run_fault(cluster: ChaosCluster, client: Client, fault: Fault, *, injections: int, clients: int,
                    short: bool, emit: Callable[[dict], None]) -> dict:
    load = Load(client, clients)
    recoveries: list[float] = []
    await asyncio.sleep(1.0 if short else 2.0)
    for _ in range(injections):
        await asyncio.sleep(random.uniform(0.3, 1.0) if short else random.uniform(1.0, 3.0))
        in_flight = load.in_flight()
        injected = time.monotonic()
        await fault.inject(cluster, short)
        try:
            recoveries.append(await _recovered(load, injected, in_flight))
        except TimeoutError:
            recoveries.append(float("nan"))
    await load.stop()
    tracks = load.tracks
    started = [t for t in tracks if t.run_id]
    failed = Counter(t.reason or "(no reason)" for t in started if t.status == "FAILED")
    known = [r for r in recoveries if r == r]
    line = {
        "bench": "chaos", "fault": fault.name, "injections": injections, "clients": clients,
        "runs_started": len(started), "succeeded": sum(t.status == "SUCCEEDED" for t in started),
        "failed": sum(failed.values()), "failed_by_reason": dict(failed),
        "failed_examples": {reason: sorted({t.message for t in started if t.status == "FAILED" and
                                            (t.reason or "(no reason)") == reason})[:2] for reason in failed},
        "cancelled": sum(t.status == "CANCELLED" for t in started),
        "lost": sum(t.status == "LOST" for t in started),
        "not_started": dict(Counter(t.reason or "(none)" for t in tracks if t.status == "NOT_STARTED")),
        "duplicated_deltas": sum(t.duplicated for t in tracks),
        "message_resets_seen": sum(t.resets for t in tracks),
        "recovery_s_p50": round(statistics.median(known), 2) if known else None,
        "recovery_s_max": round(max(known), 2) if known else None,
        "recovery_unknown": len(recoveries) - len(known),
    }
    emit(line)
    return line
