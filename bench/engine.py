"""Engine benchmark: per-node overhead vs LangGraph, fan-out efficiency, checkpoint cost per step.

    python -m bench.engine [--chain 200] [--repeat 20] [--postgres-url URL]

Prints one JSON line per figure:
    {"bench":"engine","metric":"per_node_us","ours":…,"langgraph":…,"ratio":…,"ours_cold":…,"ratio_cold":…}  goal ratio ≤ 0.5
    {"bench":"engine","metric":"fanout_ratio","value":best wall/50ms,"median":…}      goal ≤ 1.3
    {"bench":"engine","metric":"checkpoint_ms","db":"sqlite","value":…,"grpc_ms":…}   goal value ≤ 1 ms
    {"bench":"engine","metric":"checkpoint_ms","db":"postgresql","value":…,"grpc_ms":…}

(a) runs a 200-node chain of no-op data nodes (StringTransform merge of a constant) through the whole
engine — scheduler, runner, journal with persist-then-publish, events — on the in-memory store, next
to the same chain as a LangGraph StateGraph without a checkpointer (sync invoke, its fastest path).
Whole runs are timed from RunCanvas to the last event. `ours` runs a DSL the orchestrator has seen,
as RunCanvas does for a repeated inline DSL (loaded and validated once per process, like LangGraph's
compiled graph); `ours_cold`/`ratio_cold` load and validate the DSL in every run.
Best-of-N is reported (median too for the fan-out) because the machine may be shared.
(c) measures the real canvas_store commit path of one journal step: the store's CommitRunStep use case
(RunService.commit -> RunRepository.commit: lease-fenced run-row update assigning the seqs, one step
row, its NodeStarted/NodeFinished events, one transaction) called in-process on a file SQLite database
and on a temporary PostgreSQL database (created and dropped; --postgres-url or BENCH_POSTGRES_URL
names the server). "value" is that in-process cost per commit; "grpc_ms" is the same commit sent over
gRPC, one in flight, to a store process (`python -m services.canvas_store`) on the same database,
i.e. what the orchestrator pays. "chain_commits"/"chain_steps" count the CommitRunStep calls the
journal makes for one run of the --chain chain (group commit folds buffered events into the next
node's commit) and "chain_effective_*" scale both costs by commits per step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agentcanvas.v1 import orchestrator_pb2

from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.context import Services
from services.orchestrator.core.loop import LoopSettings
from services.orchestrator.core.orchestrator import Orchestrator
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import ChatChunk, ChatRequest
from services.orchestrator.core.runner import Limits

NOOP = {"obj": {"component_name": "StringTransform", "params": {"method": "merge", "script": "x"}}}


def chain_dsl(n: int) -> dict[str, Any]:
    ids = ["begin"] + [f"n{i}" for i in range(n)]
    components = {}
    for i, cid in enumerate(ids):
        entry = {"obj": {"component_name": "Begin", "params": {}}} if cid == "begin" else json.loads(json.dumps(NOOP))
        entry["downstream"] = [ids[i + 1]] if i + 1 < len(ids) else []
        entry["upstream"] = [ids[i - 1]] if i else []
        components[cid] = entry
    return {"components": components}


class SleepyLlm:
    """An LlmClient whose every call takes `delay_s` (stands in for a slow tool or model)."""

    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    async def chat_stream(self, request: ChatRequest):
        await asyncio.sleep(self.delay_s)
        yield ChatChunk("text", "done")
        yield ChatChunk("finish")


def orchestrator(llm=None, concurrency: int = 16) -> Orchestrator:
    services = Services(llm=llm, http=None, pool=ThreadPoolExecutor(max_workers=4))
    settings = LoopSettings(holder="bench", flush_interval_s=0.02, limits=Limits(max_concurrency=concurrency))
    return Orchestrator(InMemoryRunStore(), services, settings)


async def run_once(orch: Orchestrator, dsl: dict[str, Any], dsl_key: bytes = b"") -> float:
    started = time.perf_counter()
    record = await orch.start_run(RunRequest(dsl=dsl, query="q", dsl_key=dsl_key))
    async for event in orch.stream_events(record.id):
        if event.kind == "workflow_finished":
            assert event.data["status"] == 4, event.data
    await orch.wait_idle()
    return time.perf_counter() - started


def langgraph_chain(n: int):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        x: str

    graph = StateGraph(State)
    names = [f"n{i}" for i in range(n + 1)]
    for name in names:
        graph.add_node(name, lambda state: {"x": "x"})
    graph.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    return graph.compile()


async def per_node_us(n: int, repeat: int) -> tuple[float, float, float]:
    """(ours, ours_cold, langgraph) in µs per node. `ours` runs the chain as RunCanvas does for a DSL
    it has seen (loaded and validated once per process, keyed like the server's deterministic
    encoding) - the counterpart of LangGraph's compiled graph; `ours_cold` loads and validates the
    DSL in every run. The runs alternate so all see the same machine load; the best run of each is
    reported (the machine is shared, so noise only ever adds time)."""
    orch = orchestrator()
    dsl = chain_dsl(n)
    key = json.dumps(dsl, sort_keys=True).encode()
    app = langgraph_chain(n)
    config = {"recursion_limit": n + 10}
    await run_once(orch, dsl)  # warm up imports and caches
    await run_once(orch, dsl, key)
    app.invoke({"x": ""}, config)
    ours, cold, theirs = [], [], []
    for _ in range(repeat):
        ours.append(await run_once(orch, dsl, key))
        cold.append(await run_once(orch, dsl))
        started = time.perf_counter()
        app.invoke({"x": ""}, config)
        theirs.append(time.perf_counter() - started)
    return min(ours) / (n + 1) * 1e6, min(cold) / (n + 1) * 1e6, min(theirs) / (n + 1) * 1e6


async def fanout_ratio(branches: int, wait_s: float) -> tuple[float, float]:
    """(best, median) wall time of the whole run as a multiple of one branch's wait."""
    components: dict[str, Any] = {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": [], "upstream": []}}
    for i in range(branches):
        cid = f"b{i}"
        components["begin"]["downstream"].append(cid)
        components[cid] = {"obj": {"component_name": "LLM", "params": {"llm_id": "sleepy"}}, "downstream": ["join"], "upstream": ["begin"]}
    components["join"] = {**json.loads(json.dumps(NOOP)), "downstream": [], "upstream": [f"b{i}" for i in range(branches)]}
    orch = orchestrator(SleepyLlm(wait_s), concurrency=branches)
    dsl = {"components": components}
    await run_once(orch, dsl)
    walls = [await run_once(orch, dsl) for _ in range(7)]
    return min(walls) / wait_s, statistics.median(walls) / wait_s


STEP_STATE = {"key": "n1", "outputs": {"result": "x" * 64}, "writes": [], "taken": None, "exception": False}
# About the size of a serialised NodeStarted / NodeFinished RunEvent (the store accepts only RunEvents).
EVENT_PAYLOAD = orchestrator_pb2.RunEvent(node_started=orchestrator_pb2.NodeStarted(
    component_id="x" * 60, component_name="y" * 60, component_type="z" * 40)).SerializeToString()


def _store_commit(run_id: str, token: int, step: int):
    from services.canvas_store.core.types import RunCommit, RunStep, StoredEvent

    return RunCommit(run_id=run_id, lease_token=token,
                     steps=[RunStep(node_id=f"n{step}", attempt=1, state=STEP_STATE)],
                     events=[StoredEvent("node_started", EVENT_PAYLOAD), StoredEvent("node_finished", EVENT_PAYLOAD)])


def checkpoint_in_process(url: str, steps: int, tmp: str) -> float:
    """ms per CommitRunStep use case run in-process: the store's RunService.commit on its own database.

    That is exactly what the CommitRunStep handler runs on its DB thread (validation, the lease-fenced
    run-row update that assigns seqs, the step and event inserts, one transaction) minus gRPC.
    """
    from services.canvas_store.app import StoreApp
    from services.canvas_store.core.policy import Caller
    from services.canvas_store.core.types import RunRecord
    from services.canvas_store.settings import StoreSettings
    from services.common.settings import Config

    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": tmp}).with_overrides(
        {"store": {"database_url": url, "seed_templates": False, "db_pool_size": 2}})
    app = StoreApp(StoreSettings.from_config(config))
    app.open()
    try:
        caller = Caller("bench", "orchestrator", is_service=True)
        run = app.runs.create(caller, RunRecord(id="", tenant_id="bench", creator_id="orchestrator"), "")
        token = app.runs.acquire(caller, run.id, "bench", 600_000).token
        for step in range(1, 21):  # warm the connection pool and statement caches
            app.runs.commit(caller, _store_commit(run.id, token, step))
        started = time.perf_counter()
        for step in range(21, steps + 21):
            app.runs.commit(caller, _store_commit(run.id, token, step))
        return (time.perf_counter() - started) / steps * 1000
    finally:
        app.close()


