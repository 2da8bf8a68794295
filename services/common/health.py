"""Client-side health checks: is a service SERVING, and wait until it is."""

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
