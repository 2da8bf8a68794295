"""Turns of one session are serialised, on the real canvas_store (gRPC; SQLite, PostgreSQL, MariaDB).

A session's next message makes its run under a store key naming the session's turn count, so two
messages sent at once make one run (the other is ABORTED, TURN_IN_PROGRESS, and applies nothing), a
message sent while the previous turn still runs is refused the same way, a retry of the same request
reattaches, and a run that held the key but ended without recording its turn does not block the session.
Races are set up with events (a barrier before run creation, a gate in the model), never timing.
"""

from __future__ import annotations

import asyncio

import pytest

from services.common.errors import AbortedError
from services.orchestrator.core.events import WORKFLOW_FINISHED, Event
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core import sessions
from services.orchestrator.core.ports import RunRecord, RunStatus
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator
from tests.orchestrator.support.scripted_llm import ScriptedLlm
from tests.orchestrator.test_resume_store import (RacingStore, as_alice, canvas_store, drain,  # noqa: F401 (fixtures)
                                                   new_session)


def chat_canvas():
    return dsl({"begin": {"type": "Begin", "down": ["llm"]},
                "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                        "down": ["msg"]},
                "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}}})


async def test_two_messages_sent_at_once_make_one_turn(canvas_store):
    address, stub = canvas_store
    store = RacingStore(address)
    # The model waits until both calls have returned, so the winner's turn cannot end (and let the other
    # message through as the next turn, which would be fine too) before the race is decided.
    gate = asyncio.Event()
    llm = ScriptedLlm({"m": [[("gate", gate), ("text", "OK")]]})
    a, b = make_orchestrator(store, llm, holder="a"), make_orchestrator(store, llm, holder="b")
    try:
        session_id = await new_session(stub, chat_canvas())
        store.hold_creates = True
        outcomes = await asyncio.gather(a.start_run(RunRequest(session_id=session_id, query="from a")),
                                        b.start_run(RunRequest(session_id=session_id, query="from b")),
                                        return_exceptions=True)
        store.hold_creates = False
        gate.set()
        runs = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(runs) == 1 and len(refused) == 1, outcomes
        assert isinstance(refused[0], AbortedError) and refused[0].reason == "TURN_IN_PROGRESS"
        assert refused[0].metadata["run_id"] == runs[0].id
        winner = "from a" if outcomes[0] is runs[0] else "from b"
        events = await drain(a, runs[0].id)
        await b.wait_idle()
        assert finished(events)["status"] == RunStatus.SUCCEEDED
        session = await store.get_session(session_id)
        assert [m["content"] for m in session.history] == [winner, "OK"] and session.conversation_turns == 1
        # the session goes on with the next message
        third = await a.start_run(RunRequest(session_id=session_id, query="next"))
        assert finished(await drain(a, third.id))["status"] == RunStatus.SUCCEEDED
        assert (await store.get_session(session_id)).conversation_turns == 2
    finally:
        await a.stop()
        await b.stop()
        await store.close()


async def test_a_message_while_the_previous_turn_runs_is_refused_and_a_retry_reattaches(canvas_store):
    address, stub = canvas_store
    store = RacingStore(address)
    gate = asyncio.Event()
    orch = make_orchestrator(store, llm=ScriptedLlm({"m": [[("gate", gate), ("text", "first answer")]]}))
    try:
        session_id = await new_session(stub, chat_canvas())
        first = await orch.start_run(RunRequest(session_id=session_id, query="one", request_id="req-1"))
        with pytest.raises(AbortedError) as caught:
            await orch.start_run(RunRequest(session_id=session_id, query="two"))
        assert caught.value.reason == "TURN_IN_PROGRESS" and caught.value.metadata["run_id"] == first.id
        again = await orch.start_run(RunRequest(session_id=session_id, query="one", request_id="req-1"))
        assert again.id == first.id  # the same request retried: the same run
        gate.set()
        assert finished(await drain(orch, first.id))["outputs"]["content"] == "first answer"
        session = await store.get_session(session_id)
        assert [m["content"] for m in session.history] == ["one", "first answer"]
        second = await orch.start_run(RunRequest(session_id=session_id, query="two"))
        assert finished(await drain(orch, second.id))["status"] == RunStatus.SUCCEEDED
        assert [m["content"] for m in (await store.get_session(session_id)).history][2] == "two"
    finally:
        await orch.stop()
        await store.close()


async def test_a_run_that_held_the_turn_and_ended_unrecorded_does_not_block_the_session(canvas_store):
    address, stub = canvas_store
    store = RacingStore(address)
    orch = make_orchestrator(store, ScriptedLlm())
    try:
        session_id = await new_session(stub, chat_canvas())
        # Runs made one after another under the session's next turn key, each ending FAILED without recording
        # its turn: more of them than a message's attempts at a contested turn, which they must not use up.
        strays: list[str] = []
        for _ in range(6):
            key = sessions.turn_request_id(session_id, 0, strays)
            stray, lease = await store.start_run(RunRecord(id="", spec={"dsl": chat_canvas(), "globals": {}},
                                                           session_id=session_id), key, "someone", 15000)
            await store.commit(stray.id, lease.token, [], [Event(WORKFLOW_FINISHED, {"status": int(RunStatus.FAILED)})],
                               status=RunStatus.FAILED)
            strays.append(stray.id)
        run = await orch.start_run(RunRequest(session_id=session_id, query="hello"))
        assert run.id not in strays
        assert finished(await drain(orch, run.id))["status"] == RunStatus.SUCCEEDED
        assert (await store.get_session(session_id)).conversation_turns == 1
    finally:
        await orch.stop()
        await store.close()
