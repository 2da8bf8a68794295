"""The single-statement paths (GetCanvas point read, description/avatar UpdateCanvas) decide exactly as the
regular path does: same policy, same etag rule, same errors, and nothing written on a denial."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import sqlalchemy as sa
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2

from services.common.structs import from_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, expect_code

DESCRIPTION = field_mask_pb2.FieldMask(paths=["description"])


def _describe(canvas_id: str, etag: str, text: str) -> pb.UpdateCanvasRequest:
    return pb.UpdateCanvasRequest(canvas=pb.Canvas(id=canvas_id, etag=etag, description=text), update_mask=DESCRIPTION)


async def test_quick_update_returns_the_whole_resource(store):
    canvas = await create_canvas(store.alice, tags=["x"])
    read = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert from_struct(read.dsl) == MINIMAL_DSL and read.tags == ["x"] and read.release is False
    updated = await store.alice.UpdateCanvas(_describe(canvas.id, read.etag, "first"))
    assert updated.description == "first" and updated.etag != read.etag
    assert from_struct(updated.dsl) == MINIMAL_DSL  # AIP-134: the full resource, DSL included
    assert (updated.title, list(updated.tags), updated.head_revision_id) == (canvas.title, ["x"], canvas.head_revision_id)
    assert updated.update_time.ToMilliseconds() >= read.update_time.ToMilliseconds()
    # Chained on the returned etag (the remembered-facts path), then the etag it replaced is stale.
    again = await store.alice.UpdateCanvas(_describe(canvas.id, updated.etag, "second"))
    await expect_code(store.alice.UpdateCanvas(_describe(canvas.id, updated.etag, "stale")), grpc.StatusCode.ABORTED)
    final = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert (final.description, final.etag) == ("second", again.etag)


async def test_quick_update_without_remembered_facts_decides_on_the_row_at_that_etag(store):
    canvas = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    # bob (a member) never read it through this store's cache for this etag: the check runs on the row.
    updated = await store.bob.UpdateCanvas(_describe(canvas.id, canvas.etag, "by bob"))
    assert updated.description == "by bob"
    # Another tenant holding the current etag is refused with NOT_FOUND, and the update is rolled back.
    await expect_code(store.mallory.UpdateCanvas(_describe(canvas.id, updated.etag, "pwned")), grpc.StatusCode.NOT_FOUND)
    # carol is in the token list but not a member: a TEAM canvas is invisible to her.
    await expect_code(store.carol.UpdateCanvas(_describe(canvas.id, updated.etag, "pwned")), grpc.StatusCode.NOT_FOUND)
    final = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert (final.description, final.etag) == ("by bob", updated.etag)


async def test_permission_change_invalidates_what_a_member_was_allowed(store):
    canvas = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    seen = await store.bob.GetCanvas(pb.GetCanvasRequest(id=canvas.id))  # facts remembered for this etag
    private = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, etag=seen.etag, permission=pb.CANVAS_PERMISSION_ME),
        update_mask=field_mask_pb2.FieldMask(paths=["permission"])))
    # With the old etag: the canvas is now alice's alone, so bob learns nothing (NOT_FOUND, not ABORTED).
    await expect_code(store.bob.UpdateCanvas(_describe(canvas.id, seen.etag, "late")), grpc.StatusCode.NOT_FOUND)
    # Even with the current etag (leaked somehow), the check on the current row refuses him.
    await expect_code(store.bob.UpdateCanvas(_describe(canvas.id, private.etag, "late")), grpc.StatusCode.NOT_FOUND)
    final = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert (final.description, final.etag) == ("", private.etag)


async def test_quick_update_of_an_unknown_canvas_is_not_found(store):
    await expect_code(store.alice.UpdateCanvas(_describe("0" * 32, "feedfeedfeedfeed", "x")), grpc.StatusCode.NOT_FOUND)


async def test_point_read_decodes_every_column(store):
    canvas = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM, tags=["b", "a"])
    read = await store.bob.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert read.permission == pb.CANVAS_PERMISSION_TEAM and list(read.tags) == ["b", "a"]
    assert read.category == pb.CANVAS_CATEGORY_AGENT and read.release is False
    assert read.create_time == canvas.create_time and read.etag == canvas.etag
    assert read.name == f"tenants/acme/canvases/{canvas.id}"


def _drop_every_other_connection(store) -> int:
    """Make the database server end every connection of the store (what a restart or failover does)."""
    engine = sa.create_engine(store.url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            if store.backend == "postgresql":
                return len(conn.execute(sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")).all())
            ids = conn.execute(sa.text("SELECT id FROM information_schema.processlist "
                                       "WHERE db = DATABASE() AND id <> CONNECTION_ID()")).scalars().all()
            for pid in ids:
                conn.execute(sa.text(f"KILL {int(pid)}"))
            return len(ids)
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"], indirect=True)  # SQLite has no server to drop them
async def test_reads_survive_the_database_dropping_held_connections(store):
    canvas = await create_canvas(store.alice)
    # Warm every DB thread's held connection, then have the server end them all.
    for _ in range(3 * store.app.settings.db_pool_size):
        await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert _drop_every_other_connection(store) >= 1
    # Each read notices its dead connection, takes a fresh one and repeats: no error reaches the client.
    for _ in range(3 * store.app.settings.db_pool_size):
        assert (await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))).etag == canvas.etag
    # Writes are not repeated by the store (UNAVAILABLE, retried by the client channel's policy); at most
    # one attempt per dead connection fails, so a bounded number of tries lands the update exactly once.
    etag = canvas.etag
    for attempt in range(store.app.settings.db_pool_size + 2):
        try:
            etag = (await store.alice.UpdateCanvas(_describe(canvas.id, etag, "after failover"))).etag
            break
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    else:
        raise AssertionError("the update never landed")
    final = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert (final.description, final.etag) == ("after failover", etag)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_point_reads_and_quick_updates_run_on_the_event_loop(store):
    loop_connections = store.app.db.loop_connections
    assert loop_connections is not None
    canvas = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    sent = loop_connections.statements
    read = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))  # the owner: the point read alone
    assert loop_connections.statements == sent + 1
    await store.bob.GetCanvas(pb.GetCanvasRequest(id=canvas.id))  # a member: the point read and his role
    assert loop_connections.statements == sent + 3
    updated = await store.alice.UpdateCanvas(_describe(canvas.id, read.etag, "on the loop"))  # facts known
    assert loop_connections.statements == sent + 4
    assert updated.description == "on the loop"
    # A change the single statement cannot make starts on the loop, reaches the regular path and runs on the pool.
    titled = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, etag=updated.etag, title=canvas.title + " 2"),
        update_mask=field_mask_pb2.FieldMask(paths=["title"])))
    assert titled.title == canvas.title + " 2" and loop_connections.statements == sent + 4


@pytest.mark.parametrize("backend", ["sqlite", "mariadb"], indirect=True)
async def test_other_databases_have_no_loop_connections(store):
    assert store.app.db.loop_connections is None
    canvas = await create_canvas(store.alice)
    assert (await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))).id == canvas.id


async def _until(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_an_update_cancelled_by_its_deadline_is_cancelled_in_the_database(store):
    canvas = await create_canvas(store.alice)
    read = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    engine = sa.create_engine(store.url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as locker:
            locker.execute(sa.text("SELECT id FROM canvases WHERE id = :id FOR UPDATE"), {"id": canvas.id})
            await expect_code(store.alice.UpdateCanvas(_describe(canvas.id, read.etag, "too late"), timeout=0.5),
                              grpc.StatusCode.DEADLINE_EXCEEDED)
            waiting = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                              "AND wait_event_type = 'Lock'")
            # The store's UPDATE was queued behind the row lock; the cancelled call cancels it in the server.
            await _until(lambda: locker.execute(waiting).scalar() == 0, "the store's UPDATE stopped waiting")
            locker.rollback()
    finally:
        engine.dispose()
    final = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert (final.description, final.etag) == ("", read.etag)  # the cancelled write never landed
    # Its connection went back to the pool usable (or was replaced): more calls than the pool holds all land.
    etag = final.etag
    for n in range(store.app.settings.db_pool_size + 2):
        etag = (await store.alice.UpdateCanvas(_describe(canvas.id, etag, f"after {n}"))).etag
    assert (await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))).description == \
        f"after {store.app.settings.db_pool_size + 1}"
