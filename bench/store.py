"""Canvas store benchmark: our gRPC service vs raw SQLAlchemy Core on the same database, same run.

    python -m bench.store --db sqlite|postgresql|mariadb [--canvases 100000] [--seconds 3] [--concurrency 8]
                          [--store-pool N] [--store-event-loop auto|uvloop|asyncio]
                          [--client auto|native|python]

Seeds N canvases with bulk inserts into a fresh database (SQLite file in a temp dir; a uniquely named
database on the local PostgreSQL/MariaDB server, dropped at the end; override the server with
STORE_BENCH_POSTGRES_URL / STORE_BENCH_MYSQL_URL), analyzes and checkpoints it, starts the store as a
separate process (`python -m services.canvas_store --config ...`) and measures:

- get / update: ops/s over gRPC (GetCanvas; UpdateCanvas of the description with the etag) and ops/s
  of the same operation in raw SQLAlchemy Core, both with the same number of concurrent workers
  (`--concurrency`: in-flight RPCs vs threads), and their ratio. "The same operation" means:
  - get: SELECT of the columns a GetCanvas returns (every canvas column but the internal title_key and
    revision_counter), by primary key, as one statement in autocommit mode, rows through Core's result
    processors (JSON decoded): what the store's point read does.
  - update: the conditional write on the etag that returns the updated resource (AIP-134), i.e.
    `UPDATE ... SET description, etag, update_time WHERE id AND etag RETURNING <those columns>` as one
    autocommit statement (on MariaDB, which has no UPDATE ... RETURNING: UPDATE then SELECT in one
    transaction), and on SQLite under the same in-process writer lock the store takes, so neither side
    spins in SQLite's busy handler. A returned etag other than the new one fails the run.
  Both use the same engine (`open_database` settings). Two raw variants run in the same process:
  `raw_ops_s` (`value` = ours / it) is idiomatic Core, a `with engine.connect()` per operation (a pool
  checkout, and on PostgreSQL/MariaDB the engine's pre-ping, each time); `raw_held_ops_s`
  (`value_held`) keeps one connection per worker thread for the whole run, as the store's DB threads
  keep theirs for the fast paths (`Database.held_connection`), so it is the statement and Core alone.
  The raw side does no gRPC, authentication, policy check or protobuf conversion: that is the overhead
  the ratio measures. The load client's own gRPC work shares the two cores with the store, and the raw
  side has no client at all; the client is only the harness, so by default (`--client auto`) it is
  bench/native/store_load.cc, a C++ gRPC client on one completion queue (built on first use, see
  bench/loadclient.py): 110-230 us of CPU per call where the cheapest Python client, `--client python`
  (one sync channel whose `.future` calls are chained by completion callbacks), costs 240-510 us. Either
  keeps `--concurrency` calls in flight, and the store serves the same calls. Each side runs in `--rounds`
  alternating slices so load from elsewhere hits all alike.
  `server_cpu_us` / `client_cpu_us`: CPU per call of ours in the store process and in the load client's
  process, from /proc: steadier than ops/s on a shared machine. `client` says which client ran.
  `steal_pct` / `raw_steal_pct`: the share of the machine's CPU time the hypervisor gave to other guests
  during ours' / the raw slices; runs with a high one measure the host (bench/procstat.py).
- list: p50 latency of ListCanvases (50 per page, update_time desc, paging forward through the
  100,000 canvases) and of the equivalent raw keyset SELECT (live canvases only, as the store lists).
- commit: p50 latency of CommitRunStep (one step + two events) over gRPC and through the store's
  repository in-process (the transaction alone).

Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import grpc
import sqlalchemy as sa
import yaml
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import canvas_store_pb2_grpc, orchestrator_pb2
from google.protobuf import field_mask_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.loadclient import Load, NativeClientUnavailable, NativeLoad, PythonLoad, build_native_client
from bench.procstat import MachineTicks, cpu_seconds, machine_ticks
from services.canvas_store.adapters.sql import engine as sql_engine
from services.canvas_store.adapters.sql.models import canvases, members, tenants
from services.canvas_store.adapters.sql.run_repo import RunRepository
from services.canvas_store.core.policy import Target
from services.canvas_store.core.types import RunCommit, RunRecord, RunStep, StoredEvent
from services.common import event_loops
from services.common.clients import CHANNEL_OPTIONS, create_channel
from services.common.structs import to_struct

TENANT, USER, TOKEN = "bench", "bench-user", "bench-token-" + secrets.token_hex(8)
POSTGRES_URL = os.environ.get("STORE_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MYSQL_URL = os.environ.get("STORE_BENCH_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/")
RESOURCE_COLUMNS = [c for c in canvases.c if c.name not in ("title_key", "revision_counter")]
"""What a GetCanvas / UpdateCanvas returns (the store's point read selects exactly these)."""
DSL = {
    "components": {
        "begin": {"obj": {"component_name": "Begin", "params": {"prologue": "Hi! How can I help?"}},
                  "downstream": ["llm:0"], "upstream": []},
        "llm:0": {"obj": {"component_name": "LLM", "params": {"llm_id": "", "sys_prompt": "Answer briefly.",
                                                             "temperature": 0.1, "max_tokens": 512}},
                  "downstream": ["message:0"], "upstream": ["begin"]},
        "message:0": {"obj": {"component_name": "Message", "params": {"content": ["{llm:0@content}"]}},
                      "downstream": [], "upstream": ["llm:0"]},
    },
    "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": []},
    "history": [], "path": [], "retrieval": [],
}


