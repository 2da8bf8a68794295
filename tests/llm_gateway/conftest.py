"""Fixtures: one scripted OpenAI-compatible server per test, litellm imported once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from services.common.settings import Config
from services.llm_gateway.adapters.litellm_provider import load_litellm
from services.llm_gateway.app import build_provider
from services.llm_gateway.core.gateway import LlmGateway
from services.llm_gateway.core.registry import ModelRegistry
from services.llm_gateway.core.settings import GatewaySettings
from services.llm_gateway.core.types import (
    FinishEvent, TextEvent, ThinkDeltaEvent, ThinkEndEvent, ThinkStartEvent, UsageEvent,
)
from tests.support.openai_server import ScriptedOpenAIServer

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(scope="session")
def litellm_module():
    return load_litellm()


@pytest.fixture
def scripted() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


class SleepRecorder:
    """Injected sleep: records the retry delays instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def make_gateway(litellm_module, sleeps):
    def build(models: dict[str, Any], **section: Any) -> LlmGateway:
        raw = {"models": models, "embedded": {"enabled": False}, **section}
        settings = GatewaySettings.from_section(Config().with_overrides({"gateway": raw}).section("gateway"))
        registry = ModelRegistry(settings.models, settings.factories, env={})
        return LlmGateway(registry, build_provider(settings), settings, embedded=None, sleep=sleeps)

    return build


async def collect(gateway: LlmGateway, request) -> list[Any]:
    return [event async for event in await gateway.chat_stream(request)]


def shape(events: list[Any]) -> list[tuple[Any, ...]]:
    """Compact view of a stream: adjacent deltas merged."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, TextEvent):
            item: tuple[Any, ...] = ("text", e.text)
        elif isinstance(e, ThinkDeltaEvent):
            item = ("think", e.text)
        elif isinstance(e, ThinkStartEvent):
            item = ("start",)
        elif isinstance(e, ThinkEndEvent):
            item = ("end", e.truncated)
        elif isinstance(e, UsageEvent):
            item = ("usage",)
        elif isinstance(e, FinishEvent):
            item = ("finish", e.reason, e.error.kind if e.error else None)
        else:
            item = (type(e).__name__,)
        if out and item[0] in ("text", "think") and out[-1][0] == item[0]:
            out[-1] = (item[0], out[-1][1] + item[1])
        else:
            out.append(item)
    return out
