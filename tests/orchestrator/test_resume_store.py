"""The resume guarantees of test_resume.py on the real canvas_store (gRPC, SQLite / PostgreSQL /
MariaDB): the store's unique idempotency key lets exactly one of two racing resumes create the
continuation of a paused run (a true race between two transactions on the server databases), and
the session turn's compare-and-set on the store's etag keeps a takeover after a crash from
appending the turn twice.

The orchestrator core talks to the store through its real gRPC adapter with a service token; the
test acts as alice the way an RPC does (her token in the request context), and a takeover runs
outside it (service token on behalf of the run's owner). The races are set up with events (a barrier before run creation, a hold after the session write), never timing.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid

import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.common.context import token_var
from services.common.errors import AbortedError, InvalidArgumentError
from services.common.structs import to_struct
from services.orchestrator.adapters.store_grpc import GrpcRunStore
from services.orchestrator.core.run_request import RunRequest
from services.orchestrator.core.ports import RunStatus
from tests.orchestrator.support.harness import BothArrived, DiesOnce, finished, make_orchestrator
from tests.orchestrator.support.scripted_llm import ScriptedLlm
from tests.orchestrator.support.store_server import running_store
from tests.orchestrator.test_resume import echo_loop, form_canvas, review_canvas
from tests.support.databases import temporary_database

TOKENS = [{"token": "t-alice", "tenant": "acme", "user": "alice"},
          {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"}]
AUTH = (("authorization", "Bearer t-alice"),)


class RacingStore(GrpcRunStore):
    """GrpcRunStore that can hold two run creations until both arrived, or hold the writer right
    after its next session turn (the replica then dies in the window before its terminal commit)."""

    def __init__(self, target: str):
        super().__init__(target, own_token="t-svc")
        self.hold_creates = False
        self._creates = BothArrived()
        self.crash_after_turn = DiesOnce()

    async def start_run(self, record, request_id, holder, ttl_ms):
        if self.hold_creates:
            await self._creates.arrive()
        return await super().start_run(record, request_id, holder, ttl_ms)

    async def append_session_turn(self, session_id, messages, state, etag=""):
        session = await super().append_session_turn(session_id, messages, state, etag)
        await self.crash_after_turn.reached()
        return session


@pytest.fixture(scope="module", params=("sqlite", "postgresql", "mariadb"))
async def canvas_store(request, tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp(f"resume-{request.param}"))
    with temporary_database(request.param, tmp, prefix="ac_resume_test") as url:
        async with running_store(tmp, url, TOKENS) as found:
            yield found


async def new_session(stub, dsl) -> str:
    # A fresh title each time: id(dsl) of a dict freed earlier in the module can come back.
    canvas = await stub.CreateCanvas(pb.CreateCanvasRequest(canvas=pb.Canvas(title=f"c{uuid.uuid4().hex}", dsl=to_struct(dsl))),
                                     metadata=AUTH)
    return (await stub.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id), metadata=AUTH)).id


@pytest.fixture(autouse=True)
def as_alice():
    """Calls made by the test carry alice's token, as inside her RunCanvas RPC."""
    token = token_var.set("t-alice")
    yield
    token_var.reset(token)


async def takeover(orch) -> int:
    """A takeover scan outside any RPC: the service token acts on behalf of each run's owner."""
    return await asyncio.create_task(orch.reap_once(), context=contextvars.Context())


async def drain(orch, run_id: str):
    async with asyncio.timeout(60):  # a safety net against a hang, not a timing assertion
        events = [e async for e in orch.stream_events(run_id)]
        await orch.wait_idle()
    return events


