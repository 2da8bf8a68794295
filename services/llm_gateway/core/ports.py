"""What the core needs from the outside world (implemented in adapters/)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from services.common.errors import UnavailableError
from services.llm_gateway.core.types import ProviderCall, ProviderChunk, Usage


class Provider(Protocol):
    """One model call. Raises types.ProviderError (classified) on failure, also mid-stream."""

    def stream(self, call: ProviderCall) -> AsyncIterator[ProviderChunk]:
        """Normalised chunks; a non-streamed call (call.stream False) yields exactly one chunk."""
        ...

    def cost_usd(self, model: str, usage: Usage) -> float:
        """Cost from the local cost map; 0.0 when the model is unknown."""
        ...


class EmbeddedModel(Protocol):
    """The bundled local model server."""

    async def api_base(self) -> str:
        """Base URL once the server answers (starts it on first use)."""
        ...

    async def exit_error(self) -> UnavailableError | None:
        """After a failed call: UNAVAILABLE (EMBEDDED_MODEL_FAILED) naming the exit when the server process has
        exited, None when it still runs (then the failure was a network problem like any provider's)."""
        ...
