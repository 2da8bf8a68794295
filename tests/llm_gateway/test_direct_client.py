"""The direct path's pooled HTTP client: one per event loop, and the one a previous loop left is closed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.llm_gateway.adapters.litellm_direct import LitellmDirectProvider
from services.llm_gateway.adapters.litellm_provider import LitellmProvider
from services.llm_gateway.core.types import ProviderCall
from tests.support.openai_server import ScriptedOpenAIServer


async def answer(provider: LitellmDirectProvider, server: ScriptedOpenAIServer) -> str:
    call = ProviderCall(model="openai/test-model", messages=[{"role": "user", "content": "hello"}],
                        api_base=server.base_url, api_key="k", stream=True)
    return "".join([chunk.content async for chunk in provider.stream(call)])


@pytest.fixture
def provider(litellm_module) -> LitellmDirectProvider:
    return LitellmDirectProvider(LitellmProvider())


@pytest.fixture
def other_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread (as when a caller runs the provider on another thread)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="other-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=30)
    loop.close()


def test_a_client_left_by_a_closed_loop_is_closed_by_the_next_loop(provider, scripted):
    # asyncio.run closes its loop at the end (in a worker thread: the test session's loop stays untouched)
    with ThreadPoolExecutor(1) as worker:
        assert worker.submit(asyncio.run, answer(provider, scripted)).result(timeout=60) == "hello"
        first = provider.pooled_client
        assert first is not None and not first.is_closed
        assert worker.submit(asyncio.run, answer(provider, scripted)).result(timeout=60) == "hello"
        second = provider.pooled_client
        assert first.is_closed
        assert second is not None and second is not first and not second.is_closed
        worker.submit(asyncio.run, provider.aclose()).result(timeout=60)
    assert second.is_closed and provider.pooled_client is None
    assert provider.direct_calls == 2


async def test_a_client_of_a_loop_running_elsewhere_is_closed_on_that_loop(provider, scripted, other_loop):
    on_other = asyncio.run_coroutine_threadsafe(answer(provider, scripted), other_loop)
    assert await asyncio.wrap_future(on_other) == "hello"
    first = provider.pooled_client
    assert first is not None and not first.is_closed
    assert await answer(provider, scripted) == "hello"
    current = provider.pooled_client
    assert current is not None and current is not first
    # The close was handed to other_loop, which runs what it is handed in order: once this later no-op has
    # run there, the close has started, and an httpx client is marked closed at its first step.
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(asyncio.sleep(0), other_loop))
    assert first.is_closed and not current.is_closed
    await provider.aclose()
    assert current.is_closed and provider.pooled_client is None
    assert provider.direct_calls == 2