async def checkpoint_grpc(url: str, steps: int, tmp: str) -> float:
    """ms per CommitRunStep sent over gRPC (one in flight) to a store process on the same database."""
    from pathlib import Path

    from agentcanvas.v1 import canvas_store_pb2 as pb
    from agentcanvas.v1 import canvas_store_pb2_grpc

    from bench.store import TOKEN, store_process, wait_serving
    from services.common.clients import create_channel
    from services.common.structs import to_struct

    with store_process(url, Path(tmp), 2) as port:
        channel = create_channel(f"127.0.0.1:{port}")
        try:
            await wait_serving(channel)
            stub = canvas_store_pb2_grpc.CanvasStoreStub(channel)
            metadata = (("authorization", f"Bearer {TOKEN}-svc"),)
            record = pb.RunRecord()
            record.spec.CopyFrom(to_struct({"dsl": {"components": {}}}))  # what the store requires of a run
            run = await stub.CreateRunRecord(pb.CreateRunRecordRequest(run=record), metadata=metadata)
            token = (await stub.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="bench", ttl_ms=600_000),
                                                metadata=metadata)).token
            state = to_struct(STEP_STATE)

            def request(step: int) -> pb.CommitRunStepRequest:
                return pb.CommitRunStepRequest(
                    run_id=run.id, lease_token=token, steps=[pb.RunStep(node_id=f"n{step}", attempt=1, state=state)],
                    events=[pb.StoredRunEvent(event_type="node_started", payload=EVENT_PAYLOAD),
                            pb.StoredRunEvent(event_type="node_finished", payload=EVENT_PAYLOAD)])

            for step in range(1, 21):
                await stub.CommitRunStep(request(step), metadata=metadata)
            started = time.perf_counter()
            for step in range(21, steps + 21):
                await stub.CommitRunStep(request(step), metadata=metadata)
            return (time.perf_counter() - started) / steps * 1000
        finally:
            await channel.close()