def emit(**fields) -> None:
    print(json.dumps({"bench": "store", **fields}), flush=True)


@contextlib.contextmanager
def database(kind: str, tmp: Path, server: str | None = None) -> Iterator[str]:
    """A throwaway database (sqlite | postgresql | mariadb), dropped afterwards; `server` overrides the admin URL."""
    name = f"ac_store_bench_{uuid.uuid4().hex[:10]}"
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'store.db'}"
        return
    server = server or (POSTGRES_URL if kind == "postgresql" else MYSQL_URL)
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"' if kind == "postgresql" else
                             f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        yield sa.engine.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' if kind == "postgresql" else
                                 f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


def seed(db: sql_engine.Database, count: int) -> list[str]:
    """Bulk-insert `count` canvases owned by the bench user (one executemany per 5,000 rows)."""
    sql_engine.upgrade(db.engine)
    now = time.time_ns() // 1_000_000
    ids = [uuid.uuid4().hex for _ in range(count)]
    with db.engine.begin() as conn:
        conn.execute(sa.insert(tenants).values(id=TENANT, owner_id=USER, create_time=now))
        conn.execute(sa.insert(members).values(tenant_id=TENANT, user_id=USER, role="owner", create_time=now))
    for start in range(0, count, 5000):
        rows = [dict(id=cid, tenant_id=TENANT, owner_id=USER, title=f"Canvas {i:06d}", title_key=f"canvas {i:06d}",
                     description="", avatar="", permission="TEAM" if i % 3 == 0 else "ME", release=False,
                     category="AGENT", tags=[], dsl=DSL, etag=secrets.token_hex(8), head_revision_id="",
                     published_revision_id="", revision_counter=0, create_time=now - count + i, update_time=now - count + i)
                for i, cid in enumerate(ids[start:start + 5000], start)]
        with db.engine.begin() as conn:
            conn.execute(sa.insert(canvases), rows)
    with db.engine.begin() as conn:  # planner statistics, as a database in service would have
        conn.exec_driver_sql("ANALYZE canvases" if db.backend != "mysql" else "ANALYZE TABLE canvases")
    # Write the bulk load out before measuring: otherwise the database flushes it in the background during the
    # first measurements, and every commit's WAL flush (fsync) waits behind that I/O.
    with db.engine.connect() as conn:
        if db.backend == "postgresql":
            conn.exec_driver_sql("CHECKPOINT")
        elif db.backend == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return ids


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def store_process(url: str, tmp: Path, pool_size: int | None = None) -> Iterator[int]:
    with store_process_pid(url, tmp, pool_size) as (port, _pid):
        yield port


