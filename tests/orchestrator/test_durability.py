"""Durable runs on the in-memory store: takeover after a replica dies, replay with after_seq, cancel
from another replica, pause/resume on another replica, lease fencing and idempotent starts.

The same scenarios run against two orchestrator processes on PostgreSQL in test_replicas.py once the
canvas_store service is available.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from services.common.errors import AbortedError
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.dsl.loader import load
from services.orchestrator.core.ports import RunRecord, RunStatus
from tests.orchestrator.support.harness import dsl, finished, kinds, make_orchestrator, node_events, until
from tests.orchestrator.support.scripted_llm import ScriptedLlm


def pipeline():
    return dsl({
        "begin": {"type": "Begin", "down": ["prep"]},
        "prep": {"type": "VariableAssigner", "down": ["llm"], "params": {"variables": [
            {"variable": "env.note", "operator": "set", "parameter": "prepared {sys.query}"}]}},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{env.note}"}]}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{env.note}: {llm@content}"]}},
    }, globals={"env.note": ""})


async def test_takeover_continues_without_rerunning_finished_nodes_and_events_are_exactly_once():
    store = InMemoryRunStore()
    hang = asyncio.Event()
    a = make_orchestrator(store, ScriptedLlm({"m": [[("text", "partial "), ("gate", hang)]]}), holder="a")
    b = make_orchestrator(store, ScriptedLlm({"m": [[("text", "from b")]]}), holder="b")
    record = await a.start_run(RunRequest(dsl=pipeline(), query="x"))
    first = await until(a.stream_events(record.id), lambda e: e.kind == "message_delta" and e.data["content"] == "partial ")
    # replica A dies mid-stream: nothing more is written, its lease lapses
    await a.stop(grace=0)
    store.expire_lease(record.id)
    assert await b.reap_once() == 1
    rest = [e async for e in b.stream_events(record.id, after_seq=first[-1].seq)]
    await b.wait_idle()
    events = first + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # every event exactly once
    assert node_events(events, "node_finished").count("prep") == 1  # not re-run
    assert node_events(events, "node_started").count("begin") == 1
    assert kinds(events).count("workflow_started") == 1 and kinds(events).count("workflow_finished") == 1
    done = finished(events)
    assert done["status"] == RunStatus.SUCCEEDED
    assert done["outputs"]["content"] == "prepared x: from b"  # state (env.note) was rebuilt from the journal
    retried = [e.data["attempt"] for e in events if e.kind == "node_started" and e.data["component_id"] == "llm"]
    assert retried == [1, 2]  # the interrupted node started again on B, as attempt 2
    assert (await store.get_run(record.id)).status == RunStatus.SUCCEEDED


async def test_a_replica_that_lost_its_lease_cannot_write():
    store = InMemoryRunStore()
    a = make_orchestrator(store, holder="a")
    record = await a.start_run(RunRequest(dsl=dsl({"begin": {"type": "Begin"}})))
    await a.wait_idle()
    fresh = InMemoryRunStore()
    from services.orchestrator.core.ports import RunRecord
    await fresh.create_run(RunRecord(id="r1", spec={}))
    old = await fresh.acquire_lease("r1", "a", 1000)
    fresh.expire_lease("r1")
    await fresh.acquire_lease("r1", "b", 1000)
    with pytest.raises(AbortedError):
        await fresh.commit("r1", old.token, [], [])
    assert (await store.get_run(record.id)).status == RunStatus.SUCCEEDED


async def test_cancel_from_another_replica_ends_cancelled():
    store = InMemoryRunStore()
    hang = asyncio.Event()
    a = make_orchestrator(store, ScriptedLlm({"m": [[("gate", hang)]]}), holder="a", lease_ttl_ms=300)
    b = make_orchestrator(store, holder="b")
    record = await a.start_run(RunRequest(dsl=pipeline(), query="x"))
    await until(a.stream_events(record.id), lambda e: e.kind == "node_started" and e.data["component_id"] == "llm")
    await b.cancel(record.id)
    events = [e async for e in b.stream_events(record.id)]
    await a.wait_idle()
    done = finished(events)
    assert done["status"] == RunStatus.CANCELLED
    assert kinds(events).count("workflow_finished") == 1
    assert (await store.get_run(record.id)).status == RunStatus.CANCELLED
    # cancellation is scoped to that run: the next run is unaffected (§7 item 9)
    _, ok = record, None
    second = await b.start_run(RunRequest(dsl=dsl({"begin": {"type": "Begin"}})))
    ok = [e async for e in b.stream_events(second.id)]
    assert finished(ok)["status"] == RunStatus.SUCCEEDED


def form_canvas():
    return dsl({
        "begin": {"type": "Begin", "down": ["plan"]},
        "plan": {"type": "StringTransform", "params": {"method": "merge", "script": "plan for {sys.query}"}, "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["msg"], "params": {
            "enable_tips": True, "tips": "Review: {plan@result}",
            "inputs": {"instructions": {"name": "Instructions", "type": "paragraph", "optional": False},
                       "attachment": {"name": "File", "type": "file", "optional": True}}}},
        "msg": {"type": "Message", "params": {"content": ["{plan@result} / {ask@instructions}"]}},
    })


async def test_pause_and_resume_on_another_replica():
    store = InMemoryRunStore()
    a = make_orchestrator(store, holder="a")
    b = make_orchestrator(store, holder="b")
    session = store.create_session()
    first = await a.start_run(RunRequest(dsl=form_canvas(), query="trip", session_id=session.id))
    events = [e async for e in a.stream_events(first.id)]
    await a.wait_idle()
    assert kinds(events)[-2:] == ["user_inputs_required", "workflow_finished"]
    ask = events[-2].data
    assert ask["component_id"] == "ask" and ask["tips"] == "Review: plan for trip"
    assert set(ask["inputs"]) == {"instructions"}  # optional file fields do not block
    assert finished(events)["status"] == RunStatus.PAUSED
    assert (await store.get_session(session.id)).state["paused_run_id"] == first.id

    second = await b.start_run(RunRequest(dsl=form_canvas(), session_id=session.id, inputs={"instructions": {"value": "go east"}}))
    resumed = [e async for e in b.stream_events(second.id)]
    await b.wait_idle()
    assert resumed[0].kind == "workflow_started" and resumed[0].data["resumed"] is True
    assert node_events(resumed, "node_started") == ["ask", "msg"]  # begin and plan are not re-run
    assert finished(resumed)["outputs"]["content"] == "plan for trip / go east"
    state = (await store.get_session(session.id)).state
    assert state["paused_run_id"] == "" and state["history"][-1] == {"role": "assistant", "content": "plan for trip / go east"}


async def test_resume_without_the_required_answer_pauses_again():
    store = InMemoryRunStore()
    a = make_orchestrator(store)
    session = store.create_session()
    first = await a.start_run(RunRequest(dsl=form_canvas(), query="trip", session_id=session.id))
    [e async for e in a.stream_events(first.id)]
    await a.wait_idle()
    again = await a.start_run(RunRequest(dsl=form_canvas(), session_id=session.id, inputs={"other": "x"}))
    events = [e async for e in a.stream_events(again.id)]
    assert finished(events)["status"] == RunStatus.PAUSED


async def test_replay_from_after_seq_and_idempotent_request_id():
    orch = make_orchestrator()
    request = RunRequest(dsl=pipeline(), query="x", request_id="11111111-2222-3333-4444-555555555555")
    record = await orch.start_run(request)
    events = [e async for e in orch.stream_events(record.id)]
    await orch.wait_idle()
    again = await orch.start_run(request)
    assert again.id == record.id
    tail = [e async for e in orch.stream_events(record.id, after_seq=3)]
    assert [e.seq for e in tail] == [e.seq for e in events[3:]]
    assert [e.data for e in tail] == [e.data for e in events[3:]]


async def test_nodes_stopped_by_a_failure_still_get_node_finished():
    hang = asyncio.Event()
    doc = dsl({"begin": {"type": "Begin", "down": ["slow", "bad"]},
               "slow": {"type": "LLM", "params": {"llm_id": "m"}},
               "bad": {"type": "ListOperations", "params": {"query": "sys.query", "operations": "head"}}})
    orch = make_orchestrator(llm=ScriptedLlm({"m": [[("gate", hang)]]}))
    record = await orch.start_run(RunRequest(dsl=doc, query="not a list"))
    events = [e async for e in orch.stream_events(record.id)]
    assert finished(events)["error"]["component_id"] == "bad"
    assert sorted(node_events(events, "node_started")) == sorted(node_events(events, "node_finished"))
    stopped = next(e for e in events if e.kind == "node_finished" and e.data["component_id"] == "slow")
    assert stopped.data["error"]["reason"] == "RUN_FAILED"


async def test_takeover_inside_a_loop_keeps_counters_and_finished_passes():
    store = InMemoryRunStore()
    hang = asyncio.Event()
    # replica A: passes 0 and 1 answer, pass 2 hangs; replica B answers whatever it is asked
    a = make_orchestrator(store, ScriptedLlm({"m": [[("text", "a0")], [("text", "a1")], [("gate", hang)]]}), holder="a")
    b = make_orchestrator(store, ScriptedLlm({"m": [[("text", "b")]]}), holder="b")
    doc = dsl({
        "begin": {"type": "Begin", "down": ["loop"]},
        "loop": {"type": "Loop", "down": ["msg"], "params": {
            "maximum_loop_count": 4,
            "loop_variables": [{"variable": "log", "type": "array", "input_mode": "constant", "value": []}]}},
        "li": {"type": "LoopItem", "parent": "loop", "down": ["ask"]},
        "ask": {"type": "LLM", "parent": "loop", "params": {"llm_id": "m"}, "down": ["keep"]},
        "keep": {"type": "VariableAssigner", "parent": "loop", "params": {"variables": [
            {"variable": "loop@log", "operator": "append", "parameter": "ask@content"}]}},
        "msg": {"type": "Message", "params": {"content": ["{loop@log}"]}},
    })
    record = await a.start_run(RunRequest(dsl=doc, query="q"))
    asks = []

    def third_pass_started(event) -> bool:
        if event.kind == "node_started" and event.data["component_id"] == "ask":
            asks.append(event)
        return len(asks) == 3

    first = await until(a.stream_events(record.id), third_pass_started)
    await a.stop(grace=0)
    store.expire_lease(record.id)
    assert await b.reap_once() == 1
    events = [e async for e in b.stream_events(record.id)]
    await b.wait_idle()
    assert finished(events)["outputs"]["content"] == '["a0","a1","b","b"]'
    assert node_events(events, "node_finished").count("keep") == 4  # passes 0 and 1 were not re-run
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[:len(first)] == first  # B continued the same log


async def test_the_reaper_leaves_a_just_created_run_to_its_creator_and_takes_one_left_unleased():
    store = InMemoryRunStore()
    reaper = make_orchestrator(store, ScriptedLlm({"m": [[("text", "late")]]}), holder="reaper", lease_ttl_ms=600_000)
    canvas = load(pipeline()).canvas
    spec = {"dsl": canvas.dsl, "globals": dict(canvas.globals), "query": "q"}
    now = int(time.time() * 1000)
    # created a moment ago, not leased yet: its RunCanvas (on some replica) is about to lease it. The
    # 10-minute TTL keeps "a moment ago" true however slow the machine is.
    await store.create_run(RunRecord(id="fresh", spec=spec, create_time_ms=now))
    assert await reaper.reap_once() == 0
    # created more than a lease TTL ago and never leased: its creator died in between
    await store.create_run(RunRecord(id="left", spec=spec, create_time_ms=now - 3_600_000))
    assert await reaper.reap_once() == 1
    await reaper.wait_idle()
    assert (await store.get_run("left")).status == RunStatus.SUCCEEDED
    assert (await store.get_run("fresh")).status == RunStatus.PENDING
