"""The HTTP facade (RAGFlow's API) against RunCanvas over gRPC, on the same stored canvas, side by side.

    python -m bench.http [--runs 300] [--concurrency 1,16]

Starts the store (SQLite), the gateway, the orchestrator and the HTTP facade as processes, with a
scripted OpenAI-compatible model in its own process that answers at once. Every run is one turn of a
fresh session (made beforehand, not timed) of the same canvas (Begin -> Agent -> Message), started
either with RunCanvas or with POST /api/v1/agents/chat/completions (stream: true, httpx). The two
sides alternate phase by phase, so a noisy neighbour hits both. One JSON line per figure:

    {"bench":"http","metric":"runs_per_s","concurrency":C,"client":"httpx"|"raw","grpc":…,"http":…,"ratio":…,"goal":0.8}
    {"bench":"http","metric":"ttfb_ms","concurrency":C,"client":…,"grpc_p50":…,"http_p50":…,"added_p50":…,"goal":3.0, ...}
    {"bench":"http","metric":"first_delta_ms","concurrency":C,"client":…,"grpc_p50":…,"http_p50":…,"added_p50":…}
    {"bench":"http","metric":"cpu_ms_per_run","concurrency":C,"side":"grpc"|"http"|"http_raw", per process…}

The HTTP side is measured twice: with httpx (what a Python client pays) and with a minimal client that
writes the request bytes and times the response bytes on a keep-alive connection, so the client's own
cost (httpx spends ~0.5 ms more per request than a gRPC stub) is not counted as the facade's.

TTFB: gRPC, the first RunEvent received; HTTP, the first byte of the response (the facade answers once
the run's first event is there, so the difference is what the facade adds). first_delta: the first
answer text (a MessageDelta / a `message` event).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import yaml
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, orchestrator_pb2, orchestrator_pb2_grpc

from bench.e2e import DSL, ROOT, SERVICE_TOKEN, TOKEN, _free_port, _pct, stop_stack
from bench.procstat import cpu_seconds
from services.common.health import wait_until_http_ready, wait_until_serving
from services.common.structs import to_struct

AUTH = [("authorization", f"Bearer {TOKEN}")]
TTFB_GOAL_MS = 3.0
RATIO_GOAL = 0.8


async def _grpc_run(stub, canvas_id: str, session_id: str) -> tuple[float, float, bool]:
    started = time.perf_counter()
    first = delta = None
    ok = False
    request = orchestrator_pb2.RunCanvasRequest(canvas_id=canvas_id, session_id=session_id, query="question")
    async for event in stub.RunCanvas(request, metadata=AUTH, timeout=120):
        now = (time.perf_counter() - started) * 1000
        first = now if first is None else first
        kind = event.WhichOneof("event")
        if kind == "message_delta" and delta is None:
            delta = now
        if kind == "workflow_finished":
            ok = event.workflow_finished.status == 4
    return first or 0.0, delta or 0.0, ok


async def _http_run(client: httpx.AsyncClient, canvas_id: str, session_id: str) -> tuple[float, float, bool]:
    started = time.perf_counter()
    first = delta = None
    ok = False
    body = {"agent_id": canvas_id, "session_id": session_id, "query": "question", "stream": True}
    async with client.stream("POST", "/api/v1/agents/chat/completions", json=body) as response:
        buffer = b""
        async for chunk in response.aiter_raw():
            now = (time.perf_counter() - started) * 1000
            first = now if first is None else first
            buffer += chunk
            if delta is None and b'"event":"message"' in buffer:
                delta = now
        ok = response.status_code == 200 and b'"status":"succeeded"' in buffer and buffer.endswith(b"data:[DONE]\n\n")
    return first or 0.0, delta or 0.0, ok


class RawClient:
    """The lightest HTTP/1.1 client for timing: one keep-alive connection, a request written as bytes, and
    the response read until the stream's `data:[DONE]` (the facade writes it in one chunk). httpx's own cost
    per request (~0.5 ms) would otherwise count as the facade's; no parsing is needed to time bytes."""

    def __init__(self, address: str):
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def run(self, canvas_id: str, session_id: str) -> tuple[float, float, bool]:
        if self.streams is not None and self.streams[0].at_eof():
            await self.close()  # the server closed an idle keep-alive connection (uvicorn: after 5 s)
        try:
            return await self._once(canvas_id, session_id)
        except ConnectionResetError:  # closed while idle just as we wrote: once more on a new connection
            await self.close()
            return await self._once(canvas_id, session_id)

    async def _once(self, canvas_id: str, session_id: str) -> tuple[float, float, bool]:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        body = json.dumps({"agent_id": canvas_id, "session_id": session_id, "query": "question", "stream": True}).encode()
        head = (f"POST /api/v1/agents/chat/completions HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        started = time.perf_counter()
        writer.write(head + body)
        first = delta = None
        buffer = b""
        while b"data:[DONE]\n\n" not in buffer:
            chunk = await reader.read(65536)
            if not chunk:
                if not buffer:
                    raise ConnectionResetError("the facade closed the connection before answering")
                raise ConnectionError("the facade closed the connection mid-answer")
            now = (time.perf_counter() - started) * 1000
            first = now if first is None else first
            buffer += chunk
            if delta is None and b'"event":"message"' in buffer:
                delta = now
        # the chunked body's last-chunk marker follows [DONE]
        while not buffer.endswith(b"0\r\n\r\n"):
            buffer += await reader.read(65536)
        return first or 0.0, delta or 0.0, b'"status":"succeeded"' in buffer

    async def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def _phase(side: str, runner, sessions: list[str], concurrency: int) -> dict[str, Any]:
    queue = list(sessions)
    results: list[tuple[float, float, bool]] = []

    async def worker(index: int) -> None:
        while queue:
            results.append(await runner(queue.pop(), index))

    started = time.perf_counter()
    await asyncio.gather(*(worker(index) for index in range(concurrency)))
    wall = time.perf_counter() - started
    return {"runs_per_s": round(len(sessions) / wall, 1), "failures": sum(1 for r in results if not r[2]),
            "ttfb": [r[0] for r in results], "first_delta": [r[1] for r in results]}


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.http")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--profile", default="", help="write py-spy collapsed stacks of the facade (top concurrency, http) here")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-http-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    model = subprocess.Popen([sys.executable, "-m", "bench.e2e", "--serve-model"], env=env, cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    model_url = model.stdout.readline().strip()
    names = ("canvas_store", "llm_gateway", "orchestrator", "sandbox", "http_api")
    ports = {name: _free_port() for name in names}
    config = {
        "data_dir": str(tmp),
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "bench", "user": "bench"},
                                               {"token": SERVICE_TOKEN, "tenant": "ops", "user": "orchestrator",
                                                "role": "service"}]},
        "addresses": {name: f"127.0.0.1:{port}" for name, port in ports.items()},
        "log": {"level": "WARNING"},
        "store": {"database_url": f"sqlite:///{tmp / 'store.db'}", "seed_templates": False},
        "gateway": {"embedded": {"enabled": False},
                    "models": {"": {"model": "openai/bench", "api_base": model_url, "api_key": "sk"}}},
        "orchestrator": {"service_token": SERVICE_TOKEN},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    processes = {name: subprocess.Popen([sys.executable, "-m", f"services.{name}", "--config", str(path)], env=env, cwd=ROOT,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
                 for name in ("canvas_store", "llm_gateway", "orchestrator", "http_api")}
    try:
        for name in ("canvas_store", "llm_gateway", "orchestrator"):
            await wait_until_serving(config["addresses"][name], timeout=120)
        await wait_until_http_ready(config["addresses"]["http_api"], timeout=120)
        store_channel = grpc.aio.insecure_channel(config["addresses"]["canvas_store"])
        store = canvas_store_pb2_grpc.CanvasStoreStub(store_channel)
        limits = httpx.Limits(max_connections=max(levels), max_keepalive_connections=max(levels))
        client = httpx.AsyncClient(base_url=f"http://{config['addresses']['http_api']}", headers={"Authorization": f"Bearer {TOKEN}"},
                                   timeout=120, limits=limits, trust_env=False)
        canvas = await store.CreateCanvas(canvas_store_pb2.CreateCanvasRequest(
            canvas=canvas_store_pb2.Canvas(title="bench http", dsl=to_struct(DSL))), metadata=AUTH)

        async def sessions(count: int, side: str = "grpc") -> list[str]:
            """Fresh sessions, made as each side's clients make them (the SDK creates its sessions over HTTP)."""
            made = []
            for _ in range(count):
                if side == "http":
                    reply = await client.post(f"/api/v1/agents/{canvas.id}/sessions", json={})
                    made.append(reply.json()["data"]["id"])
                else:
                    session = await store.CreateSession(canvas_store_pb2.CreateSessionRequest(canvas_id=canvas.id), metadata=AUTH)
                    made.append(session.id)
            return made

        channel = grpc.aio.insecure_channel(config["addresses"]["orchestrator"])
        stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
        raw = [RawClient(config["addresses"]["http_api"]) for _ in range(max(levels))]  # one connection per worker
        runners = {"grpc": lambda sid, _: _grpc_run(stub, canvas.id, sid), "http": lambda sid, _: _http_run(client, canvas.id, sid),
                   "http_raw": lambda sid, worker: raw[worker].run(canvas.id, sid)}
        for side, runner in runners.items():  # warm-up: imports, connections, caches
            await _phase(side, runner, await sessions(20, "grpc" if side == "grpc" else "http"), 4)
        pids = {name: p.pid for name, p in processes.items()} | {"client": os.getpid(), "model_server": model.pid}
        for concurrency in levels:
            runs = args.runs if concurrency > 1 else max(args.runs // 3, 50)
            results: dict[str, dict[str, Any]] = {}
            for side in ("grpc", "http", "http_raw", "grpc", "http", "http_raw"):  # alternate; each side's figures: both halves
                todo = await sessions(runs // 2, "grpc" if side == "grpc" else "http")
                before = {name: cpu_seconds(pid) for name, pid in pids.items()}
                profiler = None
                if args.profile and side == "http" and concurrency == max(levels) and spy:
                    profiler = subprocess.Popen([spy, "record", "--nonblocking", "--format", "raw", "-o", args.profile, "--pid",
                                                 str(processes["http_api"].pid), "--rate", "200"],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                result = await _phase(side, runners[side], todo, concurrency)
                if profiler is not None:
                    profiler.send_signal(2)
                    profiler.wait(60)
                cpu = {name: (cpu_seconds(pid) - before[name]) * 1000 / len(todo) for name, pid in pids.items()}
                if side in results:
                    merged = results[side]
                    merged["runs_per_s"] = round((merged["runs_per_s"] + result["runs_per_s"]) / 2, 1)
                    merged["failures"] += result["failures"]
                    merged["ttfb"] += result["ttfb"]
                    merged["first_delta"] += result["first_delta"]
                    merged["cpu"] = {k: (merged["cpu"][k] + v) / 2 for k, v in cpu.items()}
                else:
                    results[side] = {**result, "cpu": cpu}
            grpc_side = results["grpc"]
            for client_name in ("http", "http_raw"):
                http_side = results[client_name]
                tag = {"bench": "http", "concurrency": concurrency, "client": "httpx" if client_name == "http" else "raw"}
                print(json.dumps({**tag, "metric": "runs_per_s", "grpc": grpc_side["runs_per_s"], "http": http_side["runs_per_s"],
                                  "ratio": round(http_side["runs_per_s"] / grpc_side["runs_per_s"], 3), "goal": RATIO_GOAL,
                                  "runs": runs, "failures": grpc_side["failures"] + http_side["failures"]}), flush=True)
                for metric, goal in (("ttfb", TTFB_GOAL_MS), ("first_delta", None)):
                    grpc_p50, http_p50 = _pct(grpc_side[metric], 0.5), _pct(http_side[metric], 0.5)
                    line = {**tag, "metric": f"{metric}_ms", "grpc_p50": grpc_p50, "http_p50": http_p50,
                            "added_p50": round(http_p50 - grpc_p50, 2), "grpc_p99": _pct(grpc_side[metric], 0.99),
                            "http_p99": _pct(http_side[metric], 0.99)}
                    if goal is not None:
                        line["goal"] = goal
                    print(json.dumps(line), flush=True)
            tag = {"bench": "http", "concurrency": concurrency}
            for side in ("grpc", "http", "http_raw"):
                cpu = {name: round(value, 2) for name, value in results[side]["cpu"].items()}
                print(json.dumps({**tag, "metric": "cpu_ms_per_run", "side": side, **cpu,
                                  "total": round(sum(cpu.values()), 2)}), flush=True)
        await client.aclose()
        for connection in raw:
            await connection.close()
        await channel.close()
        await store_channel.close()
    finally:
        stop_stack(processes, model, tmp)


if __name__ == "__main__":
    asyncio.run(main())
