"""End-to-end benchmark: Begin → Agent → Message over gRPC on ONE orchestrator replica.

    python -m bench.e2e [--runs 400] [--concurrency 1,32] [--profile FILE]

Starts three real service processes (canvas_store on SQLite, llm_gateway, orchestrator) sharing one
config file, and a scripted OpenAI-compatible server that answers at once (one short text reply,
streamed). Prints one JSON line per figure:

    {"bench":"e2e","metric":"runs_per_s","concurrency":1|32,"value":…,"goal":220}
    {"bench":"e2e","metric":"first_event_ms","concurrency":32,"p50":…,"p99":…}
    {"bench":"e2e","metric":"first_delta_ms","concurrency":32,"p50":…,"p99":…}
    {"bench":"e2e","metric":"cpu_ms_per_run","concurrency":1|32,"canvas_store":…,"llm_gateway":…,
     "orchestrator":…,"client":…,"model_server":…,"total":…}
    {"bench":"e2e","metric":"gateway_chats_per_s","concurrency":32,"value":…}   the peer limit, same run

`cpu_ms_per_run` is each process's user+system CPU over the phase (from /proc/PID/stat; the client
and the scripted model server are measured the same way, the model server runs in its own process
so that its HTTP work is not charged to the client) divided by the runs of the phase.

`gateway_chats_per_s` drives ChatStream on the same gateway directly: a run makes one model call, so
the orchestrator can never be faster than that. `--profile FILE` runs the orchestrator under
py-spy (`py-spy record --nonblocking --format raw`, collapsed stacks) while the concurrency-32 phase runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import yaml
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, llm_gateway_pb2, llm_gateway_pb2_grpc, orchestrator_pb2, orchestrator_pb2_grpc

from bench.procstat import cpu_seconds
from services.common.health import wait_until_serving
from services.common.structs import to_struct
from tests.support.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "t-bench"
SERVICE_TOKEN = "t-bench-service"  # the orchestrator's own identity (takeovers act on behalf of the run's owner)
AUTH = [("authorization", f"Bearer {TOKEN}")]
GOAL = 220.0
FAILED_RUNS: list[str] = []  # runs whose stream failed, described from the store after the phase

DSL = {
    "components": {
        "begin": {"obj": {"component_name": "Begin", "params": {"mode": "conversational", "prologue": ""}},
                  "downstream": ["Agent:a"], "upstream": []},
        "Agent:a": {"obj": {"component_name": "Agent", "params": {
            "llm_id": "", "sys_prompt": "You are helpful.", "prompts": [{"role": "user", "content": "{sys.query}"}],
            "max_rounds": 1, "tools": []}}, "downstream": ["Message:m"], "upstream": ["begin"]},
        "Message:m": {"obj": {"component_name": "Message", "params": {"content": ["{Agent:a@content}"]}},
                      "downstream": [], "upstream": ["Agent:a"]},
    },
    "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": []},
    "history": [], "path": [], "retrieval": [],
}


def _store_rpcs(port: int) -> dict[str, float]:
    """canvas_store's handled-call counters by method (its Prometheus side port)."""
    import urllib.request

    counts: dict[str, float] = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("agentcanvas_rpc_requests_total{"):
                labels, value = line.rsplit(" ", 1)
                method = labels.split('method="', 1)[1].split('"', 1)[0].rsplit("/", 1)[-1]
                counts[method] = counts.get(method, 0.0) + float(value)
    return counts


async def _describe_failed(address: str) -> None:
    """What the store holds for runs whose stream failed (stderr): status, lease, persisted events."""
    async with grpc.aio.insecure_channel(address) as channel:
        store = canvas_store_pb2_grpc.CanvasStoreStub(channel)
        for run_id in FAILED_RUNS:
            run = await store.GetRunRecord(canvas_store_pb2.GetRunRecordRequest(id=run_id), metadata=AUTH)
            events = await store.ListRunEvents(canvas_store_pb2.ListRunEventsRequest(run_id=run_id, page_size=100),
                                               metadata=AUTH)
            print(f"store: run {run_id} status {run.status} lease {run.lease.holder}/{run.lease.token} "
                  f"last_seq {run.last_seq} events {' '.join(f'{e.seq}:{e.event_type}' for e in events.events)}",
                  file=sys.stderr, flush=True)
    FAILED_RUNS.clear()


