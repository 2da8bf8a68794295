"""Resuming paused runs safely (issue #6's gaps): one continuation per paused run, resume by run id
for runs without a session, and a session turn written exactly once even when the replica dies
between the session write and the run's terminal commit.

Concurrency is driven by events, never by timing: a model call that waits on a gate keeps a resumed
run from finishing, a store subclass holds both resumes until each has read the session (so both
really race for the same paused run), and another holds a run right after its session write (the
crash window). Every outcome asserted is decided by the store's keys and etags, not by who is faster.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

from services.common import status
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import start_server
from services.common.settings import Config
from services.common.structs import from_struct, to_struct
from services.common.errors import AbortedError, FailedPreconditionError, InvalidArgumentError, NotFoundError
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.app import build_definition
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import BothArrived, DiesOnce, dsl, finished, kinds, make_orchestrator, node_events
from tests.orchestrator.support.scripted_llm import ScriptedLlm


def review_canvas():
    """Begin -> plan -> ask (form) -> llm (model "m") -> msg."""
    return dsl({
        "begin": {"type": "Begin", "down": ["plan"]},
        "plan": {"type": "StringTransform", "params": {"method": "merge", "script": "plan for {sys.query}"}, "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["llm"], "params": {
            "inputs": {"answer": {"name": "Answer", "type": "line", "optional": False}}}},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{ask@answer}"}]},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{plan@result}: {llm@content}"]}},
    })


def form_canvas():
    return dsl({
        "begin": {"type": "Begin", "down": ["plan"]},
        "plan": {"type": "StringTransform", "params": {"method": "merge", "script": "plan for {sys.query}"}, "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["msg"], "params": {
            "inputs": {"instructions": {"name": "Instructions", "type": "paragraph", "optional": False}}}},
        "msg": {"type": "Message", "params": {"content": ["{plan@result} / {ask@instructions}"]}},
    })


def echo_loop():
    """A conversation loop: Begin -> ask (waits) -> echo -> show -> back to ask."""
    return dsl({
        "begin": {"type": "Begin", "down": ["ask"]},
        "ask": {"type": "UserFillUp", "down": ["echo"], "params": {
            "query_field": "message", "inputs": {"message": {"name": "message", "type": "paragraph", "optional": False}}}},
        "echo": {"type": "StringTransform", "params": {
            "method": "merge", "script": "turn {sys.conversation_turns}: {ask@message}"}, "down": ["show"]},
        "show": {"type": "Message", "params": {"content": ["{echo@result}"]}, "down": ["ask"]},
    })


async def drain(orch, run_id: str):
    events = [e async for e in orch.stream_events(run_id)]
    await orch.wait_idle()
    return events


async def start(orch, **kwargs):
    record = await orch.start_run(RunRequest(**kwargs))
    return record, await drain(orch, record.id)


def shown(events) -> list[str]:
    return [e.data["content"] for e in events if e.kind == "message_end"]


class BothReadFirst(InMemoryRunStore):
    """Holds run creation until two requests have reached it: both resumes read the session (and the
    paused run) before either creates its run, as two RunCanvas calls on two replicas may."""

    def __init__(self):
        super().__init__()
        self.hold = False
        self._creates = BothArrived()

    async def create_run(self, record, request_id=""):
        if self.hold:
            await self._creates.arrive()
        return await super().create_run(record, request_id)


class DiesAfterSessionWrite(InMemoryRunStore):
    """The next session turn is written, then the writer never returns: the replica is in the window
    between the session update and the terminal commit when it dies."""

    def __init__(self):
        super().__init__()
        self.crash = DiesOnce()

    async def append_session_turn(self, session_id, messages, state, etag=""):
        session = await super().append_session_turn(session_id, messages, state, etag)
        await self.crash.reached()
        return session


# -- 1. two resumes of one paused session -------------------------------------------------------

async def test_two_resumes_that_read_the_same_paused_session_exactly_one_proceeds():
    store = BothReadFirst()
    llm = ScriptedLlm({"m": [[("text", "ok")]]})
    a = make_orchestrator(store, llm, holder="a")
    b = make_orchestrator(store, llm, holder="b")
    session = store.create_session()
    paused, events = await start(a, dsl=review_canvas(), query="trip", session_id=session.id)
    assert finished(events)["status"] == RunStatus.PAUSED

    store.hold = True
    outcomes = await asyncio.gather(
        a.start_run(RunRequest(session_id=session.id, inputs={"answer": "from a"})),
        b.start_run(RunRequest(session_id=session.id, inputs={"answer": "from b"})),
        return_exceptions=True)
    store.hold = False
    runs = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(runs) == 1 and len(refused) == 1, outcomes
    assert isinstance(refused[0], AbortedError) and refused[0].reason == "ALREADY_RESUMED"
    assert refused[0].metadata["run_id"] == runs[0].id and paused.id in refused[0].message
    winner = "from a" if outcomes[0] is runs[0] else "from b"

    done = await drain(a, runs[0].id)
    await b.wait_idle()
    assert finished(done)["status"] == RunStatus.SUCCEEDED
    assert [r.messages[-1]["content"] for r in llm.requests] == [winner]  # the losing turn ran nothing
    saved = await store.get_session(session.id)
    assert [m["content"] for m in saved.state["history"]] == ["trip", "plan for trip: ok"]
    assert saved.conversation_turns == 2 and saved.state["paused_run_id"] == ""


async def test_a_resume_while_another_resume_is_running_is_aborted_and_applies_nothing():
    store = InMemoryRunStore()
    gate = asyncio.Event()
    llm = ScriptedLlm({"m": [[("gate", gate), ("text", "answered")]]})
    orch = make_orchestrator(store, llm)
    session = store.create_session()
    paused, _ = await start(orch, dsl=review_canvas(), query="trip", session_id=session.id)

    first = await orch.start_run(RunRequest(session_id=session.id, inputs={"answer": "one"}))
    with pytest.raises(AbortedError) as caught:  # `first` waits on the gate: it cannot have finished
        await orch.start_run(RunRequest(session_id=session.id, inputs={"answer": "two"}))
    assert caught.value.reason == "ALREADY_RESUMED" and caught.value.metadata["run_id"] == first.id
    assert f"run {paused.id} was already resumed by run {first.id}" in caught.value.message

    gate.set()
    events = await drain(orch, first.id)
    assert finished(events)["outputs"]["content"] == "plan for trip: answered"
    assert len(llm.requests) == 1 and llm.requests[0].messages[-1]["content"] == "one"
    saved = await store.get_session(session.id)
    assert [m["content"] for m in saved.state["history"]] == ["trip", "plan for trip: answered"]
    assert saved.state["paused_run_id"] == "" and saved.state["last_run_id"] == first.id
    # The paused run is not resumable any more, and the session is not paused: a new message is a new run.
    fresh, again = await start(orch, session_id=session.id, dsl=review_canvas(), query="next")
    assert again[0].data["resumed"] is False and finished(again)["status"] == RunStatus.PAUSED


async def test_a_retried_resume_reattaches_while_running_and_after_it_ended():
    store = InMemoryRunStore()
    gate = asyncio.Event()
    orch = make_orchestrator(store, ScriptedLlm({"m": [[("gate", gate), ("text", "done")]]}))
    session = store.create_session()
    await start(orch, dsl=review_canvas(), query="trip", session_id=session.id)
    request = RunRequest(session_id=session.id, inputs={"answer": "one"}, request_id="5d0c3a44-9a43-4c1b-9d55-0d1c1c9f1a01")
    first = await orch.start_run(request)
    assert (await orch.start_run(request)).id == first.id  # while it runs
    gate.set()
    await drain(orch, first.id)
    assert (await orch.start_run(request)).id == first.id  # after its turn was written
    saved = await store.get_session(session.id)
    assert saved.conversation_turns == 2 and len(saved.state["history"]) == 2


# -- 2. resume by run id (no session) -----------------------------------------------------------

async def test_a_run_without_a_session_resumes_by_run_id_once():
    store = InMemoryRunStore()
    orch = make_orchestrator(store)
    paused, events = await start(orch, dsl=form_canvas(), query="trip")
    assert kinds(events)[-2:] == ["user_inputs_required", "workflow_finished"]
    assert finished(events)["status"] == RunStatus.PAUSED and paused.session_id == ""

    resumed, events = await start(orch, resume_run_id=paused.id, inputs={"instructions": {"value": "go east"}})
    assert events[0].data["resumed"] is True
    assert node_events(events, "node_started") == ["ask", "msg"]  # begin and plan are not re-run
    assert finished(events)["outputs"]["content"] == "plan for trip / go east"
    assert (await store.get_run(resumed.id)).spec["resume_from"] == paused.id

    with pytest.raises(AbortedError) as caught:  # the answer was taken: a second one is refused
        await orch.start_run(RunRequest(resume_run_id=paused.id, inputs={"instructions": "go west"}))
    assert caught.value.reason == "ALREADY_RESUMED" and caught.value.metadata["run_id"] == resumed.id
    with pytest.raises(FailedPreconditionError, match="SUCCEEDED, not PAUSED"):
        await orch.start_run(RunRequest(resume_run_id=resumed.id, inputs={"instructions": "x"}))
    with pytest.raises(NotFoundError):
        await orch.start_run(RunRequest(resume_run_id="0" * 32))


async def test_resume_by_run_id_without_the_answer_pauses_again_and_keeps_going():
    orch = make_orchestrator()
    paused, _ = await start(orch, dsl=form_canvas(), query="trip")
    again, events = await start(orch, resume_run_id=paused.id, inputs={"other": "x"})
    assert finished(events)["status"] == RunStatus.PAUSED and events[-2].data["component_id"] == "ask"
    last, events = await start(orch, resume_run_id=again.id, inputs={"instructions": "go"})
    assert finished(events)["outputs"]["content"] == "plan for trip / go"


async def test_resume_by_run_id_answers_every_form_the_run_waits_on():
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["who", "what"]},
        "who": {"type": "UserFillUp", "down": ["msg"], "params": {"inputs": {"name": {"name": "Name", "type": "line"}}}},
        "what": {"type": "UserFillUp", "down": ["msg"], "params": {"inputs": {"topic": {"name": "Topic", "type": "line"}}}},
        "msg": {"type": "Message", "params": {"content": ["{who@name} on {what@topic}"]}},
    })
    orch = make_orchestrator()
    paused, events = await start(orch, dsl=canvas)
    assert sorted(e.data["component_id"] for e in events if e.kind == "user_inputs_required") == ["what", "who"]
    _, events = await start(orch, resume_run_id=paused.id, inputs={"name": "Ada", "topic": "engines"})
    assert finished(events)["outputs"]["content"] == "Ada on engines"


async def test_a_conversation_without_a_session_continues_turn_by_turn_by_run_id():
    orch = make_orchestrator(conversation_max_turns=3)
    run, events = await start(orch, dsl=echo_loop(), query="hello")
    assert shown(events) == ["turn 1: hello"] and finished(events)["status"] == RunStatus.PAUSED
    run, events = await start(orch, resume_run_id=run.id, query="two")
    assert shown(events) == ["turn 2: two"] and finished(events)["status"] == RunStatus.PAUSED
    run, events = await start(orch, resume_run_id=run.id, query="three")
    assert shown(events) == ["turn 3: three"] and finished(events)["status"] == RunStatus.SUCCEEDED


async def test_resume_by_run_id_of_a_session_run_follows_the_session():
    store = InMemoryRunStore()
    orch = make_orchestrator(store)
    session = store.create_session()
    first, _ = await start(orch, dsl=form_canvas(), query="trip", session_id=session.id)
    with pytest.raises(InvalidArgumentError) as caught:
        await orch.start_run(RunRequest(resume_run_id=first.id, session_id=store.create_session().id))
    assert caught.value.violations[0].field == "resume_run_id"
    again, events = await start(orch, resume_run_id=first.id, inputs={"other": "x"})  # pauses again
    assert again.session_id == session.id and finished(events)["status"] == RunStatus.PAUSED
    with pytest.raises(FailedPreconditionError) as stale:  # the session waits on `again` now
        await orch.start_run(RunRequest(resume_run_id=first.id, inputs={"instructions": "x"}))
    assert stale.value.reason == "NOT_PAUSED" and stale.value.metadata["paused_run_id"] == again.id
    _, events = await start(orch, resume_run_id=again.id, inputs={"instructions": "go"})
    assert finished(events)["outputs"]["content"] == "plan for trip / go"
    assert (await store.get_session(session.id)).state["paused_run_id"] == ""


async def test_run_canvas_resume_run_id_over_grpc(tmp_path):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
        "auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]},
        "orchestrator": {"flush_interval_ms": 5}})
    running = await start_server(build_definition(config, store=InMemoryRunStore(), llm=ScriptedLlm()), config,
                                 authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    stub, auth = orchestrator_pb2_grpc.OrchestratorStub(channel), [("authorization", "Bearer t1")]

    async def run(**fields):
        return [e async for e in stub.RunCanvas(orchestrator_pb2.RunCanvasRequest(**fields), metadata=auth)
                if not e.HasField("heartbeat")]

    try:
        first = await run(dsl=to_struct(form_canvas()), query="trip")
        assert first[-2].user_inputs_required.component_id == "ask"
        assert first[-1].workflow_finished.status == common_pb2.RUN_STATUS_PAUSED
        paused_id = first[0].run_id
        # No source: the paused run knows its DSL.
        resumed = await run(resume_run_id=paused_id, inputs=to_struct({"instructions": "go east"}))
        assert resumed[0].workflow_started.resumed and resumed[0].run_id != paused_id
        final = resumed[-1].workflow_finished
        assert final.status == common_pb2.RUN_STATUS_SUCCEEDED
        assert from_struct(final.outputs)["content"] == "plan for trip / go east"

        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await run(resume_run_id=paused_id, inputs=to_struct({"instructions": "again"}))
        assert caught.value.code() == grpc.StatusCode.ABORTED
        error = status.from_rpc_error(caught.value)
        assert error.reason == "ALREADY_RESUMED" and error.metadata["run_id"] == resumed[0].run_id
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await run(resume_run_id=resumed[0].run_id)
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await run(resume_run_id="f" * 32)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await run(query="no source")
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "resume_run_id" in caught.value.details()
    finally:
        await channel.close()
        await running.stop(0)


# -- 3. a crash between the session write and the terminal commit --------------------------------

async def test_a_takeover_after_the_session_write_does_not_apply_the_turn_twice():
    store = DiesAfterSessionWrite()
    a = make_orchestrator(store, holder="a")
    b = make_orchestrator(store, holder="b")
    session = store.create_session()
    first, events = await start(a, dsl=echo_loop(), query="hello", session_id=session.id)
    assert shown(events) == ["turn 1: hello"]

    store.crash.armed = True
    second = await a.start_run(RunRequest(session_id=session.id, query="two"))
    await store.crash.passed.wait()  # the turn is in the session; the run's terminal commit is not
    assert (await store.get_session(session.id)).state["paused_run_id"] == second.id
    assert (await store.get_run(second.id)).status == RunStatus.RUNNING
    # A message in this window must not start the conversation over (nor resume a run still running).
    with pytest.raises(AbortedError) as caught:
        await b.start_run(RunRequest(session_id=session.id, query="three"))
    assert caught.value.reason == "TURN_IN_PROGRESS" and caught.value.metadata["run_id"] == second.id

    await a.stop(grace=0)  # replica A dies: nothing more is written, its lease is handed back
    assert await b.reap_once() == 1
    events = await drain(b, second.id)
    assert kinds(events).count("workflow_finished") == 1 and finished(events)["status"] == RunStatus.PAUSED
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    saved = await store.get_session(session.id)
    assert [m["content"] for m in saved.history] == ["hello", "turn 1: hello", "two", "turn 2: two"]
    assert [m["content"] for m in saved.state["history"]] == ["hello", "turn 1: hello", "two", "turn 2: two"]
    assert saved.conversation_turns == 2 and saved.state["paused_run_id"] == second.id

    _, events = await start(b, session_id=session.id, query="three")  # the conversation goes on
    assert shown(events) == ["turn 3: three"]
    assert (await store.get_session(session.id)).conversation_turns == 3


class AnotherTurnLandsFirst(InMemoryRunStore):
    """Right before the next compare-and-set turn write, another writer appends a turn: the etag the
    run read is stale when its write arrives."""

    def __init__(self):
        super().__init__()
        self.interfere = False

    async def append_session_turn(self, session_id, messages, state, etag=""):
        if self.interfere and etag:
            self.interfere = False
            current = await self.get_session(session_id)
            other = [{"role": "user", "content": "meanwhile"}]
            await super().append_session_turn(session_id, other, {**current.state, "history": current.state.get("history", []) + other})
        return await super().append_session_turn(session_id, messages, state, etag)


async def test_a_turn_write_that_loses_the_etag_race_is_applied_on_top_of_the_other_turn():
    store = AnotherTurnLandsFirst()
    orch = make_orchestrator(store)
    session = store.create_session()
    store.interfere = True
    first, events = await start(orch, dsl=form_canvas(), query="trip", session_id=session.id)
    assert finished(events)["status"] == RunStatus.PAUSED
    saved = await store.get_session(session.id)
    assert [m["content"] for m in saved.state["history"]] == ["meanwhile", "trip"]  # neither turn lost
    assert saved.conversation_turns == 2 and saved.state["paused_run_id"] == first.id
    _, events = await start(orch, session_id=session.id, inputs={"instructions": "go"})
    assert finished(events)["outputs"]["content"] == "plan for trip / go"
