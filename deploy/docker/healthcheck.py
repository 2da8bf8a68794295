#!/usr/bin/env python3
"""gRPC health probe for the agent-canvas images (a stand-in for grpc_health_probe).

Calls grpc.health.v1.Health/Check and exits 0 only when the answer is SERVING:

    agent-canvas-healthcheck                         # 127.0.0.1:$PORT, overall health ("")
    agent-canvas-healthcheck --service agentcanvas.v1.LlmGateway --timeout 2
    agent-canvas-healthcheck --addr 10.0.0.7:50053
    agent-canvas-healthcheck --http                  # the HTTP facade: GET http://127.0.0.1:$PORT/healthz is 200

Exit codes: 0 SERVING, 1 NOT_SERVING/UNKNOWN/SERVICE_UNKNOWN, 2 RPC error (unreachable, timeout,
no health service), 3 bad arguments. It prints one line saying why, for `docker inspect` and logs.
Used by the Dockerfile HEALTHCHECK and by Kubernetes `exec` probes on clusters older than 1.24; on
newer clusters the manifests use native `grpc:` probes instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

EXIT_SERVING = 0
EXIT_NOT_SERVING = 1
EXIT_RPC_ERROR = 2
EXIT_USAGE = 3


def default_address(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return f"127.0.0.1:{env.get('PORT') or '50051'}"


def check(address: str, service: str = "", timeout: float = 3.0) -> tuple[int, str]:
    """Return (exit code, message) for one health check of `service` at `address`."""
    try:
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        name = code.name if code is not None else "UNKNOWN"
        return EXIT_RPC_ERROR, f"{address} {service or '(overall)'}: rpc failed: {name}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    code = EXIT_SERVING if response.status == health_pb2.HealthCheckResponse.SERVING else EXIT_NOT_SERVING
    return code, f"{address} {service or '(overall)'}: {status}"


def check_http(address: str, timeout: float = 3.0) -> tuple[int, str]:
    """The HTTP facade's readiness: GET /healthz answers 200 once its store and orchestrator are SERVING."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    try:
        with opener.open(f"http://{address}/healthz", timeout=timeout) as reply:
            return EXIT_SERVING, f"{address} /healthz: {reply.status}"
    except urllib.error.HTTPError as exc:
        return EXIT_NOT_SERVING, f"{address} /healthz: {exc.code}"
    except (OSError, ValueError) as exc:
        return EXIT_RPC_ERROR, f"{address} /healthz: request failed: {type(exc).__name__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gRPC health check (grpc.health.v1)")
    parser.add_argument("--addr", default=None, help="host:port (default 127.0.0.1:$PORT, else :50051)")
    parser.add_argument("--service", default="", help='service name; "" is the overall health')
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    parser.add_argument("--http", action="store_true", help="probe an HTTP service's /healthz instead (http-api)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_SERVING
    if args.timeout <= 0:
        sys.stderr.write("--timeout must be positive\n")
        return EXIT_USAGE
    if args.http:
        code, message = check_http(args.addr or default_address(), args.timeout)
    else:
        code, message = check(args.addr or default_address(), args.service, args.timeout)
    (sys.stdout if code == EXIT_SERVING else sys.stderr).write(message + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