def _serve_model() -> None:
    """`--serve-model`: the scripted model server in this process; prints its base URL, runs until stdin closes."""
    model = ScriptedOpenAIServer(default=_answer).start()
    print(model.base_url, flush=True)
    sys.stdin.read()
    model.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answer(_body: dict[str, Any]) -> Reply:
    return Reply(content="The answer is forty-two.", chunk_size=12)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0


async def _events(stub, request, rpc: str):
    if rpc == "RunCanvasBatched":
        async for batch in stub.RunCanvasBatched(request, metadata=AUTH, timeout=120):
            for event in batch.events:
                yield event
    else:
        async for event in stub.RunCanvas(request, metadata=AUTH, timeout=120):
            yield event


async def _one_run(stub, query: str, rpc: str) -> tuple[float, float | None, float | None, bool]:
    started = time.perf_counter()
    first_event = first_delta = None
    ok = False
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(DSL), query=query)
    seen: list[str] = []
    run_id = ""
    try:
        async for event in _events(stub, request, rpc):
            now = (time.perf_counter() - started) * 1000
            kind = event.WhichOneof("event")
            run_id = run_id or event.run_id
            seen.append(f"{event.seq}:{kind}")
            if first_event is None:
                first_event = now
            if kind == "message_delta" and first_delta is None:
                first_delta = now
            if kind == "workflow_finished":
                ok = event.workflow_finished.status == 4  # RUN_STATUS_SUCCEEDED
    except grpc.aio.AioRpcError as exc:  # counted in `failures` (and named on stderr), not a crash of the bench
        print(f"run failed: {exc.code().name}: {exc.details()} (run {run_id or '?'}, saw {' '.join(seen)})",
              file=sys.stderr, flush=True)
        if run_id:
            FAILED_RUNS.append(run_id)
    return (time.perf_counter() - started) * 1000, first_event, first_delta, ok


async def _phase(stub, runs: int, concurrency: int, rpc: str = "RunCanvas") -> dict[str, Any]:
    queue = list(range(runs))
    results: list[tuple[float, float | None, float | None, bool]] = []

    async def worker() -> None:
        while queue:
            index = queue.pop()
            results.append(await _one_run(stub, f"question {index}", rpc))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    failures = sum(1 for r in results if not r[3])
    return {"runs_per_s": round(runs / wall, 1), "failures": failures,
            "first_event": [r[1] for r in results if r[1] is not None],
            "first_delta": [r[2] for r in results if r[2] is not None]}


