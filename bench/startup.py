"""Time from spawning each service process to its first SERVING health answer.

    python -m bench.startup [--repeat N]

Prints one line per service, e.g.
    {"bench":"startup","metric":"ready_s","service":"gateway","value":4.9,"answering_s":0.9,"bare_python_s":0.02,"limit_s":2.0}
`value` is spawn → SERVING. `answering_s` is spawn → the first health answer of any status: the
gateway answers NOT_SERVING while it imports litellm in the background, which dominates its SERVING
time. `bare_python_s` is a bare interpreter spawn measured in the same run, for scale; the goal is
≤ 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.health import wait_until_serving

SERVICES = {"store": "canvas_store", "orchestrator": "orchestrator", "gateway": "llm_gateway", "sandbox": "sandbox"}
LIMIT_S = 2.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bare_python_s() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


async def _first_answer(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                return
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.005)


async def _startup(service: str, data_dir: str) -> tuple[float, float]:
    """(spawn → first health answer, spawn → SERVING) in seconds."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    env = dict(os.environ, PORT=str(port), AGENT_CANVAS_DATA_DIR=data_dir, AGENT_CANVAS__LOG__LEVEL="WARNING")
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", f"services.{service}"], env=env)
    try:
        await asyncio.wait_for(_first_answer(address), timeout=120)
        answering = time.perf_counter() - started
        await wait_until_serving(address, timeout=120, poll_interval=0.005)
        return answering, time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(timeout=30)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        for name, service in SERVICES.items():
            samples = [await _startup(service, data_dir) for _ in range(options.repeat)]
            bare = statistics.median(_bare_python_s() for _ in range(options.repeat))
            print(json.dumps({"bench": "startup", "metric": "ready_s", "service": name,
                              "value": round(statistics.median(s[1] for s in samples), 3),
                              "answering_s": round(statistics.median(s[0] for s in samples), 3),
                              "bare_python_s": round(bare, 3), "limit_s": LIMIT_S}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
