"""Revisions: dedup of unchanged DSLs, publish with aliases, rollback as a new head, retention."""

from __future__ import annotations

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2

from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, dsl_variant, expect_code


async def _save(store, canvas: pb.Canvas, dsl: dict) -> pb.Canvas:
    change = pb.Canvas(id=canvas.id, etag=canvas.etag)
    change.dsl.CopyFrom(to_struct(dsl))
    return await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=change, update_mask=field_mask_pb2.FieldMask(paths=["dsl"])))


async def _revision_ids(store, canvas_id: str) -> list[str]:
    response = await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=canvas_id, page_size=100))
    return [r.id for r in response.revisions]


async def test_unchanged_dsl_makes_no_revision(store):
    canvas = await create_canvas(store.alice)
    same = await _save(store, canvas, MINIMAL_DSL)
    assert same.head_revision_id == canvas.head_revision_id
    assert await _revision_ids(store, canvas.id) == [canvas.head_revision_id]


async def test_a_no_op_update_keeps_the_head_and_the_etag(store):
    created = await create_canvas(store.alice)
    canvas = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=created.id, etag=created.etag, description="same"),
        update_mask=field_mask_pb2.FieldMask(paths=["description"])))
    same = await _save(store, canvas, MINIMAL_DSL)
    assert (same.head_revision_id, same.etag) == (canvas.head_revision_id, canvas.etag)  # the etag changed before
    assert same.update_time == canvas.update_time
    for path, value in (("description", "same"), ("title", canvas.title)):  # the quick path and the regular one
        change = pb.Canvas(id=canvas.id, etag=canvas.etag, **{path: value})
        unchanged = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=change, update_mask=field_mask_pb2.FieldMask(paths=[path])))
        assert unchanged.etag == canvas.etag, path
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert got.etag == canvas.etag and got.head_revision_id == canvas.head_revision_id
    # A stale etag is still refused, change or not.
    stale = pb.Canvas(id=canvas.id, etag="0" * 32)
    stale.dsl.CopyFrom(to_struct(MINIMAL_DSL))
    await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=stale, update_mask=field_mask_pb2.FieldMask(paths=["dsl"]))), grpc.StatusCode.ABORTED)
    # A real change still gets a new etag.
    changed = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, etag=canvas.etag, description="other"),
        update_mask=field_mask_pb2.FieldMask(paths=["description"])))
    assert changed.etag != canvas.etag and changed.description == "other"


async def test_rollback_to_the_head_changes_nothing(store):
    canvas = await create_canvas(store.alice)
    rolled = await store.alice.RollbackCanvas(pb.RollbackCanvasRequest(
        canvas_id=canvas.id, revision_id=canvas.head_revision_id, etag=canvas.etag))
    assert rolled.id == canvas.head_revision_id
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert got.etag == canvas.etag and await _revision_ids(store, canvas.id) == [canvas.head_revision_id]
    # Back to r1's DSL by hand (r3), then a rollback to r1: the head already holds that DSL.
    r2 = await _save(store, got, dsl_variant(1))
    r3 = await _save(store, r2, MINIMAL_DSL)
    again = await store.alice.RollbackCanvas(pb.RollbackCanvasRequest(
        canvas_id=canvas.id, revision_id=canvas.head_revision_id, etag=r3.etag))
    assert again.id == r3.head_revision_id and again.content_hash == rolled.content_hash
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert got.etag == r3.etag and len(await _revision_ids(store, canvas.id)) == 3


async def test_an_older_dsl_set_again_is_a_new_head_revision_with_the_same_hash(store):
    """What canvas_store.proto says of content_hash: only the head's own DSL is not saved again; a rollback to
    r1, or an update back to r3's DSL, is a new revision (who set which DSL when) with that revision's hash."""
    canvas = await create_canvas(store.alice)
    r1 = canvas.head_revision_id
    await store.alice.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id))  # kept whatever the retention
    canvas = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    current = await _save(store, canvas, dsl_variant(2))
    current = await _save(store, current, dsl_variant(3))
    r3 = current.head_revision_id
    rolled = await store.alice.RollbackCanvas(pb.RollbackCanvasRequest(canvas_id=canvas.id, revision_id=r1,
                                                                       etag=current.etag))
    current = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    back = await _save(store, current, dsl_variant(3))
    listed = {r.id: r for r in (await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=canvas.id))).revisions}
    assert rolled.id not in (r1, r3) and back.head_revision_id not in (r1, r3, rolled.id)
    assert listed[rolled.id].content_hash == listed[r1].content_hash
    assert listed[back.head_revision_id].content_hash == listed[r3].content_hash
    assert listed[back.head_revision_id].author_id == "alice" and listed[rolled.id].description == f"rollback of {r1}"
    assert list(listed) == [back.head_revision_id, rolled.id, r3, r1]  # newest first (r2 fell to retention)


