"""The local RunFeed: a run executing on this replica is followed without the store's watch, and a
follower the feed cannot serve (earlier seqs, abandoned run) gets the rest from the store."""

from __future__ import annotations

import asyncio

from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.events import Event
from services.orchestrator.core.feed import RunFeed
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator
from tests.orchestrator.support.scripted_llm import ScriptedLlm


def _event(seq: int, kind: str = "node_started") -> Event:
    return Event(kind, {"component_id": f"n{seq}"}, seq=seq)


async def _collect(feed: RunFeed, after_seq: int) -> list[int]:
    return [e.seq for batch in [b async for b in feed.follow(after_seq)] for e in batch]


async def test_feed_serves_batches_after_a_seq_up_to_the_terminal_event():
    feed = RunFeed()
    feed.publish([_event(4), _event(5)])  # a takeover's first commit: seqs 1..3 were written before
    feed.publish([_event(6), _event(7, "workflow_finished")])
    assert feed.base == 3 and feed.finished
    assert await _collect(feed, 3) == [4, 5, 6, 7]
    assert await _collect(feed, 5) == [6, 7]
    assert [len(b) async for b in feed.follow(3)] == [4]  # what is there is handed over at once
    assert await _collect(feed, 2) == []  # seq 3 is not in the feed: the caller reads the store


async def test_a_follower_waits_for_new_batches_and_an_abandoned_feed_ends_without_a_terminal_event():
    feed = RunFeed()
    got: asyncio.Queue = asyncio.Queue()

    async def follow() -> None:
        async for batch in feed.follow(0):
            got.put_nowait([e.seq for e in batch])

    task = asyncio.create_task(follow())
    feed.publish([_event(1)])
    assert await asyncio.wait_for(got.get(), 5) == [1]
    feed.publish([_event(2), _event(3)])  # the follower is waiting on the feed now
    assert await asyncio.wait_for(got.get(), 5) == [2, 3]
    feed.close()  # lease lost: no terminal event from this replica
    await asyncio.wait_for(task, 5)
    assert got.empty() and feed.abandoned
    feed.publish([_event(4)])  # nothing after abandonment
    assert len(feed.events) == 3


def _canvas():
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


async def test_a_local_run_streams_the_persisted_log_exactly():
    store = InMemoryRunStore()
    orch = make_orchestrator(store, ScriptedLlm({"m": [[("text", "hello "), ("text", "world")]]}))
    record = await orch.start_run(RunRequest(dsl=_canvas(), query="q"))
    assert record.id in orch._feeds  # executing here: followed through the feed
    streamed = [e async for e in orch.stream_events(record.id)]
    await orch.wait_idle()
    stored = await store.list_events(record.id)
    assert [(e.seq, e.kind, e.data) for e in streamed] == [(e.seq, e.kind, e.data) for e in stored]
    assert finished(streamed)["status"] == RunStatus.SUCCEEDED
    assert record.id not in orch._feeds  # dropped with the run
    # reattaching after the end reads the store
    assert [e.seq for e in await _all(orch.stream_events(record.id, after_seq=2))] == [e.seq for e in stored[2:]]


async def _all(stream):
    return [e async for e in stream]


async def test_a_follower_of_an_abandoned_run_continues_from_the_store_on_the_replica_that_took_it_over():
    store = InMemoryRunStore()
    hang = asyncio.Event()
    a = make_orchestrator(store, ScriptedLlm({"m": [[("text", "partial "), ("gate", hang)]]}), holder="a")
    b = make_orchestrator(store, ScriptedLlm({"m": [[("text", "from b")]]}), holder="b")
    record = await a.start_run(RunRequest(dsl=_canvas(), query="x"))
    stream = a.stream_events(record.id)
    seen = []
    async for event in stream:
        seen.append(event)
        if event.kind == "message_delta":
            break
    follower = a.stream_events(record.id, after_seq=seen[-1].seq)  # takes a's feed while it is live
    await a.stop(grace=0)  # a dies: its feed is abandoned
    store.expire_lease(record.id)
    assert await b.reap_once() == 1
    rest = await asyncio.wait_for(_all(follower), 10)
    await b.wait_idle()
    events = seen + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert finished(events)["status"] == RunStatus.SUCCEEDED


async def test_stream_events_are_stream_batches_one_at_a_time_locally_and_from_the_store():
    store = InMemoryRunStore()
    orch = make_orchestrator(store, ScriptedLlm({"m": [[("text", "hello "), ("text", "world")]]}))
    record = await orch.start_run(RunRequest(dsl=_canvas(), query="q"))
    batches = orch.stream_batches(record.id)  # both take the live feed now
    events = orch.stream_events(record.id)
    local = [b async for b in batches]
    assert [e.seq for b in local for e in b] == [e.seq async for e in events]
    assert len(local) < local[-1][-1].seq  # grouped by commit
    await orch.wait_idle()
    stored = await _all(orch.stream_batches(record.id, after_seq=1))  # ended: from the store
    assert [[e.seq] for e in (await store.list_events(record.id))[1:]] == [[e.seq for e in b] for b in stored]
    assert [e.seq for e in await _all(orch.stream_events(record.id, after_seq=1))] == [b[0].seq for b in stored]
