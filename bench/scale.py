"""Scale-out: runs/s with 1, 2 and 4 orchestrator replicas on PostgreSQL, and what limits it.

    python -m bench.scale [--replicas 1,2,4] [--seconds 10] [--clients-per-replica 8] [--canvas llm|plain]

Deployment (all processes on loopback, started by tests/support/cluster.py): one canvas_store process
on a fresh PostgreSQL database (shared by every replica, as in production where the store is its own
Deployment), two llm_gateway replicas (client-side round robin) in front of the scripted
OpenAI-compatible server answering at once (0 ms), Redis admission slots (cap disabled), and N
orchestrator replicas. For each N the replicas are started fresh, warmed up, then loaded by
`clients-per-replica × N` closed-loop clients (each RunCanvas → read the stream to WorkflowFinished →
next), spread over the replicas. Canvas `llm`: Begin → LLM → Message (through the gateway);
`plain`: Begin → StringTransform → Message (orchestrator and store only).

Output, one JSON line each:
  {"bench": "scale", "metric": "runs_per_s", "replicas": N, "value": …, "ratio": … (to 1 replica), "goal_ratio": 1.8}
  {"bench": "scale", "metric": "cpu_cores", "replicas": N, "orchestrators": …, "store": …, "gateways": …,
   "postgres": …, "redis": …, "client": …, "total": …, "machine_cores": …}
cpu_cores is CPU-seconds per wall second during the measurement (from /proc/<pid>/stat), so the
limiting side is visible next to the figure: on a 2-core machine `total` near 2 means the machine is
saturated and more replicas cannot help.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import grpc
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from bench.procstat import cpu_seconds, machine_ticks
from services.common.structs import to_struct
from tests.support.cluster import REDIS_URL, Process, ProcessCluster, postgres_database
from tests.support.openai_server import ScriptedOpenAIServer

TOKENS = [{"token": "t-bench", "tenant": "bench", "user": "bench"},
          {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"}]
AUTH = [("authorization", "Bearer t-bench")]


def canvas(kind: str) -> dict:
    def node(name: str, params: dict, down: list[str], up: list[str]) -> dict:
        return {"obj": {"component_name": name, "params": params}, "downstream": down, "upstream": up}

    if kind == "llm":
        middle = node("LLM", {"llm_id": "scripted", "prompts": [{"role": "user", "content": "{sys.query}"}]}, ["msg"], ["begin"])
        content = "{work@content}"
    else:
        middle = node("StringTransform", {"method": "merge", "script": "echo {sys.query}"}, ["msg"], ["begin"])
        content = "{work@result}"
    return {"components": {"begin": node("Begin", {}, ["work"], []), "work": middle,
                           "msg": node("Message", {"content": [content]}, [], ["work"])}}


def pids_named(*names: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if any(comm.startswith(n) for n in names):
                found.append(int(entry.name))
    return found


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    def __init__(self, groups: dict[str, list[int]]):
        self.groups = groups
        self.start = {name: sum(cpu_seconds(p) for p in pids) for name, pids in groups.items()}
        self.client = self_cpu()
        self.machine = machine_ticks()
        self.wall = time.perf_counter()

    def cores(self) -> dict[str, float]:
        wall = time.perf_counter() - self.wall
        out = {name: round((sum(cpu_seconds(p) for p in pids) - self.start[name]) / wall, 2)
               for name, pids in self.groups.items()}
        out["client"] = round((self_cpu() - self.client) / wall, 2)
        out["total"] = round(sum(out.values()), 2)
        used = machine_ticks().since(self.machine)
        share = used.busy / max(1, used.total)
        out["machine_busy"] = round(share * (os.cpu_count() or 1), 2)  # cores busy, other tenants' load included
        out["steal_pct"] = round(100 * used.steal_share, 1)  # of all CPU time, taken by the hypervisor
        return out


async def one_run(stub, dsl_struct, query: str) -> bool:
    last = None
    async for event in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(dsl=dsl_struct, query=query), metadata=AUTH, timeout=120):
        last = event
    return last is not None and last.workflow_finished.status == common_pb2.RUN_STATUS_SUCCEEDED


async def load(replicas: list[Process], clients: int, seconds: float, kind: str, meter_groups: dict[str, list[int]]):
    channels = [grpc.aio.insecure_channel(r.address) for r in replicas]
    stubs = [orchestrator_pb2_grpc.OrchestratorStub(c) for c in channels]
    dsl_struct = to_struct(canvas(kind))
    for stub in stubs:  # warm-up: connections, DSL caches, litellm paths
        for i in range(5):
            assert await one_run(stub, dsl_struct, f"warm {i}")
    stop_at = 0.0
    done = failed = 0
    measuring = asyncio.Event()

    async def client(index: int) -> None:
        nonlocal done, failed
        stub = stubs[index % len(stubs)]
        while True:
            ok = await one_run(stub, dsl_struct, f"q{index}")
            if measuring.is_set():
                if time.perf_counter() >= stop_at:
                    return
                done += ok
                failed += not ok

    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    await asyncio.sleep(1.0)  # ramp-up: every client is in its loop before counting starts
    meter_groups["postgres"] = pids_named("postgres")  # backends exist once the stores have connected
    meter = CpuMeter(meter_groups)
    started = time.perf_counter()
    stop_at = started + seconds
    measuring.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    cores = meter.cores()
    for channel in channels:
        await channel.close()
    return done / elapsed, failed, cores


async def main(replica_counts: list[int], seconds: float, per_replica: int, kind: str, stores: str) -> None:
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    cluster = ProcessCluster(workdir, TOKENS, log_level="WARNING")
    baseline = None
    with postgres_database("ac_bench_scale") as url, ScriptedOpenAIServer() as provider:
        try:
            store = await cluster.spawn("store", "canvas_store", {"database_url": url, "seed_templates": False})
            model = {"scripted": {"model": "openai/test-model", "api_base": provider.base_url, "api_key": "sk-bench"}}
            gateways = [await cluster.spawn(f"gateway-{i}", "llm_gateway", {"models": model, "embedded": {"enabled": False}})
                        for i in (1, 2)]
            gateway_target = "ipv4:" + ",".join(g.address for g in gateways)
            for count in replica_counts:
                extra_stores = [] if stores == "shared" else [
                    await cluster.spawn(f"store-{count}-{i}", "canvas_store", {
                        "database_url": url, "seed_templates": False, "auto_migrate": False})
                    for i in range(1, count)]
                store_of = [store, *extra_stores]
                replicas = [await cluster.spawn(f"orch-{count}-{i}", "orchestrator", {
                    "holder": f"orch-{count}-{i}", "service_token": "t-svc", "redis_url": REDIS_URL,
                    "max_runs_per_tenant": 0}, addresses={"canvas_store": store_of[i % len(store_of)].address,
                                                          "llm_gateway": gateway_target}) for i in range(count)]
                groups = {"orchestrators": [r.popen.pid for r in replicas], "store": [s.popen.pid for s in store_of],
                          "gateways": [g.popen.pid for g in gateways], "postgres": pids_named("postgres"),
                          "redis": pids_named("redis-server")}
                rate, failed, cores = await load(replicas, per_replica * count, seconds, kind, groups)
                baseline = baseline or rate
                print(json.dumps({"bench": "scale", "metric": "runs_per_s", "replicas": count, "value": round(rate, 1),
                                  "ratio": round(rate / baseline, 3), "goal_ratio": 1.8, "canvas": kind, "stores": len(store_of),
                                  "clients": per_replica * count, "failed": failed}), flush=True)
                print(json.dumps({"bench": "scale", "metric": "cpu_cores", "replicas": count, **cores,
                                  "machine_cores": os.cpu_count()}), flush=True)
                for replica in (*replicas, *extra_stores):
                    replica.popen.terminate()
                for replica in (*replicas, *extra_stores):
                    replica.popen.wait(30)
                    del cluster.processes[replica.name]
        finally:
            cluster.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients-per-replica", type=int, default=8)
    parser.add_argument("--canvas", choices=["llm", "plain"], default="llm")
    parser.add_argument("--stores", choices=["per-replica", "shared"], default="per-replica",
                        help="one canvas_store process per orchestrator replica (all on one database), or one shared")
    args = parser.parse_args()
    asyncio.run(main([int(n) for n in args.replicas.split(",")], args.seconds, args.clients_per_replica, args.canvas,
                     args.stores))
