"""Sessions: pinned revisions, bounded history, etag-fenced turns, listing and deletion."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
import sqlalchemy as sa
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2, struct_pb2

from services.canvas_store.adapters.sql.models import canvases, revisions
from services.canvas_store.core.ids import new_etag, new_id
from services.canvas_store.core.types import Session
from services.common.errors import NotFoundError
from services.common.structs import from_struct, to_struct
from services.common.status import from_rpc_error
from tests.canvas_store.conftest import create_canvas, dsl_variant, expect_code


def _turn(n: int) -> list:
    return [to_struct({"role": "user", "content": f"q{n}"}), to_struct({"role": "assistant", "content": f"a{n}"})]


async def test_session_pins_published_else_head(store):
    canvas = await create_canvas(store.alice)
    head_session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id, user_id="end-user-1"))
    assert head_session.revision_id == canvas.head_revision_id and head_session.user_id == "end-user-1"
    assert head_session.name == f"tenants/acme/canvases/{canvas.id}/sessions/{head_session.id}"
    await expect_code(store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id, revision_id="published")),
                      grpc.StatusCode.FAILED_PRECONDITION)  # NOT_PUBLISHED, as GetRevision("published")
    published = await store.alice.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id))
    pinned = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    assert pinned.revision_id == published.id
    await expect_code(store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id, revision_id="f" * 32)),
                      grpc.StatusCode.NOT_FOUND)


async def _draft_behind_head(store) -> tuple[pb.Canvas, str]:
    """A canvas whose first revision is an older draft, no longer its head."""
    canvas = await create_canvas(store.alice)
    change = pb.Canvas(id=canvas.id, etag=canvas.etag)
    change.dsl.CopyFrom(to_struct(dsl_variant(1)))
    await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=change, update_mask=field_mask_pb2.FieldMask(paths=["dsl"])))
    return canvas, canvas.head_revision_id


def _session_on(canvas: pb.Canvas, revision_id: str) -> Session:
    return Session(id=new_id(), tenant_id=canvas.tenant_id, canvas_id=canvas.id, revision_id=revision_id,
                   user_id="", creator_id="alice")


async def test_session_is_not_pinned_to_a_revision_pruned_after_the_check(store):
    # CreateSession checks the revision, then inserts: retention may remove an old draft in between.
    canvas, old = await _draft_behind_head(store)
    with store.app.db.write() as conn:
        conn.execute(sa.delete(revisions).where(revisions.c.id == old))
    with pytest.raises(NotFoundError, match="retention"):
        await asyncio.to_thread(store.app.session_repo.insert, _session_on(canvas, old))
    listed = await store.alice.ListSessions(pb.ListSessionsRequest(canvas_id=canvas.id))
    assert list(listed.sessions) == []


def _waiting_for_a_lock(db) -> bool:
    query = ("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'" if db.backend == "postgresql"
             else "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'")
    with db.read() as conn:
        return conn.execute(sa.text(query)).scalar() > 0


async def test_session_insert_waits_for_a_prune_in_flight(store):
    # A prune holds the canvas row until it commits; a session insert meanwhile must wait for it and then
    # see that its revision is gone, not pin a revision that no longer exists.
    canvas, old = await _draft_behind_head(store)
    db = store.app.db
    pruned, may_commit = threading.Event(), threading.Event()

    def prune() -> None:  # what an update with retention does: change the canvas row, delete old drafts
        with db.write() as conn:
            conn.execute(sa.update(canvases).where(canvases.c.id == canvas.id).values(etag=new_etag()))
            conn.execute(sa.delete(revisions).where(revisions.c.id == old))
            pruned.set()
            may_commit.wait(60)

    pruner = asyncio.ensure_future(asyncio.to_thread(prune))
    assert await asyncio.to_thread(pruned.wait, 60)
    insert = asyncio.ensure_future(asyncio.to_thread(store.app.session_repo.insert, _session_on(canvas, old)))
    try:
        if db.backend != "sqlite":  # SQLite's writers take one in-process lock: the insert cannot overtake
            deadline = time.monotonic() + 60
            while not await asyncio.to_thread(_waiting_for_a_lock, db):
                assert time.monotonic() < deadline and not insert.done(), "the insert did not wait for the prune"
                await asyncio.sleep(0.25)  # InnoDB refreshes innodb_trx only when it was not read for 0.1 s
    finally:
        may_commit.set()
        await pruner
    with pytest.raises(NotFoundError, match="retention"):
        await insert


async def test_history_is_bounded_and_turns_counted(store):
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    etag = session.etag
    for n in range(5):
        session = await store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
            id=session.id, messages=_turn(n), etag=etag, state=to_struct({"turn": n})))
        etag = session.etag
    # store.session_history_max is 6 in the test store: the newest three turns remain.
    assert session.conversation_turns == 5
    assert [from_struct(m)["content"] for m in session.history] == ["q2", "a2", "q3", "a3", "q4", "a4"]
    got = await store.alice.GetSession(pb.GetSessionRequest(id=session.id))
    assert from_struct(got.state) == {"turn": 4} and len(got.history) == 6 and got.etag == etag


async def test_history_is_bounded_in_bytes_but_keeps_the_turn_being_appended(store):
    # store.session_history_max_bytes is 64 KiB in the test store; each message here is ~20 KB.
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))

    def big(role: str, n: int, size: int = 20_000) -> struct_pb2.Struct:
        return to_struct({"role": role, "content": f"{n}:" + "x" * size})

    for n in range(3):
        session = await store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
            id=session.id, messages=[big("user", n), big("assistant", n)]))
    # Six messages fit the count bound, but only the newest three fit 64 KiB.
    kept = [from_struct(m)["content"].split(":")[0] for m in session.history]
    assert kept == ["1", "2", "2"] and [from_struct(m)["role"] for m in session.history][1:] == ["user", "assistant"]
    # A turn larger than the bound on its own keeps all of its messages and drops everything older.
    session = await store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=[big("user", 3, 40_000), big("assistant", 3, 40_000)]))
    got = await store.alice.GetSession(pb.GetSessionRequest(id=session.id))
    assert [from_struct(m)["content"][:2] for m in got.history] == ["3:", "3:"] and got.conversation_turns == 4


async def test_a_turn_larger_than_its_limit_is_refused_naming_the_field(store):
    # store.session_turn_max_bytes is 96 KiB in the test store (1 MiB by default); a 5 MB message was accepted.
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))

    def message(size: int) -> struct_pb2.Struct:
        return to_struct({"role": "user", "content": "x" * size})

    for messages, field in (([message(10), message(100 * 1024)], "messages[1]"),
                            ([message(60 * 1024), message(60 * 1024)], "messages")):
        error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
            id=session.id, messages=messages)), grpc.StatusCode.INVALID_ARGUMENT)
        assert [v.field for v in from_rpc_error(error).violations] == [field], error.details()
        assert "session_turn_max_bytes" in error.details()
    assert (await store.alice.GetSession(pb.GetSessionRequest(id=session.id))).conversation_turns == 0
    ok = await store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(id=session.id, messages=[message(90 * 1024)]))
    assert ok.conversation_turns == 1


def test_the_turn_limit_defaults_to_one_mebibyte_and_is_configurable():
    from services.canvas_store.settings import StoreSettings
    from services.common.settings import Config

    assert StoreSettings.from_config(Config.load(env={})).session_turn_max_bytes == 1 << 20
    config = Config.load(env={}).with_overrides({"store": {"session_turn_max_bytes": 4096}})
    assert StoreSettings.from_config(config).session_turn_max_bytes == 4096


async def test_concurrent_turns_one_wins(store):
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    results = await asyncio.gather(*(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=_turn(n), etag=session.etag)) for n in range(5)), return_exceptions=True)
    winners = [r for r in results if isinstance(r, pb.Session)]
    assert len(winners) == 1
    assert all(r.code() == grpc.StatusCode.ABORTED for r in results if isinstance(r, grpc.aio.AioRpcError))
    got = await store.alice.GetSession(pb.GetSessionRequest(id=session.id))
    assert got.conversation_turns == 1 and len(got.history) == 2


async def test_turn_messages_need_a_role(store):
    canvas = await create_canvas(store.alice)
    session = await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    for nameless in ({"content": "x"}, {"role": "", "content": "x"}, {"role": "  ", "content": "x"}, {"role": 1}):
        error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
            id=session.id, messages=[to_struct({"role": "user"}), to_struct(nameless)])), grpc.StatusCode.INVALID_ARGUMENT)
        assert "messages[1].role" in error.details()
    assert (await store.alice.GetSession(pb.GetSessionRequest(id=session.id))).conversation_turns == 0


async def test_list_by_canvas_and_by_user_then_delete(store):
    canvas = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    user = f"end-{canvas.id[:8]}"
    made = [await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id, user_id=user))
            for _ in range(3)]
    bobs = await store.bob.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    first = await store.alice.ListSessions(pb.ListSessionsRequest(canvas_id=canvas.id, page_size=2))
    second = await store.alice.ListSessions(pb.ListSessionsRequest(canvas_id=canvas.id, page_size=2,
                                                                   page_token=first.next_page_token))
    listed = [s.id for s in first.sessions] + [s.id for s in second.sessions]
    assert sorted(listed) == sorted([s.id for s in made] + [bobs.id]) and second.next_page_token == ""
    by_user = await store.alice.ListSessions(pb.ListSessionsRequest(user_id=user))
    assert sorted(s.id for s in by_user.sessions) == sorted(s.id for s in made)
    # bob (member) may not delete alice's session, but may delete his own; alice (owner) may delete any.
    await expect_code(store.bob.DeleteSession(pb.DeleteSessionRequest(id=made[0].id)), grpc.StatusCode.PERMISSION_DENIED)
    await store.bob.DeleteSession(pb.DeleteSessionRequest(id=bobs.id))
    await store.alice.DeleteSession(pb.DeleteSessionRequest(id=made[0].id))
    await expect_code(store.alice.GetSession(pb.GetSessionRequest(id=made[0].id)), grpc.StatusCode.NOT_FOUND)