@contextlib.contextmanager
def store_process_pid(url: str, tmp: Path, pool_size: int | None = None,
                      event_loop: str | None = None) -> Iterator[tuple[int, int]]:
    """The store as its own process; yields (port, pid)."""
    port = free_port()
    config = {"data_dir": str(tmp / "data"), "log": {"level": "WARNING"},
              "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": TENANT, "user": USER},
                                                     {"token": TOKEN + "-svc", "tenant": TENANT, "user": "orch",
                                                      "role": "service"}]},
              "store": {"database_url": url, "port": port, **({"db_pool_size": pool_size} if pool_size else {}),
                        **({"event_loop": event_loop} if event_loop else {})}}
    path = tmp / "store.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k != "PORT"}
    process = subprocess.Popen([sys.executable, "-m", "services.canvas_store", "--config", str(path)], env=env,
                               stdout=subprocess.DEVNULL)
    try:
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(30)


async def wait_serving(channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(grpc.aio.AioRpcError):
            reply = await health.Check(health_pb2.HealthCheckRequest(service="agentcanvas.v1.CanvasStore"), timeout=2)
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
        await asyncio.sleep(0.1)
    raise TimeoutError("the store did not become SERVING")


def held_connections(db: sql_engine.Database, count: int, *, autocommit: bool) -> list[sa.Connection]:
    """One Core connection per raw worker, kept for the whole measurement, as the store's threads keep theirs."""
    engine = db.engine.execution_options(isolation_level="AUTOCOMMIT") if autocommit else db.engine
    return [engine.connect() for _ in range(count)]


def raw_rate(worker: Callable[[int], None], concurrency: int, seconds: float) -> tuple[int, float]:
    done = [0] * concurrency
    stop = time.perf_counter() + seconds

    def loop(index: int) -> None:
        while time.perf_counter() < stop:
            worker(index)
            done[index] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done), time.perf_counter() - started


def compare(ours: Load, raws: dict[str, Callable[[int], None]], concurrency: int, seconds: float, rounds: int,
            store_pid: int) -> dict[str, float]:
    """ops/s of ours and of each raw variant, measured in `rounds` alternating slices of seconds/rounds each, so
    that load from other processes on the machine falls on every side alike; plus the CPU per call of ours,
    in the store process (`server_cpu_us`) and in the load client's (`client_cpu_us`); and the share
    of the machine's CPU time the hypervisor took during ours' slices (`steal_pct`) and during the raw
    slices (`raw_steal_pct`), see bench/procstat.py."""
    totals = {name: [0, 0.0] for name in ("ours", *raws)}
    machine = {name: MachineTicks(0, 0, 0) for name in totals}
    server_cpu = client_cpu = 0.0
    for _ in range(rounds):
        for name in totals:
            machine_before = machine_ticks()
            if name == "ours":
                server_before, client_before = cpu_seconds(store_pid), cpu_seconds(ours.pid)
                done, elapsed = ours.run(seconds / rounds)
                server_cpu += cpu_seconds(store_pid) - server_before
                client_cpu += cpu_seconds(ours.pid) - client_before
            else:
                done, elapsed = raw_rate(raws[name], concurrency, seconds / rounds)
            machine[name] = machine[name].plus(machine_ticks().since(machine_before))
            totals[name][0] += done
            totals[name][1] += elapsed
    rates = {name: done / elapsed for name, (done, elapsed) in totals.items()}
    calls = max(totals["ours"][0], 1)
    rates["server_cpu_us"], rates["client_cpu_us"] = 1e6 * server_cpu / calls, 1e6 * client_cpu / calls
    rates["steal_pct"] = 100 * machine["ours"].steal_share
    rates["raw_steal_pct"] = 100 * machine["raw"].steal_share
    return rates


def emit_ratio(kind: str, op: str, concurrency: int, client: str, rates: dict[str, float]) -> None:
    emit(metric="ops_ratio", db=kind, op=op, concurrency=concurrency, ours_ops_s=round(rates["ours"], 1),
         raw_ops_s=round(rates["raw"], 1), value=round(rates["ours"] / rates["raw"], 3),
         raw_held_ops_s=round(rates["raw_held"], 1), value_held=round(rates["ours"] / rates["raw_held"], 3),
         server_cpu_us=round(rates["server_cpu_us"]), client_cpu_us=round(rates["client_cpu_us"]), client=client,
         steal_pct=round(rates["steal_pct"], 1), raw_steal_pct=round(rates["raw_steal_pct"], 1))