async def _gateway_phase(address: str, calls: int, concurrency: int) -> float:
    channel = grpc.aio.insecure_channel(address)
    stub = llm_gateway_pb2_grpc.LlmGatewayStub(channel)
    queue = list(range(calls))

    async def worker() -> None:
        while queue:
            queue.pop()
            request = llm_gateway_pb2.ChatRequest(model="", with_reasoning=True,
                                                  messages=[llm_gateway_pb2.ChatMessage(role="user", content="hi")])
            async for _ in stub.ChatStream(request, metadata=AUTH, timeout=60):
                pass

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    await channel.close()
    return round(calls / wall, 1)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e")
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--profile", default="", help="write py-spy collapsed stacks of --profile-service here")
    parser.add_argument("--profile-service", default="orchestrator", choices=("orchestrator", "llm_gateway", "canvas_store"))
    parser.add_argument("--batched", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the top concurrency over RunCanvasBatched (one message per commit)")
    parser.add_argument("--profile-blocking", action="store_true",
                        help="py-spy pauses the process per sample: exact stacks, slower run")
    parser.add_argument("--log-dir", default="", help="keep each service's output (WARNING and up) in DIR/NAME.log")
    parser.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--serve-model", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_model:
        _serve_model()
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    # py-spy is a dev extra: installed beside this interpreter, which need not be on PATH
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")

    tmp = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}"}
    model = subprocess.Popen([sys.executable, "-m", "bench.e2e", "--serve-model"], env=env, cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    model_url = model.stdout.readline().strip()
    ports = {name: _free_port() for name in ("canvas_store", "llm_gateway", "orchestrator", "sandbox")}
    store_metrics = _free_port()
    config = {
        "data_dir": str(tmp),
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "bench", "user": "bench"},
                                               {"token": SERVICE_TOKEN, "tenant": "ops", "user": "orchestrator",
                                                "role": "service"}]},
        "addresses": {name: f"127.0.0.1:{port}" for name, port in ports.items()},
        "log": {"level": "WARNING"},
        "store": {"database_url": f"sqlite:///{tmp / 'store.db'}", "seed_templates": False,
                  "metrics_port": store_metrics},
        "gateway": {"embedded": {"enabled": False},
                    "models": {"": {"model": "openai/bench", "api_base": model_url, "api_key": "sk"}}},
        "orchestrator": {"service_token": SERVICE_TOKEN},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    def output(name: str):
        return open(Path(args.log_dir) / f"{name}.log", "w") if args.log_dir else subprocess.DEVNULL

    processes = {name: subprocess.Popen([sys.executable, "-m", f"services.{name}", "--config", str(path)], env=env, cwd=ROOT,
                                        stdout=output(name), stderr=subprocess.STDOUT)
                 for name in ("canvas_store", "llm_gateway", "orchestrator")}
    profiler = None
    try:
        for name in processes:
            await wait_until_serving(config["addresses"][name], timeout=120)
        channel = grpc.aio.insecure_channel(config["addresses"]["orchestrator"])
        stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
        await _phase(stub, 20, 4)  # warm-up: imports, connections, litellm caches
        top = max(levels)
        phases = [(c, "RunCanvas") for c in levels] + ([(top, "RunCanvasBatched")] if args.batched else [])
        for concurrency, rpc in phases:
            if args.profile and concurrency == top and rpc == phases[-1][1] and spy:
                profiler = subprocess.Popen([spy, "record", *(() if args.profile_blocking else ("--nonblocking",)), "--format", "raw", "-o", args.profile, "--pid",
                                             str(processes[args.profile_service].pid), "--rate", str(args.profile_rate)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs = args.runs if concurrency > 1 else max(args.runs // 4, 50)
            pids = {name: p.pid for name, p in processes.items()} | {"client": os.getpid(), "model_server": model.pid}
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            rpcs_before = _store_rpcs(store_metrics)
            result = await _phase(stub, runs, concurrency, rpc)
            rpcs_after = _store_rpcs(store_metrics)
            cpu = {name: round((cpu_seconds(pid) - cpu_before[name]) * 1000 / runs, 2) for name, pid in pids.items()}
            if FAILED_RUNS:
                await _describe_failed(config["addresses"]["canvas_store"])
            if profiler is not None:
                profiler.send_signal(2)
                profiler.wait(60)
                profiler = None
            tag = {"concurrency": concurrency, "rpc": rpc}
            print(json.dumps({"bench": "e2e", "metric": "runs_per_s", **tag, "value": result["runs_per_s"],
                              "goal": GOAL, "runs": runs, "failures": result["failures"]}), flush=True)
            for metric in ("first_event", "first_delta"):
                print(json.dumps({"bench": "e2e", "metric": f"{metric}_ms", **tag,
                                  "p50": _pct(result[metric], 0.5), "p99": _pct(result[metric], 0.99)}), flush=True)
            print(json.dumps({"bench": "e2e", "metric": "cpu_ms_per_run", **tag, **cpu,
                              "total": round(sum(cpu.values()), 2)}), flush=True)
            rpcs = {m: round((n - rpcs_before.get(m, 0.0)) / runs, 2) for m, n in sorted(rpcs_after.items())}
            print(json.dumps({"bench": "e2e", "metric": "store_rpcs_per_run", **tag,
                              **{m: n for m, n in rpcs.items() if n}, "total": round(sum(rpcs.values()), 2)}), flush=True)
        await channel.close()
        value = await _gateway_phase(config["addresses"]["llm_gateway"], args.runs, top)
        print(json.dumps({"bench": "e2e", "metric": "gateway_chats_per_s", "concurrency": top, "value": value,
                          "note": "peer limit: one model call per run"}), flush=True)
    finally:
        if profiler is not None and profiler.poll() is None:
            profiler.kill()
        stop_stack(processes, model, tmp)



def stop_stack(processes: dict[str, subprocess.Popen], model: subprocess.Popen, tmp: str) -> None:
    """Stop the services (all signalled first, so they drain side by side), then the model server; remove tmp."""
    for process in processes.values():
        process.terminate()
    for process in processes.values():
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
    model.stdin.close()
    try:
        model.wait(20)
    except subprocess.TimeoutExpired:
        model.kill()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
