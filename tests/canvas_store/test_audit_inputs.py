"""Inputs found by an audit to end in something other than a clean answer, and the semantics chosen for them.

- A title whose lower-case form is longer than the title (U+0130) overflowed `title_key` on PostgreSQL and
  MariaDB: INTERNAL. Control characters and invisible-only titles were accepted.
- JSON columns were written with every non-ASCII character escaped: an 8 MiB DSL of CJK text was a ~17 MiB
  statement, over MariaDB's default max_allowed_packet (UNAVAILABLE).
- An empty update_mask path was reported as the field `update_mask.`.
"""

from __future__ import annotations

import uuid

import grpc
import pytest
import sqlalchemy as sa
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2
from sqlalchemy import exc

from services.canvas_store.adapters.sql.engine import json_text, translate_db_errors
from services.canvas_store.core.dsl import canonical_json
from services.canvas_store.core.page_tokens import PageTokenCodec
from services.common.errors import ResourceExhaustedError
from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import MINIMAL_DSL, STORE_LIMITS, create_canvas, expect_code, unique_title

INVALID = grpc.StatusCode.INVALID_ARGUMENT
DOTTED_I = "\u0130"  # "İ".lower() is two characters


def _new(title: str, **kwargs) -> pb.CreateCanvasRequest:
    canvas = pb.Canvas(title=title, **kwargs)
    canvas.dsl.CopyFrom(to_struct(MINIMAL_DSL))
    return pb.CreateCanvasRequest(canvas=canvas)


def _mask(*paths: str) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


async def test_titles_whose_lower_case_is_longer_are_stored_and_found(store):
    tag = uuid.uuid4().hex[:8]
    title = DOTTED_I * (255 - len(tag) - 1) + " " + tag
    created = await store.alice.CreateCanvas(_new(title))
    assert created.title == title
    found = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"{DOTTED_I * 3}"'))
    assert created.id in [c.id for c in found.canvases]
    found = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"{DOTTED_I} {tag}"'))
    assert [c.id for c in found.canvases] == [created.id]
    found = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"iii {tag}"'))
    assert [c.id for c in found.canvases] == [created.id]
    # Case-insensitively the same title for the same owner: taken.
    await expect_code(store.alice.CreateCanvas(_new(title.replace(DOTTED_I, "i"))), grpc.StatusCode.ALREADY_EXISTS)
    other = await create_canvas(store.alice)
    renamed = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=other.id, title=DOTTED_I * 200 + tag), update_mask=_mask("title")))
    assert renamed.title == DOTTED_I * 200 + tag


BAD_TITLES = [
    ("line feed", "two\nlines"),
    ("escape", "a\x1b[31mred"),
    ("delete", "a\x7fb"),
    ("c1 control", "a\x85b"),
    ("tab inside", "a\tb"),
    ("zero-width only", "\u200b\u200b"),
    ("bom only", "\ufeff"),
    ("ideographic space only", "\u3000"),
]


@pytest.mark.parametrize("label,title", BAD_TITLES, ids=[b[0] for b in BAD_TITLES])
async def test_bad_titles_are_invalid_and_write_nothing(store, label, title):
    marker = uuid.uuid4().hex
    error = await expect_code(store.alice.CreateCanvas(_new(title + (marker if "only" not in label else ""))), INVALID)
    assert "canvas.title" in error.details()
    listed = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f"title:{marker}"))
    assert list(listed.canvases) == []
    canvas = await create_canvas(store.alice)
    await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, title=title), update_mask=_mask("title"))), INVALID)
    assert (await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))).etag == canvas.etag


async def test_titles_are_trimmed_and_may_hold_any_visible_script(store):
    for title in (f"  padded {uuid.uuid4().hex}\t", f"\u4e2d\u6587 {uuid.uuid4().hex}", f"\U0001F600 {uuid.uuid4().hex}"):
        created = await store.alice.CreateCanvas(_new(title))
        assert created.title == title.strip()


async def test_tags_with_control_characters_name_the_tag(store):
    error = await expect_code(store.alice.CreateCanvas(_new(unique_title(), tags=["ok", "bad\ntag"])), INVALID)
    assert "canvas.tags[1]" in error.details()


async def test_description_and_avatar_limits_count_utf8_bytes(store):
    canvas = await create_canvas(store.alice)
    # 30,000 CJK characters are 90,000 bytes: over the 64 KiB description limit though under 64 Ki characters.
    error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, description="\u4e2d" * 30_000, etag=canvas.etag),
        update_mask=_mask("description"))), INVALID)
    assert "canvas.description" in error.details()
    ok = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, description="\u4e2d" * 21_000, etag=canvas.etag),
        update_mask=_mask("description")))
    assert len(ok.description) == 21_000


async def test_update_mask_edge_cases(store):
    canvas = await create_canvas(store.alice)
    cases = [([""], "update_mask.paths[0]"), (["title", " "], "update_mask.paths[1]"), (["*", "title"], "update_mask"),
             (["*", "*"], "update_mask"), (["title.x"], "update_mask.title.x"), (["owner_id"], "update_mask.owner_id"),
             (["tenant_id"], "update_mask.tenant_id"), (["create_time"], "update_mask.create_time"),
             (["etag"], "update_mask.etag"), (["id"], "update_mask.id"), (["Title"], "update_mask.Title"),
             (["dsl.components"], "update_mask.dsl.components"), (["category"], "update_mask.category")]
    for paths, field in cases:
        error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
            canvas=pb.Canvas(id=canvas.id, title=unique_title(), etag=canvas.etag), update_mask=_mask(*paths))), INVALID)
        assert field in error.details(), (paths, error.details())
    # No mask and nothing set: nothing to change.
    error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, etag=canvas.etag))), INVALID)
    assert "update_mask" in error.details()
    # `*` replaces every updatable field, so it needs the DSL (and its etag) too.
    error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, title=unique_title(), etag=canvas.etag), update_mask=_mask("*"))), INVALID)
    assert "canvas.dsl" in error.details()
    assert (await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas.id))).etag == canvas.etag
    # A repeated path is the same mask (FieldMask canonical form).
    title = unique_title()
    updated = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas.id, title=title, etag=canvas.etag), update_mask=_mask("title", "title")))
    assert updated.title == title


