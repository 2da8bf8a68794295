"""What every outbound adapter of the orchestrator shares: one lazily opened channel per peer, and
the identity to present on each call (the caller's token inside an RPC, else the service token acting
on behalf of the run's owner)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from services.common.clients import create_channel, outbound_metadata
from services.orchestrator.core.ports import acting_as

TokenSource = str | Callable[[], str | None] | None


class PeerClient:
    """Base of GrpcRunStore and GatewayLlmClient; subclasses set `stub_class`."""

    stub_class: Callable[[grpc.aio.Channel], Any]

    def __init__(self, target: str, *, own_token: TokenSource = None, timeout_s: float):
        # The channel is opened on first use: grpc.aio binds it to the running event loop.
        self._target = target
        self._channel: grpc.aio.Channel | None = None
        self._stub_instance: Any = None
        self._token = own_token
        self._timeout = timeout_s

    @property
    def _stub(self) -> Any:
        if self._stub_instance is None:
            self._channel = create_channel(self._target)
            self._stub_instance = self.stub_class(self._channel)
        return self._stub_instance

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()

    def _metadata(self) -> list[tuple[str, str]]:
        token = self._token() if callable(self._token) else self._token
        return outbound_metadata(token, on_behalf_of=acting_as.get() or None)
