"""Sandbox benchmark: end-to-end Execute latency over gRPC with a warm pool, next to a bare
interpreter spawn measured in the same run, and executions per second at concurrency 2 and 8.

    python -m bench.sandbox [--samples 40] [--jobs 40]

Prints JSON lines:
    {"bench":"sandbox","metric":"exec_latency","lang":"python","p50_ms":..,"p99_ms":..,"bare_p50_ms":..,"ratio":..}
    {"bench":"sandbox","metric":"exec_per_s","concurrency":2,"value":..}

Latency samples wait until the pool is full again before each request (that is what "warm pool"
means; refilling is asynchronous and bounded to one spawn at a time per language). The bare spawn is
`/usr/bin/python3 -c pass` / `/usr/bin/node -e 0` with an empty environment, interleaved with the
sandbox samples (the sandbox's runtimes
get an empty environment too, and Node starts faster without the service's NODE_* variables).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc

from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.sandbox.app import build_definition, build_sandbox

TOKEN = "bench-token"
METADATA = [("authorization", f"Bearer {TOKEN}")]
PROGRAMS = {"python": "print(1)", "nodejs": "console.log(1)"}
BARE = {"python": ["/usr/bin/python3", "-c", "pass"], "nodejs": ["/usr/bin/node", "-e", "0"]}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def bare_spawn_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env={}, check=True)
    return (time.perf_counter() - started) * 1000


async def execute(stub: sandbox_pb2_grpc.SandboxStub, language: str) -> None:
    request = sandbox_pb2.ExecuteRequest(language=language, code=PROGRAMS[language])
    exit_event = None
    async for event in stub.Execute(request, metadata=METADATA):
        if event.WhichOneof("event") == "exit":
            exit_event = event.exit
    if exit_event is None or exit_event.reason != sandbox_pb2.EXIT_REASON_OK:
        raise RuntimeError(f"benchmark job failed: {exit_event}")


async def main_async(samples: int, jobs: int) -> list[dict]:
    work_root = Path(tempfile.gettempdir()) / "agentcanvas-sandbox-bench"
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(work_root / "data")}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "bench", "user": "bench"}]},
        "log": {"level": "WARNING"},
        "sandbox": {"backend": "local", "pool": {"python": 4, "nodejs": 4}, "max_concurrent": 8, "max_queue": 64,
                    "work_root": str(work_root)},
    })
    sandbox = build_sandbox(config)
    running = await start_server(build_definition(config, sandbox), config,
                                 authenticator=TokenAuthenticator.from_config(config, env={}))
    lines: list[dict] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = sandbox_pb2_grpc.SandboxStub(channel)
            pools = sandbox.backend.pools
            for language in ("python", "nodejs"):
                await execute(stub, language)  # warm-up
                bare_spawn_ms(BARE[language])  # warm the page cache
                timings, bare = [], []
                for _ in range(samples):  # interleaved, so both see the same machine load
                    await pools[language].wait_full()
                    started = time.perf_counter()
                    await execute(stub, language)
                    timings.append((time.perf_counter() - started) * 1000)
                    bare.append(bare_spawn_ms(BARE[language]))
                p50, bare_p50 = statistics.median(timings), statistics.median(bare)
                lines.append({"bench": "sandbox", "metric": "exec_latency", "lang": language,
                              "p50_ms": round(p50, 2), "p99_ms": round(percentile(timings, 0.99), 2),
                              "bare_p50_ms": round(bare_p50, 2), "ratio": round(p50 / bare_p50, 3)})
            for concurrency in (2, 8):
                await pools["python"].wait_full()
                queue: asyncio.Queue[int] = asyncio.Queue()
                for index in range(jobs):
                    queue.put_nowait(index)

                async def client() -> None:
                    while not queue.empty():
                        queue.get_nowait()
                        await execute(stub, "python")

                started = time.perf_counter()
                await asyncio.gather(*[client() for _ in range(concurrency)])
                elapsed = time.perf_counter() - started
                lines.append({"bench": "sandbox", "metric": "exec_per_s", "concurrency": concurrency,
                              "value": round(jobs / elapsed, 2), "jobs": jobs, "lang": "python"})
    finally:
        await running.stop(5)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Sandbox latency and throughput benchmark.")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=40)
    args = parser.parse_args(argv)
    for line in asyncio.run(main_async(args.samples, args.jobs)):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
