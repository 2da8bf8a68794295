"""Builds an Orchestrator over the in-memory store and collects a run's events."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.context import Services
from services.orchestrator.core.events import Event
from services.orchestrator.core.loop import LoopSettings
from services.orchestrator.core.orchestrator import Orchestrator
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.runner import Limits

_POOL = ThreadPoolExecutor(max_workers=4)


def make_orchestrator(store: InMemoryRunStore | None = None, llm: Any = None, *, holder: str = "replica-a",
                      http: httpx.AsyncClient | None = None, lease_ttl_ms: int = 15_000, tools: Any = None,
                      conversation_max_turns: int = 50, **limits: Any) -> Orchestrator:
    store = store or InMemoryRunStore()
    services = Services(llm=llm, http=http, pool=_POOL, tools=tools, conversation_max_turns=conversation_max_turns)
    settings = LoopSettings(holder=holder, lease_ttl_ms=lease_ttl_ms, flush_interval_s=0.005, limits=Limits(**limits))
    return Orchestrator(store, services, settings, takeover_interval_s=0.05)


async def run_dsl(orch: Orchestrator, dsl: dict[str, Any], query: str = "", **kwargs: Any) -> tuple[str, list[Event]]:
    record = await orch.start_run(RunRequest(dsl=dsl, query=query, **kwargs))
    events = [e async for e in orch.stream_events(record.id)]
    await orch.wait_idle()
    return record.id, events


class BothArrived:
    """Holds every caller of arrive() until `count` callers arrived, then lets all through: two racing
    requests both reach a point before either goes past it, decided by events, not timing."""

    def __init__(self, count: int = 2) -> None:
        self._count = count
        self._arrived = 0
        self._all = asyncio.Event()

    async def arrive(self) -> None:
        self._arrived += 1
        if self._arrived >= self._count:
            self._all.set()
        await self._all.wait()


class DiesOnce:
    """Armed, the next caller of reached() sets `passed` and then never returns: a replica that dies at
    exactly that point (the test waits on `passed`, then stops the replica)."""

    def __init__(self) -> None:
        self.armed = False
        self.passed = asyncio.Event()
        self._never = asyncio.Event()

    async def reached(self) -> None:
        if self.armed:
            self.armed = False
            self.passed.set()
            await self._never.wait()


async def until(stream, predicate) -> list[Event]:
    """The events of `stream` up to and including the first one `predicate` accepts (all of them if none does)."""
    seen = []
    async for event in stream:
        seen.append(event)
        if predicate(event):
            return seen
    return seen


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def finished(events: list[Event]) -> dict[str, Any]:
    assert events[-1].kind == "workflow_finished", kinds(events)
    return events[-1].data


def node_events(events: list[Event], kind: str) -> list[str]:
    return [e.data["component_id"] for e in events if e.kind == kind]


def dsl(components: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Build a DSL from {id: {"type": T, "params": {...}, "down": [...], "parent": p}}."""
    out: dict[str, Any] = {}
    for cid, spec in components.items():
        entry: dict[str, Any] = {"obj": {"component_name": spec["type"], "params": spec.get("params", {})},
                                 "downstream": spec.get("down", []), "upstream": []}
        if spec.get("parent"):
            entry["parent_id"] = spec["parent"]
        out[cid] = entry
    for cid, entry in out.items():
        for d in entry["downstream"]:
            if d in out:
                out[d]["upstream"].append(cid)
    return {"components": out, **extra}