def _dsl_of_size(size: int, char: str) -> dict:
    base = len(canonical_json({**MINIMAL_DSL, "blob": ""}))
    count, rest = divmod(size - base, len(canonical_json(char)) - 2)  # as the character is escaped in JSON
    dsl = {**MINIMAL_DSL, "blob": char * count + "y" * rest}
    assert len(canonical_json(dsl)) == size
    return dsl


@pytest.mark.parametrize("char", ["x", "\u4e2d", "\U0001F600", '"', "\\"], ids=["ascii", "cjk", "emoji", "quote", "backslash"])
async def test_dsl_size_limit_is_exact_in_canonical_utf8(store, char):
    limit = STORE_LIMITS["max_dsl_bytes"]
    at_limit = _dsl_of_size(limit, char)
    canvas = pb.Canvas(title=unique_title())
    canvas.dsl.CopyFrom(to_struct(at_limit))
    created = await store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas))
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert from_struct(got.dsl) == at_limit
    over = pb.Canvas(id=created.id, etag=created.etag)
    over.dsl.CopyFrom(to_struct(_dsl_of_size(limit + 1, "x")))
    error = await expect_code(store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=over, update_mask=_mask("dsl"))),
                              INVALID)
    assert "canvas.dsl" in error.details()


def _raw_dsl_text(store, canvas_id: str) -> str:
    column = {"postgresql": "dsl::text", "mysql": "CAST(dsl AS CHAR)"}.get(store.app.db.backend, "dsl")
    with store.app.db.read() as conn:
        return conn.execute(sa.text(f"SELECT {column} FROM canvases WHERE id = :id"), {"id": canvas_id}).scalar_one()


async def test_json_columns_hold_compact_utf8(store):
    dsl = {**MINIMAL_DSL, "prompt": "\u4e2d\u6587 \U0001F600"}
    canvas = await create_canvas(store.alice, dsl=dsl)
    text = _raw_dsl_text(store, canvas.id)
    assert "\u4e2d\u6587 \U0001F600" in text and "\\u" not in text
    assert ", " not in text and ": " not in text
    assert json_text({"a": [1, "\u00e9"]}) == '{"a":[1,"\u00e9"]}'


async def test_key_order_does_not_make_a_revision(store):
    canvas = await create_canvas(store.alice)
    reordered = {key: MINIMAL_DSL[key] for key in reversed(list(MINIMAL_DSL))}
    reordered["components"] = {k: v for k, v in reversed(list(MINIMAL_DSL["components"].items()))}
    change = pb.Canvas(id=canvas.id, etag=canvas.etag)
    change.dsl.CopyFrom(to_struct(reordered))
    same = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(canvas=change, update_mask=_mask("dsl")))
    assert same.head_revision_id == canvas.head_revision_id
    revisions = await store.alice.ListRevisions(pb.ListRevisionsRequest(canvas_id=canvas.id))
    assert [r.id for r in revisions.revisions] == [canvas.head_revision_id]


async def test_page_tokens_of_another_method_or_before_the_walk_bound(store):
    tag = uuid.uuid4().hex[:10]
    for _ in range(3):
        await create_canvas(store.alice, tags=[tag])
    canvas = await create_canvas(store.alice)
    for _ in range(2):
        await store.alice.CreateSession(pb.CreateSessionRequest(canvas_id=canvas.id))
    sessions = await store.alice.ListSessions(pb.ListSessionsRequest(canvas_id=canvas.id, page_size=1))
    assert sessions.next_page_token
    error = await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(page_token=sessions.next_page_token)),
                              INVALID)
    assert "page_token" in error.details()
    # A token written before the walk bound existed ([key, id]) still pages.
    first = await store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=1, filter=f"tags:{tag}", order_by="title"))
    codec: PageTokenCodec = store.app.canvases._tokens
    old = codec.decode(first.next_page_token, _binding_of(first.next_page_token))
    legacy = codec.encode(_binding_of(first.next_page_token), old[:2])
    rest = await store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=5, filter=f"tags:{tag}", order_by="title",
                                                                 page_token=legacy))
    assert len(rest.canvases) == 2
    # A signed token whose position has the wrong type for the order is refused, not a database error.
    bad = codec.encode(_binding_of(first.next_page_token), [123, "x" * 32])
    await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=1, filter=f"tags:{tag}",
                                                                      order_by="title", page_token=bad)), INVALID)


def _binding_of(token: str) -> str:
    import base64
    import json

    body = token.partition(".")[0]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["b"]


def test_an_oversized_statement_is_resource_exhausted_not_unavailable():
    error = exc.OperationalError("INSERT ...", {}, Exception(1153, "Got a packet bigger than 'max_allowed_packet' bytes"))
    with pytest.raises(ResourceExhaustedError):
        with translate_db_errors():
            raise error


async def test_unknown_template_is_not_found(store):
    for template_id in ("nope", "x" * 65, "../deep_research", "Deep_Research"):
        await expect_code(store.alice.CreateCanvas(pb.CreateCanvasRequest(
            template_id=template_id, canvas=pb.Canvas(title=unique_title()))), grpc.StatusCode.NOT_FOUND)
