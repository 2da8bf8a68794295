"""Run status while a run is under way, and CancelRun on a paused run, on the in-memory store and on
the real canvas_store (SQLite, over gRPC).

* The store's record shows RUNNING from the run's first commit on (the SQL store used to go from
  PENDING straight to the final status; only the in-memory store showed RUNNING).
* Cancelling a PAUSED run ends it CANCELLED: the status is written durably, a terminal
  WorkflowFinished(CANCELLED) follows the pause, and a resume of it is FAILED_PRECONDITION.

Everything waits on events (a gated model call, the persisted event stream), never on timing.
"""

from __future__ import annotations

import asyncio

import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.common.context import token_var
from services.common.errors import FailedPreconditionError
from services.common.structs import to_struct
from services.orchestrator.adapters.memory import InMemoryRunStore
from services.orchestrator.adapters.store_grpc import GrpcRunStore
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import dsl, finished, kinds, make_orchestrator, until
from tests.orchestrator.support.scripted_llm import ScriptedLlm
from tests.orchestrator.support.store_server import running_store
from tests.orchestrator.test_resume import form_canvas

TOKENS = [{"token": "t-alice", "tenant": "acme", "user": "alice"},
          {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"}]
AUTH = (("authorization", "Bearer t-alice"),)


def gated_canvas():
    return dsl({
        "begin": {"type": "Begin", "down": ["llm"]},
        "llm": {"type": "LLM", "params": {"llm_id": "m", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{llm@content}"]}},
    })


@pytest.fixture(scope="module")
async def sql_store(tmp_path_factory):
    """The real canvas_store on SQLite, in this process on a loopback port."""
    tmp = str(tmp_path_factory.mktemp("status-sqlite"))
    async with running_store(tmp, f"sqlite:///{tmp}/store.db", TOKENS) as found:
        yield found


@pytest.fixture(params=("memory", "sqlite"))
async def store(request, sql_store):
    """A RunStore: the in-memory one, or the real canvas_store's gRPC adapter (acting as alice)."""
    if request.param == "memory":
        yield InMemoryRunStore()
        return
    address, _ = sql_store
    adapter = GrpcRunStore(address, own_token="t-svc")
    try:
        yield adapter
    finally:
        await adapter.close()


@pytest.fixture(autouse=True)
def as_alice():
    """Calls made by the test carry alice's token, as inside her RunCanvas RPC."""
    token = token_var.set("t-alice")
    yield
    token_var.reset(token)


async def drain(orch, run_id: str):
    async with asyncio.timeout(60):  # a safety net against a hang, not a timing assertion
        events = [e async for e in orch.stream_events(run_id)]
        await orch.wait_idle()
    return events


async def new_session(store, stub, canvas) -> str:
    if isinstance(store, InMemoryRunStore):
        return store.create_session().id
    created = await stub.CreateCanvas(pb.CreateCanvasRequest(canvas=pb.Canvas(title=f"c{id(canvas)}", dsl=to_struct(canvas))),
                                      metadata=AUTH)
    return (await stub.CreateSession(pb.CreateSessionRequest(canvas_id=created.id), metadata=AUTH)).id


# -- 1. RUNNING while the run is under way ---------------------------------------------------------

async def test_the_store_record_is_running_while_the_run_is_under_way(store):
    gate = asyncio.Event()
    orch = make_orchestrator(store, ScriptedLlm({"m": [[("gate", gate), ("text", "done")]]}))
    record = await orch.start_run(RunRequest(dsl=gated_canvas(), query="q"))
    assert record.status == RunStatus.PENDING
    # The model call waits on the gate: Begin's commit (with the started marker) is persisted by now.
    seen = await until(orch.stream_events(record.id),
                       lambda e: e.kind == "node_started" and e.data["component_id"] == "llm")
    assert kinds(seen)[0] == "workflow_started"
    assert (await store.get_run(record.id)).status == RunStatus.RUNNING
    gate.set()
    events = await drain(orch, record.id)
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert (await store.get_run(record.id)).status == RunStatus.SUCCEEDED


async def test_a_one_commit_run_still_ends_with_its_final_status(store):
    """The RUNNING of the first commit never overrides the final status carried in the same commit."""
    orch = make_orchestrator(store)
    record = await orch.start_run(RunRequest(dsl=dsl({"begin": {"type": "Begin"}})))
    events = await drain(orch, record.id)
    assert finished(events)["status"] == RunStatus.SUCCEEDED
    assert (await store.get_run(record.id)).status == RunStatus.SUCCEEDED


# -- 2. CancelRun on a PAUSED run --------------------------------------------------------------------

async def test_cancelling_a_paused_run_ends_it_cancelled_and_it_cannot_be_resumed(store):
    orch = make_orchestrator(store)
    first = await orch.start_run(RunRequest(dsl=form_canvas(), query="trip"))
    events = await drain(orch, first.id)
    assert finished(events)["status"] == RunStatus.PAUSED

    cancelled = await orch.cancel(first.id)
    assert cancelled.status == RunStatus.CANCELLED
    stored = await store.get_run(first.id)
    assert stored.status == RunStatus.CANCELLED  # durable, not just in the reply
    assert stored.error is not None and stored.error.reason == "CANCELLED"
    log = await store.list_events(first.id)
    assert kinds(log)[-3:] == ["user_inputs_required", "workflow_finished", "workflow_finished"]
    assert log[-2].data["status"] == RunStatus.PAUSED and log[-1].data["status"] == RunStatus.CANCELLED
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    # A client following the run after the pause sees the terminal CANCELLED event.
    tail = [e async for e in orch.stream_events(first.id, after_seq=log[-2].seq)]
    assert kinds(tail) == ["workflow_finished"] and tail[0].data["status"] == RunStatus.CANCELLED

    with pytest.raises(FailedPreconditionError) as caught:
        await orch.start_run(RunRequest(resume_run_id=first.id, inputs={"instructions": "go"}))
    assert caught.value.reason == "NOT_PAUSED"
    # Cancelling again is harmless and keeps it CANCELLED (one CANCELLED event).
    assert (await orch.cancel(first.id)).status == RunStatus.CANCELLED
    assert kinds(await store.list_events(first.id)).count("workflow_finished") == 2


async def test_a_cancelled_paused_session_run_is_not_resumed_by_the_next_message(store, sql_store):
    stub = sql_store[1]
    orch = make_orchestrator(store)
    session_id = await new_session(store, stub, form_canvas())
    first = await orch.start_run(RunRequest(dsl=form_canvas(), query="trip", session_id=session_id))
    assert finished(await drain(orch, first.id))["status"] == RunStatus.PAUSED

    assert (await orch.cancel(first.id)).status == RunStatus.CANCELLED
    with pytest.raises(FailedPreconditionError):
        await orch.start_run(RunRequest(resume_run_id=first.id, session_id=session_id, inputs={"instructions": "go"}))
    # The next message on the session starts a new run instead of continuing the cancelled one.
    second = await orch.start_run(RunRequest(dsl=form_canvas(), query="again", session_id=session_id))
    events = await drain(orch, second.id)
    assert events[0].kind == "workflow_started" and events[0].data["resumed"] is False
    assert finished(events)["status"] == RunStatus.PAUSED
    assert (await store.get_run(first.id)).status == RunStatus.CANCELLED


class CancelledJustBeforeThePause(InMemoryRunStore):
    """A cancel request that reaches the store right before the run's pausing commit (as one sent to
    another replica): the commit reply is the first to tell the run."""

    async def commit(self, run_id, lease_token, steps, events, *, status=RunStatus.UNSPECIFIED, **rest):
        if status == RunStatus.PAUSED:
            await self.request_cancel(run_id)
        return await super().commit(run_id, lease_token, steps, events, status=status, **rest)


async def test_a_cancel_that_lands_as_the_run_pauses_still_ends_it_cancelled():
    store = CancelledJustBeforeThePause()
    orch = make_orchestrator(store)
    record = await orch.start_run(RunRequest(dsl=form_canvas(), query="trip"))
    events = await drain(orch, record.id)
    stored = await store.get_run(record.id)
    assert stored.status == RunStatus.CANCELLED
    # The stream ended with the pause; the CANCELLED end follows it in the log, as for a CancelRun
    # that comes after the pause.
    assert finished(events)["status"] == RunStatus.PAUSED
    log = await store.list_events(record.id)
    assert log[-1].kind == "workflow_finished" and log[-1].data["status"] == RunStatus.CANCELLED
    with pytest.raises(FailedPreconditionError):
        await orch.start_run(RunRequest(resume_run_id=record.id, inputs={"instructions": "go"}))
