"""Sessions: pinned revisions, bounded history, etag-fenced turns, listing and deletion."""

from __future__ import annotations

import asyncio

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import create_canvas, expect_code


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
    error = await expect_code(store.alice.AppendSessionTurn(pb.AppendSessionTurnRequest(
        id=session.id, messages=[to_struct({"content": "x"})])), grpc.StatusCode.INVALID_ARGUMENT)
    assert "messages[0].role" in error.details()


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
