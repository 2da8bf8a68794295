"""Text and attempts across a takeover (in-memory store; the gRPC path is the same core).

* A Message streaming when its replica died was started again on the next replica, and its deltas followed
  the dead attempt's: a client joining MessageDeltas showed the opening of the answer twice. The new attempt
  now starts with MessageReset, so a live client drops the void text; TEXT_DELIVERY_CONFIRMED never sends it.
* A node whose replica died right after its model call began had no durable NodeStarted, so the next replica
  numbered its attempt 1 again (two model calls, one attempt, one model request id). NodeStarted of a node
  that calls out is now durable before the call: each attempt has its own number.
"""

from __future__ import annotations

import asyncio

from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.events import Event
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, kinds, make_orchestrator, until
from tests.orchestrator.support.scripted_llm import ScriptedLlm


def canvas():
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


def live_text(events: list[Event], component: str = "msg") -> str:
    """What a client that applies MessageReset shows: text since the component's last NodeStarted is dropped
    on a reset."""
    shown: list[str] = []
    mark = 0
    for event in events:
        if event.data.get("component_id") != component:
            continue
        if event.kind == "node_started":
            mark = len(shown)
        elif event.kind == "message_reset":
            del shown[mark:]
        elif event.kind == "message_delta":
            shown.append(event.data["content"])
    return "".join(shown)


def joined(events: list[Event]) -> str:
    """What a client that cannot retract shows: every delta, appended."""
    return "".join(e.data["content"] for e in events if e.kind == "message_delta")


async def _taken_over(confirmed_live: bool = False):
    """Replica A dies while msg streams "partial "; B answers "the answer". Returns (store, b, run id,
    events A's client saw, the rest from B, the confirmed stream opened on A before the crash)."""
    store = InMemoryRunStore()
    hang = asyncio.Event()
    a = make_orchestrator(store, ScriptedLlm({"m": [[("text", "partial "), ("gate", hang)]]}), holder="a")
    b = make_orchestrator(store, ScriptedLlm({"m": [[("text", "the "), ("text", "answer")]]}), holder="b")
    record = await a.start_run(RunRequest(dsl=canvas(), query="x"))
    confirmed = a.stream_batches(record.id, confirmed_text=True)
    first = await until(a.stream_events(record.id), lambda e: e.kind == "message_delta")
    await a.stop(grace=0)
    store.expire_lease(record.id)
    assert await b.reap_once() == 1
    rest = [e async for e in b.stream_events(record.id, after_seq=first[-1].seq)]
    await b.wait_idle()
    return store, b, record.id, first, rest, confirmed


async def test_a_live_client_drops_the_superseded_text_on_message_reset():
    store, _, run_id, first, rest, _ = await _taken_over()
    events = first + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert joined(first) == "partial "
    resets = [e for e in rest if e.kind == "message_reset"]
    assert [(e.data["component_id"], e.data["attempt"]) for e in resets] == [("msg", 2)]
    at = rest.index(resets[0])
    nxt = rest[at + 1]
    assert nxt.kind == "node_started" and nxt.data["component_id"] == "msg" and nxt.data["attempt"] == 2
    assert not [e for e in rest[:at] if e.kind == "message_delta"]  # before the new attempt's first delta
    assert live_text(events) == "the answer" == finished(events)["outputs"]["content"]
    ends = [e.data["content"] for e in events if e.kind == "message_end"]
    assert ends == ["the answer"]
    assert (await store.get_run(run_id)).status == RunStatus.SUCCEEDED


async def test_confirmed_text_shows_each_answer_once_live_and_replayed():
    _, b, run_id, _, _, confirmed = await _taken_over()
    # Opened on A before the crash: held A's text back, and followed the run through the store after A died.
    async with asyncio.timeout(30):
        live = [e for batch in [x async for x in confirmed] for e in batch]
    assert joined(live) == "the answer" and "message_reset" not in kinds(live)
    assert live[-1].kind == "workflow_finished"
    seqs = [e.seq for e in live]
    assert seqs == sorted(set(seqs))
    # A replay of the finished run from the start.
    replay = [e for batch in [x async for x in b.stream_batches(run_id, 0, confirmed_text=True)] for e in batch]
    assert joined(replay) == "the answer" and "message_reset" not in kinds(replay)
    # Reattaching after any seq a confirmed client got shows the rest, still once.
    for cut in seqs[:-1]:
        after = [e for batch in [x async for x in b.stream_batches(run_id, cut, confirmed_text=True)] for e in batch]
        before = [e for e in replay if e.seq <= cut]
        assert joined(before) + joined(after) == "the answer", cut
    # The plain log still holds the superseded text, then the reset (documented LIVE semantics).
    plain = [e async for e in b.stream_events(run_id, 0)]
    assert joined(plain) == "partial the answer" and live_text(plain) == "the answer"


class CallsThenHangs:
    """A model whose first call signals `called` and never answers; later calls answer at once."""

    def __init__(self) -> None:
        self.called = asyncio.Event()
        self.request_ids: list[str] = []

    async def chat_stream(self, request):
        self.request_ids.append(request.request_id)
        if len(self.request_ids) == 1:
            self.called.set()
            await asyncio.Event().wait()
        async for chunk in ScriptedLlm({"m": [[("text", "fine")]]}).chat_stream(request):
            yield chunk


async def test_every_attempt_has_its_own_number_across_a_takeover():
    store = InMemoryRunStore()
    llm = CallsThenHangs()
    a = make_orchestrator(store, llm, holder="a")
    b = make_orchestrator(store, llm, holder="b")
    record = await a.start_run(RunRequest(dsl=canvas(), query="x"))
    async with asyncio.timeout(30):
        await llm.called.wait()
    await a.stop(grace=0)  # dies the moment the model call began (before any timed flush)
    store.expire_lease(record.id)
    assert await b.reap_once() == 1
    events = [e async for e in b.stream_events(record.id, 0)]
    await b.wait_idle()
    started = [e.data["attempt"] for e in events if e.kind == "node_started" and e.data["component_id"] == "llm"]
    assert started == [1, 2]
    assert len(llm.request_ids) == 2 and len(set(llm.request_ids)) == 2  # one model request id per attempt
    finished_llm = [e.data["attempt"] for e in events if e.kind == "node_finished" and e.data["component_id"] == "llm"]
    assert finished_llm == [2]
    done = finished(events)
    assert done["status"] == RunStatus.SUCCEEDED and done["usage"]["calls"] == 1  # the attempt that answered