def checkpoint(url: str, steps: int, tmp: str) -> tuple[float, float]:
    """(in-process ms, gRPC ms) per commit, measured one after the other on the same database."""
    return checkpoint_in_process(url, steps, tmp), asyncio.run(checkpoint_grpc(url, steps, tmp))


class CountingRunStore(InMemoryRunStore):
    """The in-memory store, counting CommitRunStep calls and the steps they carry."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0
        self.steps = 0

    async def commit(self, run_id, lease_token, steps, events, **kwargs):
        self.commits += 1
        self.steps += len(steps)
        return await super().commit(run_id, lease_token, steps, events, **kwargs)


async def commits_per_step(n: int) -> tuple[int, int]:
    """(commits, steps) the journal sends for one run of the n-node chain (group commit folds buffered
    events into the next node's commit, so a sequential chain needs about one commit per node)."""
    store = CountingRunStore()
    services = Services(llm=None, http=None, pool=ThreadPoolExecutor(max_workers=4))
    orch = Orchestrator(store, services, LoopSettings(holder="bench", flush_interval_s=0.02,
                                                      limits=Limits(max_concurrency=16)))
    await run_once(orch, chain_dsl(n))
    return store.commits, store.steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine")
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--steps", type=int, default=500, help="commits timed per database")
    parser.add_argument("--postgres-url", help="admin URL of a PostgreSQL server (a temporary database is created)")
    args = parser.parse_args(argv)

    ours, cold, theirs = asyncio.run(per_node_us(args.chain, args.repeat))
    print(json.dumps({"bench": "engine", "metric": "per_node_us", "ours": round(ours, 1), "langgraph": round(theirs, 1),
                      "ratio": round(ours / theirs, 3), "ours_cold": round(cold, 1), "ratio_cold": round(cold / theirs, 3),
                      "nodes": args.chain, "goal_ratio": 0.5}), flush=True)

    best, median = asyncio.run(fanout_ratio(64, 0.05))
    print(json.dumps({"bench": "engine", "metric": "fanout_ratio", "value": round(best, 3), "median": round(median, 3),
                      "branches": 64, "wait_ms": 50, "goal": 1.3}), flush=True)

    commits, steps = asyncio.run(commits_per_step(args.chain))
    per_step = commits / max(1, steps)

    def report(db: str, url: str, tmp: str) -> None:
        in_process, over_grpc = checkpoint(url, args.steps, tmp)
        print(json.dumps({"bench": "engine", "metric": "checkpoint_ms", "db": db, "value": round(in_process, 3),
                          "grpc_ms": round(over_grpc, 3), "via": "canvas_store RunService.commit", "steps": args.steps,
                          "chain_commits": commits, "chain_steps": steps,
                          "chain_effective_ms_per_step": round(in_process * per_step, 3),
                          "chain_effective_grpc_ms_per_step": round(over_grpc * per_step, 3),
                          **({"goal_ms": 1.0} if db == "sqlite" else {})}), flush=True)

    with tempfile.TemporaryDirectory(prefix="ac-bench-engine-") as tmp:
        report("sqlite", f"sqlite:///{tmp}/store.db", tmp)
    import sqlalchemy as sa

    from bench.store import database

    with tempfile.TemporaryDirectory(prefix="ac-bench-engine-") as tmp, contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(database("postgresql", Path(tmp),
                                               args.postgres_url or os.environ.get("BENCH_POSTGRES_URL")))
        except sa.exc.OperationalError:
            print(json.dumps({"bench": "engine", "metric": "checkpoint_ms", "db": "postgresql", "value": None,
                              "skipped": "no PostgreSQL reachable"}), flush=True)
        else:
            report("postgresql", url, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