async def test_revisions_are_immutable_snapshots_with_hashes(store):
    canvas = await create_canvas(store.alice)
    second = await _save(store, canvas, dsl_variant(1))
    first_rev = await store.alice.GetRevision(pb.GetRevisionRequest(canvas_id=canvas.id,
                                                                    revision_id=canvas.head_revision_id))
    latest = await store.alice.GetRevision(pb.GetRevisionRequest(canvas_id=canvas.id, revision_id="latest"))
    assert from_struct(first_rev.dsl) == MINIMAL_DSL and from_struct(latest.dsl) == dsl_variant(1)
    assert latest.id == second.head_revision_id and list(latest.alternate_ids) == ["latest"]
    assert first_rev.content_hash != latest.content_hash and len(latest.content_hash) == 64
    assert latest.author_id == "alice"


async def test_publish_and_published_alias(store):
    canvas = await create_canvas(store.alice)
    await expect_code(store.alice.GetRevision(pb.GetRevisionRequest(canvas_id=canvas.id, revision_id="published")),
                      grpc.StatusCode.FAILED_PRECONDITION)
    published = await store.alice.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id))
    assert published.id == canvas.head_revision_id and published.released
    assert sorted(published.alternate_ids) == ["latest", "published"]
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert got.published_revision_id == published.id and got.release
    newer = await _save(store, got, dsl_variant(7))
    alias = await store.alice.GetRevision(pb.GetRevisionRequest(canvas_id=canvas.id, revision_id="published"))
    assert alias.id == published.id and list(alias.alternate_ids) == ["published"]
    await expect_code(store.alice.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id, etag=got.etag)),
                      grpc.StatusCode.ABORTED)
    again = await store.alice.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id, etag=newer.etag))
    assert again.id == newer.head_revision_id


async def test_rollback_creates_a_new_head(store):
    canvas = await create_canvas(store.alice)
    second = await _save(store, canvas, dsl_variant(1))
    await expect_code(store.alice.RollbackCanvas(pb.RollbackCanvasRequest(
        canvas_id=canvas.id, revision_id=canvas.head_revision_id)), grpc.StatusCode.INVALID_ARGUMENT)
    await expect_code(store.alice.RollbackCanvas(pb.RollbackCanvasRequest(
        canvas_id=canvas.id, revision_id=canvas.head_revision_id, etag=canvas.etag)), grpc.StatusCode.ABORTED)
    rolled = await store.alice.RollbackCanvas(pb.RollbackCanvasRequest(
        canvas_id=canvas.id, revision_id=canvas.head_revision_id, etag=second.etag))
    assert rolled.id not in (canvas.head_revision_id, second.head_revision_id)
    assert rolled.description == f"rollback of {canvas.head_revision_id}"
    assert from_struct(rolled.dsl) == MINIMAL_DSL and "latest" in rolled.alternate_ids
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    assert got.head_revision_id == rolled.id and from_struct(got.dsl) == MINIMAL_DSL
    assert await _revision_ids(store, canvas.id) == [rolled.id, second.head_revision_id, canvas.head_revision_id]


async def test_retention_keeps_released_pinned_and_last_drafts(store):
    # The test store keeps 3 drafts (store.keep_draft_revisions).
    canvas = await create_canvas(store.alice)
    first_rev = canvas.head_revision_id
    released = await store.alice.PublishCanvas(pb.PublishCanvasRequest(canvas_id=canvas.id))
    current = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))
    current = await _save(store, current, dsl_variant(1))
    pinned = current.head_revision_id
    await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id, revision_id=pinned))
    heads = []
    for n in range(2, 8):
        current = await _save(store, current, dsl_variant(n))
        heads.append(current.head_revision_id)
    kept = await _revision_ids(store, canvas.id)
    assert kept == heads[-3:][::-1] + [pinned, first_rev]
    assert released.id == first_rev
    # Paging over revisions.
    page = await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=canvas.id, page_size=2))
    rest = await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=canvas.id, page_size=10,
                                                                   page_token=page.next_page_token))
    assert [r.id for r in page.revisions] + [r.id for r in rest.revisions] == kept and rest.next_page_token == ""
    await expect_code(store.alice.GetRevision(pb.GetRevisionRequest(canvas_id=canvas.id, revision_id=heads[0])),
                      grpc.StatusCode.NOT_FOUND)
