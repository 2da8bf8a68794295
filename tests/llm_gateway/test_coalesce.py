"""coalesce(): batches of what is ready, the first event of a batch never held back, errors kept in order.

The source is driven with asyncio events (no sleeps, no clocks): what a batch holds follows only from
which side is suspended, so the assertions are deterministic."""

from __future__ import annotations

import asyncio

import pytest

from services.llm_gateway.coalesce import coalesce


async def test_events_arriving_while_the_sender_is_busy_form_one_batch_and_the_first_goes_alone():
    release, produced_all, last = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def source():
        yield 0
        await release.wait()  # the network: nothing else is ready yet
        for i in range(1, 10):
            yield i  # all ready at once (one network read)
        produced_all.set()
        await last.wait()
        yield 10

    batches = []
    async for batch in coalesce(source()):
        batches.append(batch)
        if batch == [0]:
            release.set()
            await produced_all.wait()  # the sender is busy writing while 1..9 arrive
        else:
            last.set()
    assert batches[0] == [0]  # the first event left before the rest of its read was processed
    assert batches[1] == list(range(1, 10))
    assert [i for b in batches for i in b] == list(range(11))


async def test_batches_are_bounded():
    gate, tenth_coming = asyncio.Event(), asyncio.Event()

    async def source():
        yield -1
        await gate.wait()
        for i in range(25):
            if i == 9:
                tenth_coming.set()  # wakes the sender, which runs only once the pump stops
            yield i  # 0..24 are all ready at once: without backpressure they would form one batch

    sizes = []
    async for batch in coalesce(source(), max_batch=10):
        sizes.append(len(batch))
        if batch == [-1]:
            gate.set()
            await tenth_coming.wait()  # busy while the pump fills the batch
    assert sizes[:2] == [1, 10] and max(sizes) == 10 and sum(sizes) == 26


async def test_an_error_of_the_source_arrives_after_the_events_before_it():
    async def source():
        yield 1
        yield 2
        raise RuntimeError("boom")

    got = []
    with pytest.raises(RuntimeError, match="boom"):
        async for batch in coalesce(source()):
            got += batch
    assert got == [1, 2]


async def test_closing_the_batches_early_closes_the_source():
    closed = asyncio.Event()

    async def source():
        try:
            yield 1
            await asyncio.Event().wait()  # never ready
        finally:
            closed.set()

    batches = coalesce(source())
    assert await batches.__anext__() == [1]
    await batches.aclose()
    assert closed.is_set()
