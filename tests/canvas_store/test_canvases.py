"""Canvas CRUD over gRPC: create (idempotent, validate_only, from template), get, update, delete."""

from __future__ import annotations

import asyncio

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2

from services.common.status import from_rpc_error
from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, create_canvas, dsl_variant, expect_code, unique_title


def _mask(*paths: str) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


async def test_create_get_round_trip(store):
    created = await create_canvas(store.alice, tags=["a", "b"])
    assert len(created.id) == 32 and created.etag and created.head_revision_id
    assert created.name == f"tenants/acme/canvases/{created.id}"
    assert created.owner_id == "alice" and created.tenant_id == "acme"
    assert created.category == pb.CANVAS_CATEGORY_AGENT and created.permission == pb.CANVAS_PERMISSION_ME
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert from_struct(got.dsl) == MINIMAL_DSL
    assert got.etag == created.etag and list(got.tags) == ["a", "b"]
    assert got.create_time.ToMilliseconds() > 0


async def test_create_is_idempotent_by_request_id(store):
    canvas = pb.Canvas(title=unique_title())
    canvas.dsl.CopyFrom(to_struct(MINIMAL_DSL))
    request = pb.CreateCanvasRequest(canvas=canvas, request_id="0b6e1f4c-6f0e-4c55-9d6c-1f2a3b4c5d6e" + store.backend)
    racing = await asyncio.gather(*(store.alice.CreateCanvas(request) for _ in range(8)))
    later = await store.alice.CreateCanvas(request)
    assert {c.id for c in racing} == {later.id}


async def test_reused_request_id_with_another_payload_is_refused(store):
    request_id = f"reuse-{unique_title().split()[1]}"
    canvas = pb.Canvas(title=unique_title(), tags=["a"])
    canvas.dsl.CopyFrom(to_struct(MINIMAL_DSL))
    first = await store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas, request_id=request_id))
    changed_dsl = pb.Canvas(title=canvas.title, tags=["a"])
    changed_dsl.dsl.CopyFrom(to_struct(dsl_variant(7)))
    for other in (pb.Canvas(title=unique_title(), tags=["a"], dsl=canvas.dsl),  # another title
                  pb.Canvas(title=canvas.title, tags=["b"], dsl=canvas.dsl),  # other tags
                  pb.Canvas(title=canvas.title, tags=["a"], dsl=canvas.dsl, permission=pb.CANVAS_PERMISSION_TEAM),
                  changed_dsl):
        error = await expect_code(store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=other, request_id=request_id)),
                                  grpc.StatusCode.INVALID_ARGUMENT)
        domain = from_rpc_error(error)
        assert domain.reason == "REQUEST_ID_REUSED"
        assert [v.field for v in domain.violations] == ["request_id"]
    # The same payload still replays the first canvas, and the refused payloads wrote nothing.
    again = await store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas, request_id=request_id))
    assert (again.id, again.etag) == (first.id, first.etag)
    listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter='tags:"b"'))
    assert canvas.title not in [c.title for c in listed.canvases]
    # Request ids are per tenant: another tenant's identical id is a new request (ops, not acme).
    theirs = await store.service.CreateCanvas(pb.CreateCanvasRequest(canvas=changed_dsl, request_id=request_id))
    assert theirs.id != first.id


async def test_racing_replays_with_different_payloads_create_one_canvas(store):
    request_id = f"race-{unique_title().split()[1]}"

    def request(n: int) -> pb.CreateCanvasRequest:
        canvas = pb.Canvas(title=f"racer {n} {request_id}")
        canvas.dsl.CopyFrom(to_struct(MINIMAL_DSL))
        return pb.CreateCanvasRequest(canvas=canvas, request_id=request_id)

    results = await asyncio.gather(*(store.alice.CreateCanvas(request(n)) for n in range(6)), return_exceptions=True)
    created = [r for r in results if isinstance(r, pb.Canvas)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(created) == 1 and len(refused) == 5
    assert {e.code() for e in refused} == {grpc.StatusCode.INVALID_ARGUMENT}
    listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"{request_id}"'))
    assert [c.id for c in listed.canvases] == [created[0].id]


async def test_validate_only_writes_nothing(store):
    title = unique_title()
    canvas = pb.Canvas(title=title)
    canvas.dsl.CopyFrom(to_struct(MINIMAL_DSL))
    preview = await store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas, validate_only=True))
    assert preview.id == "" and preview.title == title
    listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"{title}"'))
    assert list(listed.canvases) == []


async def test_duplicate_title_is_already_exists(store):
    title = unique_title()
    await create_canvas(store.alice, title=title)
    taken = await expect_code(create_canvas(store.alice, title=title.upper()), grpc.StatusCode.ALREADY_EXISTS)
    assert taken.details().startswith("an agent canvas titled")  # was "a agent canvas"
    # Another owner may use the same title.
    await create_canvas(store.bob, title=title)


