"""loop_io: synchronous code run on the event loop, its waits awaited there; blocking I/O refused."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from services.canvas_store.adapters.sql import loop_io

request_id = contextvars.ContextVar("request_id", default="")


async def _value(value, delay: float = 0.0):
    await asyncio.sleep(delay)
    return value


async def _fail(message: str):
    await asyncio.sleep(0)
    raise ValueError(message)


async def test_waits_are_awaited_on_the_loop_and_interleave_with_other_tasks():
    order = []

    def use_case(name: str, delay: float) -> str:
        order.append(f"{name} start")
        got = loop_io.wait(_value(name, delay))
        order.append(f"{name} end")
        return got * 2

    slow = asyncio.create_task(loop_io.run(use_case, "slow", 0.05))
    fast = asyncio.create_task(loop_io.run(use_case, "fast", 0.0))
    assert await asyncio.gather(slow, fast) == ["slowslow", "fastfast"]
    # Both started before either finished: the slow one's wait did not block the loop.
    assert order.index("fast end") < order.index("slow end") and order[:2] == ["slow start", "fast start"]


async def test_an_awaited_error_is_raised_at_the_wait_and_can_be_handled_there():
    def use_case() -> str:
        try:
            loop_io.wait(_fail("boom"))
        except ValueError as error:
            return f"handled {error}"
        return "not raised"

    assert await loop_io.run(use_case) == "handled boom"


async def test_an_unhandled_error_reaches_the_caller():
    def use_case() -> None:
        loop_io.wait(_fail("unhandled"))

    with pytest.raises(ValueError, match="unhandled"):
        await loop_io.run(use_case)


async def test_cancelling_the_caller_runs_the_functions_cleanup():
    cleaned = asyncio.Event()
    waiting = asyncio.Event()

    async def forever():
        waiting.set()
        await asyncio.Event().wait()

    def use_case() -> None:
        try:
            loop_io.wait(forever())
        finally:
            loop_io.wait(_value(None))  # a cleanup may still wait on the loop (a rollback, say)
            cleaned.set()

    task = asyncio.create_task(loop_io.run(use_case))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()


async def test_the_callers_context_variables_are_visible_and_its_own_are_not_changed():
    request_id.set("req-1")

    def use_case() -> str:
        seen = request_id.get()
        request_id.set("changed inside")
        return seen

    assert await loop_io.run(use_case) == "req-1"
    assert request_id.get() == "req-1"


async def test_blocking_io_is_refused_only_on_the_loop():
    loop_io.refuse_blocking_io()  # plain code: allowed
    assert not loop_io.on_loop()

    def use_case() -> None:
        assert loop_io.on_loop()
        loop_io.refuse_blocking_io()

    with pytest.raises(loop_io.NeedsPool):
        await loop_io.run(use_case)


def test_wait_outside_run_is_a_programming_error():
    awaitable = _value(1)
    with pytest.raises(RuntimeError, match="outside"):
        loop_io.wait(awaitable)
    awaitable.close()