async def test_racing_resumes_on_the_real_store_exactly_one_proceeds(canvas_store):
    address, stub = canvas_store
    store = RacingStore(address)
    a, b = make_orchestrator(store, holder="a"), make_orchestrator(store, holder="b")
    try:
        session_id = await new_session(stub, form_canvas())
        first = await a.start_run(RunRequest(session_id=session_id, query="trip"))
        assert finished(await drain(a, first.id))["status"] == RunStatus.PAUSED

        store.hold_creates = True
        outcomes = await asyncio.gather(
            a.start_run(RunRequest(session_id=session_id, inputs={"instructions": "from a"})),
            b.start_run(RunRequest(session_id=session_id, inputs={"instructions": "from b"})),
            return_exceptions=True)
        store.hold_creates = False
        runs = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(runs) == 1 and len(refused) == 1, outcomes
        assert isinstance(refused[0], AbortedError) and refused[0].metadata["run_id"] == runs[0].id
        winner = "from a" if outcomes[0] is runs[0] else "from b"
        events = await drain(a, runs[0].id)
        await b.wait_idle()
        assert finished(events)["outputs"]["content"] == f"plan for trip / {winner}"
        session = await store.get_session(session_id)
        assert [m["content"] for m in session.history] == ["trip", f"plan for trip / {winner}"]
        assert session.conversation_turns == 2
    finally:
        await a.stop()
        await b.stop()
        await store.close()


async def test_takeover_after_the_session_write_on_the_real_store_converges(canvas_store):
    address, stub = canvas_store
    store = RacingStore(address)
    a, b = make_orchestrator(store, holder="a"), make_orchestrator(store, holder="b")
    try:
        session_id = await new_session(stub, echo_loop())
        first = await a.start_run(RunRequest(session_id=session_id, query="hello"))
        await drain(a, first.id)
        store.crash_after_turn.armed = True
        second = await a.start_run(RunRequest(session_id=session_id, query="two"))
        await store.crash_after_turn.passed.wait()
        assert not (await store.get_run(second.id)).status.terminal  # the terminal commit is not written
        with pytest.raises(AbortedError):  # not a fresh start of the conversation meanwhile
            await b.start_run(RunRequest(session_id=session_id, query="three"))
        await a.stop(grace=0)  # dies: its lease is handed back, nothing more is written
        assert await takeover(b) == 1
        events = await drain(b, second.id)
        assert finished(events)["status"] == RunStatus.PAUSED
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        session = await store.get_session(session_id)
        assert [m["content"] for m in session.history] == ["hello", "turn 1: hello", "two", "turn 2: two"]
        assert session.conversation_turns == 2 and session.state["paused_run_id"] == second.id
        third = await b.start_run(RunRequest(session_id=session_id, query="three"))
        assert [e.data["content"] for e in await drain(b, third.id) if e.kind == "message_end"] == ["turn 3: three"]
    finally:
        await a.stop()
        await b.stop()
        await store.close()


async def test_resume_by_run_id_on_the_real_store(canvas_store):
    address, _ = canvas_store
    store = RacingStore(address)
    orch = make_orchestrator(store)
    try:
        paused = await orch.start_run(RunRequest(dsl=form_canvas(), query="trip"))
        assert finished(await drain(orch, paused.id))["status"] == RunStatus.PAUSED
        resumed = await orch.start_run(RunRequest(resume_run_id=paused.id, inputs={"instructions": "go"}))
        assert finished(await drain(orch, resumed.id))["outputs"]["content"] == "plan for trip / go"
        with pytest.raises(AbortedError) as caught:
            await orch.start_run(RunRequest(resume_run_id=paused.id, inputs={"instructions": "again"}))
        assert caught.value.metadata["run_id"] == resumed.id
        with pytest.raises(InvalidArgumentError) as bad:
            await orch.start_run(RunRequest(resume_run_id="not-an-id"))
        assert bad.value.violations[0].field == "resume_run_id"
    finally:
        await orch.stop()
        await store.close()


async def test_a_run_whose_session_was_deleted_meanwhile_still_ends(canvas_store):
    address, stub = canvas_store
    store = RacingStore(address)
    gate = asyncio.Event()
    orch = make_orchestrator(store, ScriptedLlm({"m": [[("gate", gate), ("text", "late")]]}))
    try:
        session_id = await new_session(stub, review_canvas())
        paused = await orch.start_run(RunRequest(session_id=session_id, query="trip"))
        await drain(orch, paused.id)
        resumed = await orch.start_run(RunRequest(session_id=session_id, inputs={"answer": "x"}))
        await stub.DeleteSession(pb.DeleteSessionRequest(id=session_id), metadata=AUTH)
        gate.set()
        events = await drain(orch, resumed.id)
        assert finished(events)["status"] == RunStatus.SUCCEEDED  # not stuck RUNNING, retried by every takeover
        assert (await store.get_run(resumed.id)).status == RunStatus.SUCCEEDED
    finally:
        await orch.stop()
        await store.close()