@dataclass
class Measure:
    """One ops_ratio measurement's settings: the database, the store's process, the load client and the slices."""

    kind: str
    port: int
    store_pid: int
    native_client: Path | None
    """The C++ load client (bench/loadclient.py); None: grpc-python calls from this process."""
    sync_stub: canvas_store_pb2_grpc.CanvasStoreStub
    metadata: tuple[tuple[str, str], ...]
    concurrency: int
    seconds: float
    rounds: int

    @property
    def client(self) -> str:
        return "native" if self.native_client else "python"

    def load(self, op: str, lines: list[str], start: Callable[[int], grpc.Future],
             finish: Callable[[int, Any], None]) -> Load:
        """Ours' load: the native client fed `lines`, or `start`/`finish` on the sync stub (see loadclient)."""
        if self.native_client:
            return NativeLoad(self.native_client, f"127.0.0.1:{self.port}", TOKEN, op, self.concurrency, lines)
        return PythonLoad(start, finish, self.concurrency)

    def ratio(self, op: str, ours: Load, raws: dict[str, Callable[[int], None]]) -> None:
        try:
            rates = compare(ours, raws, self.concurrency, self.seconds, self.rounds, self.store_pid)
        finally:
            ours.close()
        emit_ratio(self.kind, op, self.concurrency, self.client, rates)