async def test_create_from_template(store):
    created = await store.alice.CreateCanvas(pb.CreateCanvasRequest(
        template_id="deep_research", canvas=pb.Canvas(title=unique_title("research"))))
    template = await store.alice.GetTemplate(pb.GetTemplateRequest(id="deep_research"))
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert from_struct(got.dsl) == from_struct(template.dsl)
    pipeline = await store.alice.CreateCanvas(pb.CreateCanvasRequest(
        template_id="title_chunker", canvas=pb.Canvas(title=unique_title("chunker"))))
    assert pipeline.category == pb.CANVAS_CATEGORY_DATAFLOW
    await expect_code(store.alice.CreateCanvas(pb.CreateCanvasRequest(template_id="no_such_template")),
                      grpc.StatusCode.NOT_FOUND)


async def test_update_fields_with_mask(store):
    created = await create_canvas(store.alice)
    new_title = unique_title("renamed")
    updated = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=created.id, title=new_title, description="ignored"), update_mask=_mask("title")))
    assert updated.title == new_title and updated.description == ""
    assert updated.etag != created.etag
    assert updated.head_revision_id == created.head_revision_id  # no DSL change, no revision
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert got.title == new_title and got.etag == updated.etag


async def test_dsl_update_requires_etag_and_stale_etag_is_aborted(store):
    created = await create_canvas(store.alice)
    canvas = pb.Canvas(id=created.id)
    canvas.dsl.CopyFrom(to_struct(dsl_variant(1)))
    error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=canvas, update_mask=_mask("dsl"))),
                              grpc.StatusCode.INVALID_ARGUMENT)
    assert "canvas.etag" in error.details()
    canvas.etag = created.etag
    updated = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=canvas, update_mask=_mask("dsl")))
    assert updated.head_revision_id != created.head_revision_id
    assert from_struct(updated.dsl) == dsl_variant(1)
    canvas.dsl.CopyFrom(to_struct(dsl_variant(2)))  # still carries the old etag
    await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=canvas, update_mask=_mask("dsl"))),
                      grpc.StatusCode.ABORTED)
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert from_struct(got.dsl) == dsl_variant(1)


async def test_twenty_concurrent_updates_one_wins(store):
    created = await create_canvas(store.alice)

    def request(n: int) -> pb.UpdateCanvasRequest:
        canvas = pb.Canvas(id=created.id, etag=created.etag, title=f"racer {n} {created.id[:6]}")
        canvas.dsl.CopyFrom(to_struct(dsl_variant(100 + n)))
        return pb.UpdateCanvasRequest(canvas=canvas, update_mask=_mask("title", "dsl"))

    results = await asyncio.gather(*(store.alice.UpdateCanvas(request(n)) for n in range(20)), return_exceptions=True)
    winners = [r for r in results if isinstance(r, pb.Canvas)]
    losers = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(winners) == 1 and len(losers) == 19
    assert all(loser.code() == grpc.StatusCode.ABORTED for loser in losers)
    winner = winners[0]
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    # No lost update: the stored canvas is exactly the winner's (title, DSL, etag and head revision).
    assert got.title == winner.title and got.etag == winner.etag
    assert from_struct(got.dsl) == from_struct(winner.dsl)
    revisions = await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=created.id))
    assert [r.id for r in revisions.revisions] == [winner.head_revision_id, created.head_revision_id]


async def test_update_mask_rejects_unknown_and_output_only_paths(store):
    created = await create_canvas(store.alice)
    for path in ("owner_id", "create_time", "name", "bogus"):
        error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=pb.Canvas(id=created.id, title="x"), update_mask=_mask(path))), grpc.StatusCode.INVALID_ARGUMENT)
        assert f"update_mask.{path}" in error.details()
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert got.etag == created.etag


async def test_update_validate_only_writes_nothing(store):
    created = await create_canvas(store.alice)
    preview = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=created.id, description="draft"), update_mask=_mask("description"), validate_only=True))
    assert preview.description == "draft"
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert got.description == "" and got.etag == created.etag


async def test_delete_checks_the_etag_and_is_soft(store):
    created = await create_canvas(store.alice)
    await expect_code(store.alice.DeleteCanvas(pb.DeleteCanvasRequest(id=created.id, etag="stale")),
                      grpc.StatusCode.ABORTED)
    reply = await store.alice.DeleteCanvas(pb.DeleteCanvasRequest(id=created.id, etag=created.etag))
    assert reply.canvas.id == created.id and reply.canvas.HasField("delete_time")
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))  # AIP-164: still readable
    assert got.etag == reply.canvas.etag != created.etag
    # The cascade to revisions and sessions happens when the purge removes it (tests/canvas_store/test_soft_delete.py).


async def test_concurrent_member_updates_without_etag_all_land(store):
    """A member's updates need a membership lookup inside the locked transaction; 20 at once neither deadlock
    nor lose an update: without an etag each one applies on top of the previous."""
    created = await create_canvas(store.alice, permission=pb.CANVAS_PERMISSION_TEAM)
    results = await asyncio.gather(*(store.bob.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=created.id, tags=[f"t{n}"]), update_mask=_mask("tags"))) for n in range(20)))
    assert len({r.etag for r in results}) == 20
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    last = next(r for r in results if r.etag == got.etag)
    assert list(got.tags) == list(last.tags) and len(got.tags) == 1
