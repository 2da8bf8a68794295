"""Engine benchmark: per-node overhead vs LangGraph, fan-out efficiency, checkpoint cost per step.

    python -m bench.engine [--chain 200] [--repeat 20] [--postgres-url URL]

Prints one JSON line per figure:
    {"bench":"engine","metric":"per_node_us","ours":…,"langgraph":…,"ratio":…}         goal ratio ≤ 0.5
    {"bench":"engine","metric":"fanout_ratio","value":best wall/50ms,"median":…}      goal ≤ 1.3
    {"bench":"engine","metric":"checkpoint_ms","db":"sqlite","value":…}               goal ≤ 1 ms
    {"bench":"engine","metric":"checkpoint_ms","db":"postgresql","value":…}

(a) runs a 200-node chain of no-op data nodes (StringTransform merge of a constant) through the whole
engine — scheduler, runner, journal with persist-then-publish, events — on the in-memory store, next
to the same chain as a LangGraph StateGraph without a checkpointer (sync invoke, its fastest path).
Whole runs are timed from RunCanvas to the last event, DSL loading and validation included.
Best-of-N is reported (median too for the fan-out) because the machine may be shared.
(c) measures one journal commit (one step + its NodeStarted/NodeFinished events + the run's last_seq,
in one transaction) through SQLAlchemy on a file SQLite database and on PostgreSQL. It uses the
journal's own table shapes, not the canvas_store service (which was not merged when this was
written); "via":"sqlalchemy-journal" says so in the output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.context import Services
from services.orchestrator.core.loop import LoopSettings
from services.orchestrator.core.orchestrator import Orchestrator, RunRequest
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


async def run_once(orch: Orchestrator, dsl: dict[str, Any]) -> float:
    started = time.perf_counter()
    record = await orch.start_run(RunRequest(dsl=dsl, query="q"))
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


async def per_node_us(n: int, repeat: int) -> tuple[float, float]:
    """(ours, langgraph) in µs per node. The two runs alternate so both see the same machine load;
    the best run of each is reported (the machine is shared, so noise only ever adds time)."""
    orch = orchestrator()
    dsl = chain_dsl(n)
    app = langgraph_chain(n)
    config = {"recursion_limit": n + 10}
    await run_once(orch, dsl)  # warm up imports and caches
    app.invoke({"x": ""}, config)
    ours, theirs = [], []
    for _ in range(repeat):
        ours.append(await run_once(orch, dsl))
        started = time.perf_counter()
        app.invoke({"x": ""}, config)
        theirs.append(time.perf_counter() - started)
    return min(ours) / (n + 1) * 1e6, min(theirs) / (n + 1) * 1e6


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


def checkpoint_ms(url: str, steps: int) -> float:
    """One journal commit per step, each its own transaction (the orchestrator's per-step write)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    meta = sa.MetaData()
    runs = sa.Table("bench_runs", meta, sa.Column("id", sa.String(32), primary_key=True), sa.Column("last_seq", sa.BigInteger),
                    sa.Column("lease_token", sa.BigInteger))
    journal = sa.Table("bench_steps", meta, sa.Column("run_id", sa.String(32), primary_key=True),
                       sa.Column("step_index", sa.BigInteger, primary_key=True), sa.Column("state", sa.JSON))
    events = sa.Table("bench_events", meta, sa.Column("run_id", sa.String(32), primary_key=True),
                      sa.Column("seq", sa.BigInteger, primary_key=True), sa.Column("payload", sa.LargeBinary))
    meta.drop_all(engine)
    meta.create_all(engine)
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record):  # WAL + NORMAL: durable at checkpoints, the usual server setting
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")

        engine.dispose()
    run_id = uuid.uuid4().hex
    with engine.begin() as conn:
        conn.execute(runs.insert().values(id=run_id, last_seq=0, lease_token=1))
    state = {"key": "n1", "outputs": {"result": "x" * 64}, "writes": [], "taken": None, "exception": False}
    payload = os.urandom(180)
    # Fencing and seq assignment in one statement: the row update fails (no row) when the token is stale.
    advance = (runs.update().where(runs.c.id == run_id, runs.c.lease_token == 1)
               .values(last_seq=runs.c.last_seq + 2).returning(runs.c.last_seq))
    started = time.perf_counter()
    for step in range(1, steps + 1):
        with engine.begin() as conn:
            last = conn.execute(advance).scalar_one()
            conn.execute(journal.insert().values(run_id=run_id, step_index=step, state=state))
            conn.execute(events.insert(), [{"run_id": run_id, "seq": last - 1, "payload": payload},
                                           {"run_id": run_id, "seq": last, "payload": payload}])
    elapsed = time.perf_counter() - started
    meta.drop_all(engine)
    engine.dispose()
    return elapsed / steps * 1000


def _postgres_url(explicit: str | None) -> tuple[str | None, str | None]:
    """A throwaway database on the local server; (url, admin url to drop it)."""
    import sqlalchemy as sa

    admin = explicit or os.environ.get("BENCH_POSTGRES_URL") or "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    name = f"bench_engine_{uuid.uuid4().hex[:8]}"
    try:
        engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        engine.dispose()
    except sa.exc.OperationalError:
        return None, None
    return admin.rsplit("/", 1)[0] + "/" + name, admin


def _drop_postgres(url: str, admin: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}"')
    engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine")
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--postgres-url", help="admin URL of a PostgreSQL server (a temporary database is created)")
    args = parser.parse_args(argv)

    ours, theirs = asyncio.run(per_node_us(args.chain, args.repeat))
    print(json.dumps({"bench": "engine", "metric": "per_node_us", "ours": round(ours, 1), "langgraph": round(theirs, 1),
                      "ratio": round(ours / theirs, 3), "nodes": args.chain, "goal_ratio": 0.5}), flush=True)

    best, median = asyncio.run(fanout_ratio(64, 0.05))
    print(json.dumps({"bench": "engine", "metric": "fanout_ratio", "value": round(best, 3), "median": round(median, 3),
                      "branches": 64, "wait_ms": 50, "goal": 1.3}), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        sqlite_ms = checkpoint_ms(f"sqlite:///{tmp}/journal.db", args.steps)
    print(json.dumps({"bench": "engine", "metric": "checkpoint_ms", "db": "sqlite", "value": round(sqlite_ms, 3),
                      "via": "sqlalchemy-journal", "goal_ms": 1.0}), flush=True)
    url, admin = _postgres_url(args.postgres_url)
    if url and admin:
        try:
            pg_ms = checkpoint_ms(url, args.steps)
        finally:
            _drop_postgres(url, admin)
        print(json.dumps({"bench": "engine", "metric": "checkpoint_ms", "db": "postgresql", "value": round(pg_ms, 3),
                          "via": "sqlalchemy-journal"}), flush=True)
    else:
        print(json.dumps({"bench": "engine", "metric": "checkpoint_ms", "db": "postgresql", "value": None,
                          "skipped": "no PostgreSQL reachable"}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
