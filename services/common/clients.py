"""Outbound gRPC: shared channel options and per-call metadata (identity, trace, deadline).

One channel per peer per process; never one per call. Channels use keep-alive, client-side round
robin over every address the target resolves to (use `dns:///name:port` with a headless Kubernetes
Service), and a retry policy for UNAVAILABLE only.
"""

from __future__ import annotations

import json

import grpc

from services.common import context, telemetry
from services.common.auth import AUTHORIZATION

MAX_MESSAGE_BYTES = 64 * 1024 * 1024

_SERVICE_CONFIG = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [
        {
            "name": [{}],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.1s",
                "maxBackoff": "2s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ],
}

CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(_SERVICE_CONFIG)),
]

SERVER_OPTIONS = [
    # grpc sets SO_REUSEPORT by default: a second server on a busy port would bind it too and the kernel
    # would split connections between them. Off, a busy port fails to bind (serve: FAILED_PRECONDITION).
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


def create_channel(target: str) -> grpc.aio.Channel:
    """An insecure channel with the shared options. TLS terminates at the mesh or ingress."""
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)


def outbound_metadata(own_token: str | None = None, *, on_behalf_of: str | None = None) -> list[tuple[str, str]]:
    """Metadata for a call to a peer.

    Inside an RPC the caller's bearer token is forwarded, so the peer authorises the real user. Outside
    one (a background takeover, the CLI) `own_token` is used, optionally with `on_behalf_of`
    ("tenant/user", honoured only for service tokens).
    """
    token = context.token_var.get() or own_token
    metadata: list[tuple[str, str]] = []
    if token:
        metadata.append((AUTHORIZATION, f"Bearer {token}"))
    if on_behalf_of:
        metadata.append(("x-agentcanvas-on-behalf-of", on_behalf_of))
    parent = telemetry.inject_traceparent()
    trace = context.trace_id_var.get()
    if parent:
        metadata.append(("traceparent", parent))
    elif trace:
        metadata.append(("traceparent", context.traceparent(trace)))
    request_id = context.request_id_var.get()
    if request_id:
        metadata.append(("x-request-id", request_id))
    return metadata


def call_timeout(default: float | None) -> float | None:
    """The timeout for a downstream call: the smaller of `default` and the caller's remaining deadline."""
    remaining = context.remaining_time()
    if remaining is None:
        return default
    return remaining if default is None else min(default, remaining)
