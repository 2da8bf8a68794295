"""Client-side health checks: is a service SERVING, and wait until it is (gRPC health; the HTTP facade's /healthz)."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


async def is_serving(channel: grpc.aio.Channel, service: str = "", timeout: float = 1.0) -> bool:
    """One Check call; False on any transport error or a non-SERVING answer."""
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.aio.AioRpcError:
        return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


async def wait_until_serving(address: str, *, timeout: float = 30.0, service: str = "", poll_interval: float = 0.02) -> float:
    """Poll until `address` reports SERVING; returns the seconds it took. Raises TimeoutError."""
    started = time.perf_counter()
    deadline = started + timeout
    async with grpc.aio.insecure_channel(address) as channel:
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"{address} did not report SERVING within {timeout:.0f}s")
            if await is_serving(channel, service, timeout=min(1.0, remaining)):
                return time.perf_counter() - started
            await asyncio.sleep(poll_interval)


async def wait_until_http_ready(address: str, *, timeout: float = 30.0, path: str = "/healthz", poll_interval: float = 0.05) -> float:
    """Poll `http://address/healthz` until it answers 200; returns the seconds it took. Raises TimeoutError."""
    import httpx  # only the HTTP facade's readiness needs it

    started = time.perf_counter()
    deadline = started + timeout
    async with httpx.AsyncClient(base_url=f"http://{address}", trust_env=False) as client:
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"{address} did not answer {path} with 200 within {timeout:.0f}s")
            try:
                if (await client.get(path, timeout=min(1.0, remaining))).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            await asyncio.sleep(poll_interval)