async def run(kind: str, count: int, seconds: float, concurrency: int, rounds: int = 3,
              store_pool: int | None = None, store_event_loop: str | None = None,
              native_client: Path | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="ac-bench-store-") as tmp_name, database(kind, Path(tmp_name)) as url:
        tmp = Path(tmp_name)
        db = sql_engine.open_database(url, pool_size=concurrency)
        began = time.perf_counter()
        ids = seed(db, count)
        emit(metric="seed_s", db=kind, canvases=count, value=round(time.perf_counter() - began, 2))
        with store_process_pid(url, tmp, store_pool, store_event_loop) as (port, store_pid):
            channel = create_channel(f"127.0.0.1:{port}")
            await wait_serving(channel)
            stub = canvas_store_pb2_grpc.CanvasStoreStub(channel)
            metadata = (("authorization", f"Bearer {TOKEN}"),)
            service_metadata = (("authorization", f"Bearer {TOKEN}-svc"),)
            # Without the native client, get/update load comes from a sync channel (see loadclient.grpc_rate);
            # the rest uses the grpc.aio one.
            sync_channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
            sync_stub = canvas_store_pb2_grpc.CanvasStoreStub(sync_channel)
            await stub.GetCanvas(pb.GetCanvasRequest(id=ids[0]), metadata=metadata)  # warm-up
            sync_stub.GetCanvas(pb.GetCanvasRequest(id=ids[0]), metadata=metadata)
            measure = Measure(kind, port, store_pid, native_client, sync_stub, metadata, concurrency, seconds, rounds)
            await bench_get(measure, db, ids)
            await bench_update(measure, stub, db, ids)
            sync_channel.close()
            await bench_list(kind, stub, metadata, db, pages=min(200, (count - 1) // 50))
            await bench_commit(kind, stub, service_metadata, db)
            await channel.close()
        db.dispose()


async def bench_get(measure: Measure, db: sql_engine.Database, ids: list[str]) -> None:
    counter = iter(range(10**12))

    def ours(_index: int) -> grpc.Future:
        return measure.sync_stub.GetCanvas.future(pb.GetCanvasRequest(id=ids[next(counter) % len(ids)]),
                                                  metadata=measure.metadata)

    def ours_reply(_index: int, reply: pb.Canvas) -> None:
        assert reply.id, reply

    query = sa.select(*RESOURCE_COLUMNS).where(canvases.c.id == sa.bindparam("b_id"))
    autocommit = db.engine.execution_options(isolation_level="AUTOCOMMIT")
    held = held_connections(db, measure.concurrency, autocommit=True)

    def raw(_index: int) -> None:
        with autocommit.connect() as conn:
            conn.execute(query, {"b_id": ids[next(counter) % len(ids)]}).one()

    def raw_held(index: int) -> None:
        held[index].execute(query, {"b_id": ids[next(counter) % len(ids)]}).one()

    try:
        measure.ratio("get", measure.load("get", ids, ours, ours_reply), {"raw": raw, "raw_held": raw_held})
    finally:
        for conn in held:
            conn.close()


async def bench_update(measure: Measure, stub: canvas_store_pb2_grpc.CanvasStoreStub, db: sql_engine.Database,
                       ids: list[str]) -> None:
    # Each worker updates its own canvas, carrying the etag from its previous write.
    concurrency = measure.concurrency
    ours_targets = ids[-concurrency:]
    raw_targets = ids[-2 * concurrency:-concurrency]
    etags = {}
    for cid in ours_targets:
        etags[cid] = (await stub.GetCanvas(pb.GetCanvasRequest(id=cid), metadata=measure.metadata)).etag
    with db.engine.connect() as conn:
        for cid in raw_targets:
            etags[cid] = conn.execute(sa.select(canvases.c.etag).where(canvases.c.id == cid)).scalar_one()
    mask = field_mask_pb2.FieldMask(paths=["description"])

    def ours(index: int) -> grpc.Future:
        cid = ours_targets[index]
        return measure.sync_stub.UpdateCanvas.future(pb.UpdateCanvasRequest(
            canvas=pb.Canvas(id=cid, etag=etags[cid], description=f"d{time.perf_counter_ns()}"), update_mask=mask),
            metadata=measure.metadata)

    def ours_reply(index: int, reply: pb.Canvas) -> None:
        etags[ours_targets[index]] = reply.etag

    returning = db.engine.dialect.update_returning
    statement = sa.update(canvases).where(canvases.c.id == sa.bindparam("b_id"), canvases.c.etag == sa.bindparam("b_etag"))
    if returning:
        statement = statement.returning(*RESOURCE_COLUMNS)
    read_back = sa.select(*RESOURCE_COLUMNS).where(canvases.c.id == sa.bindparam("b_id"))
    engine = db.engine.execution_options(isolation_level="AUTOCOMMIT") if returning else db.engine
    held = held_connections(db, concurrency, autocommit=returning)
    lock = db.write_lock or contextlib.nullcontext()

    def write(conn: sa.Connection, index: int) -> None:
        cid = raw_targets[index]
        new = secrets.token_hex(8)
        params = {"b_id": cid, "b_etag": etags[cid], "description": f"d{time.perf_counter_ns()}", "etag": new,
                  "update_time": time.time_ns() // 1_000_000}
        if returning:
            row = conn.execute(statement, params).one()
        else:
            assert conn.execute(statement, params).rowcount == 1
            row = conn.execute(read_back, {"b_id": cid}).one()
            conn.commit()
        assert row.etag == new
        etags[cid] = new

    def raw(index: int) -> None:
        with lock, engine.connect() as conn:
            write(conn, index)

    def raw_held(index: int) -> None:
        with lock:
            write(held[index], index)

    ours_load = measure.load("update", [f"{cid} {etags[cid]}" for cid in ours_targets], ours, ours_reply)
    try:
        measure.ratio("update", ours_load, {"raw": raw, "raw_held": raw_held})
    finally:
        for conn in held:
            conn.close()


async def bench_list(kind, stub, metadata, db, pages: int = 200) -> None:
    ours_ms, raw_ms = [], []
    token = ""
    for _ in range(pages):
        started = time.perf_counter()
        reply = await stub.ListCanvases(pb.ListCanvasesRequest(page_size=50, page_token=token), metadata=metadata)
        ours_ms.append((time.perf_counter() - started) * 1000)
        assert len(reply.canvases) == 50
        token = reply.next_page_token
    columns = [c for c in canvases.c if c.name != "dsl"]
    after = None
    for _ in range(pages):
        started = time.perf_counter()
        query = sa.select(*columns).where(canvases.c.tenant_id == TENANT, canvases.c.delete_time == 0)
        if after:  # the same keyset predicate the store uses
            query = query.where(canvases.c.update_time <= after[0],
                                sa.or_(canvases.c.update_time < after[0], canvases.c.id < after[1]))
        with db.engine.connect() as conn:
            rows = conn.execute(query.order_by(canvases.c.update_time.desc(), canvases.c.id.desc()).limit(51)).all()
        raw_ms.append((time.perf_counter() - started) * 1000)
        after = (rows[49].update_time, rows[49].id)
    emit(metric="list_p50_ms", db=kind, page_size=50,
         value=round(statistics.median(ours_ms), 3), raw_p50_ms=round(statistics.median(raw_ms), 3),
         p99_ms=round(sorted(ours_ms)[int(len(ours_ms) * 0.99) - 1], 3))


def _payload(text: str) -> bytes:
    """A serialized RunEvent (what the store accepts as an event payload) of about `text`'s size."""
    return orchestrator_pb2.RunEvent(message_delta=orchestrator_pb2.MessageDelta(content=text)).SerializeToString()


async def bench_commit(kind, stub, metadata, db, commits: int = 300) -> None:
    async def one_run() -> tuple[str, int]:
        record = pb.RunRecord()
        record.spec.CopyFrom(to_struct({"dsl": {"components": {}}}))
        run = await stub.CreateRunRecord(pb.CreateRunRecordRequest(run=record), metadata=metadata)
        lease = await stub.AcquireRunLease(pb.AcquireRunLeaseRequest(run_id=run.id, holder="bench"), metadata=metadata)
        return run.id, lease.token

    run_id, token = await one_run()
    ours_ms = []
    for n in range(commits):
        request = pb.CommitRunStepRequest(
            run_id=run_id, lease_token=token, steps=[pb.RunStep(node_id=f"n{n}", attempt=1)],
            events=[pb.StoredRunEvent(event_type="node_finished", payload=_payload("x" * 190)),
                    pb.StoredRunEvent(event_type="message_delta", payload=_payload("y" * 55))])
        started = time.perf_counter()
        await stub.CommitRunStep(request, metadata=metadata)
        ours_ms.append((time.perf_counter() - started) * 1000)
    repo = RunRepository(db)
    run = repo.create(RunRecord(id=uuid.uuid4().hex, tenant_id=TENANT, creator_id=USER), "")
    allow: Callable[[Target], None] = lambda _target: None  # noqa: E731 - the policy check is not under test here
    lease = repo.acquire(run.id, "bench", 60_000, allow)
    core_ms = []
    for n in range(commits):
        commit = RunCommit(run_id=run.id, lease_token=lease.token, steps=[RunStep(node_id=f"n{n}", attempt=1, state={})],
                           events=[StoredEvent("node_finished", b"x" * 200), StoredEvent("message_delta", b"y" * 60)])
        started = time.perf_counter()
        repo.commit(commit, allow)
        core_ms.append((time.perf_counter() - started) * 1000)
    emit(metric="commit_p50_ms", db=kind, value=round(statistics.median(ours_ms), 3),
         transaction_p50_ms=round(statistics.median(core_ms), 3), steps=1, events=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql", "mariadb"), default="sqlite")
    parser.add_argument("--canvases", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurement slices per side")
    parser.add_argument("--store-pool", type=int, default=None,
                        help="the store's db_pool_size (default: the store's own default)")
    parser.add_argument("--store-event-loop", choices=event_loops.CHOICES, default=None,
                        help="the store's event_loop (default: the store's own default, uvloop)")
    parser.add_argument("--client", choices=("auto", "native", "python"), default="auto",
                        help="the get/update load client: the C++ one (built on first use), grpc-python, or auto: "
                             "native when it can be built, else python with a warning")
    args = parser.parse_args(argv)
    if args.canvases < max(100, 2 * args.concurrency):
        parser.error("--canvases must be at least 100 and twice --concurrency")
    native_client = None
    if args.client != "python":
        try:
            native_client = build_native_client()
        except NativeClientUnavailable as exc:
            if args.client == "native":
                parser.error(f"the native load client cannot be built: {exc}")
            print(f"bench.store: using the Python load client; the native one cannot be built: {exc}",
                  file=sys.stderr)
    asyncio.run(run(args.db, args.canvases, args.seconds, args.concurrency, args.rounds, args.store_pool,
                    args.store_event_loop, native_client))
    return 0


if __name__ == "__main__":
    sys.exit(main())
