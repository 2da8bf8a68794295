"""ListCanvases: keyset paging with signed tokens, filters, ordering and visibility."""

from __future__ import annotations

import uuid

import grpc
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2

from tests.canvas_store.conftest import create_canvas, expect_code


async def _seed(store, count: int, tag: str, **kwargs) -> list[pb.Canvas]:
    return [await create_canvas(store.alice, title=f"page {i:02d} {tag}", tags=[tag], **kwargs) for i in range(count)]


async def _all_pages(client, request: pb.ListCanvasesRequest) -> list[list[pb.Canvas]]:
    pages = []
    while True:
        response = await client.ListCanvases(request)
        pages.append(list(response.canvases))
        if not response.next_page_token:
            return pages
        request.page_token = response.next_page_token


async def test_pages_cover_everything_once_in_order(store):
    tag = uuid.uuid4().hex[:12]
    created = await _seed(store, 7, tag)
    pages = await _all_pages(store.alice, pb.ListCanvasesRequest(page_size=3, filter=f'tags:"{tag}"'))
    assert [len(page) for page in pages] == [3, 3, 1]
    listed = [canvas for page in pages for canvas in page]
    assert sorted(c.id for c in listed) == sorted(c.id for c in created)
    keys = [(c.update_time.ToMilliseconds(), c.id) for c in listed]
    assert keys == sorted(keys, reverse=True)
    assert all(not c.HasField("dsl") for c in listed)


async def test_order_by_title_both_ways(store):
    tag = uuid.uuid4().hex[:12]
    await _seed(store, 5, tag)
    ascending = await _all_pages(store.alice, pb.ListCanvasesRequest(page_size=2, filter=f"tags:any({tag})", order_by="title"))
    titles = [c.title for page in ascending for c in page]
    assert titles == sorted(titles) and len(titles) == 5
    descending = await _all_pages(store.alice, pb.ListCanvasesRequest(page_size=2, filter=f"tags:any({tag})",
                                                                       order_by="title desc"))
    assert [c.title for page in descending for c in page] == titles[::-1]


async def test_page_token_is_tamper_proof_and_bound_to_the_request(store):
    tag = uuid.uuid4().hex[:12]
    await _seed(store, 3, tag)
    request = pb.ListCanvasesRequest(page_size=1, filter=f'tags:"{tag}"')
    token = (await store.alice.ListCanvases(request)).next_page_token
    assert token
    body, _, signature = token.partition(".")
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + signature
    for bad in (flipped, token[:-2], "garbage", "a.b.c", token + "x"):
        error = await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=1, filter=request.filter,
                                                                                  page_token=bad)),
                                  grpc.StatusCode.INVALID_ARGUMENT)
        assert "page_token" in error.details()
    # Same token with another filter, another order or another caller is rejected.
    for changed in (pb.ListCanvasesRequest(page_size=1, filter='tags:"other"', page_token=token),
                    pb.ListCanvasesRequest(page_size=1, filter=request.filter, order_by="title", page_token=token)):
        await expect_code(store.alice.ListCanvases(changed), grpc.StatusCode.INVALID_ARGUMENT)
    await expect_code(store.bob.ListCanvases(pb.ListCanvasesRequest(page_size=1, filter=request.filter, page_token=token)),
                      grpc.StatusCode.INVALID_ARGUMENT)
    # The untouched token still works.
    page = await store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=1, filter=request.filter, page_token=token))
    assert len(page.canvases) == 1


async def test_page_size_rules(store):
    await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=-1)), grpc.StatusCode.INVALID_ARGUMENT)
    tag = uuid.uuid4().hex[:12]
    await _seed(store, 2, tag)
    response = await store.alice.ListCanvases(pb.ListCanvasesRequest(page_size=100000, filter=f'tags:"{tag}"'))
    assert len(response.canvases) == 2 and response.next_page_token == ""


async def test_filters(store):
    tag, other = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
    plain = await create_canvas(store.alice, title=f"Alpha Report {tag}", tags=[tag])
    both = await create_canvas(store.alice, title=f"beta notes {tag}", tags=[tag, other],
                               permission=pb.CANVAS_PERMISSION_TEAM)
    bobs = await create_canvas(store.bob, title=f"gamma {tag}", tags=[other], permission=pb.CANVAS_PERMISSION_TEAM)

    async def ids(client, text: str) -> set[str]:
        return {c.id for page in await _all_pages(client, pb.ListCanvasesRequest(filter=text)) for c in page}

    assert await ids(store.alice, f'title:"alpha report" AND tags:"{tag}"') == {plain.id}
    # the store keeps one statement per shape of request: the same shape with other values finds others
    assert await ids(store.alice, f'tags:"{tag}"') == {plain.id, both.id}
    assert await ids(store.alice, f'tags:"{other}"') == {both.id, bobs.id}
    assert await ids(store.alice, f'tags:any("{tag}","{other}")') == {plain.id, both.id, bobs.id}
    assert await ids(store.alice, f'tags:all("{tag}","{other}")') == {both.id}
    assert await ids(store.alice, f'tags:"{tag}" and permission=TEAM') == {both.id}
    assert await ids(store.alice, f'tags:any("{tag}","{other}") AND owner="bob"') == {bobs.id}
    assert await ids(store.alice, f'tags:"{tag}" AND category=DATAFLOW') == set()
    assert await ids(store.alice, f'tags:"{tag}" AND category=AGENT') == {plain.id, both.id}
    for bad in ("title", "colour=red", "category=ROBOT", 'title:"unterminated', "permission=ME OR owner=x",
                "tags:any(a", 'owner=""'):
        await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(filter=bad)), grpc.StatusCode.INVALID_ARGUMENT)
    await expect_code(store.alice.ListCanvases(pb.ListCanvasesRequest(order_by="owner_id")),
                      grpc.StatusCode.INVALID_ARGUMENT)


async def test_tag_filters_match_regardless_of_case_as_tags_are_deduplicated(store):
    word = uuid.uuid4().hex[:8]
    upper = await create_canvas(store.alice, tags=[f"AI-{word}", f"ai-{word}", f"Ünï-{word}"])
    assert list(upper.tags) == [f"AI-{word}", f"Ünï-{word}"]  # one tag per case key, first spelling kept
    lower = await create_canvas(store.alice, tags=[f"ai-{word}"])

    async def ids(text: str) -> set[str]:
        return {c.id for c in (await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=text))).canvases}

    assert await ids(f'tags:"ai-{word}"') == await ids(f'tags:"Ai-{word}"') == {upper.id, lower.id}
    assert await ids(f'tags:all("AI-{word}","üNÏ-{word}")') == {upper.id}
    assert await ids(f'tags:any("x-{word}","ÜNÏ-{word}")') == {upper.id}
    retagged = await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=lower.id, etag=lower.etag, tags=[f"Ünï-{word}"]),
        update_mask=field_mask_pb2.FieldMask(paths=["tags"])))
    assert list(retagged.tags) == [f"Ünï-{word}"]
    assert await ids(f'tags:"ünï-{word}"') == {upper.id, lower.id}
    assert await ids(f'tags:"ai-{word}"') == {upper.id}


async def test_visibility_of_team_canvases(store):
    tag = uuid.uuid4().hex[:12]
    private = await create_canvas(store.alice, tags=[tag])
    team = await create_canvas(store.alice, tags=[tag], permission=pb.CANVAS_PERMISSION_TEAM)

    async def visible(client) -> set[str]:
        return {c.id for c in (await client.ListCanvases(pb.ListCanvasesRequest(filter=f'tags:"{tag}"'))).canvases}

    assert await visible(store.alice) == {private.id, team.id}
    assert await visible(store.bob) == {team.id}  # member
    assert await visible(store.carol) == set()  # same tenant, not a member
    assert await visible(store.mallory) == set()  # other tenant


def test_filter_grammar_parses_every_term():
    from services.canvas_store.core.filters import parse_filter, parse_order_by
    from services.canvas_store.core.types import Category, Permission

    parsed = parse_filter('title:"say \\"hi\\"" AND tags:any(a, "b c") and tags:all("x") AND tags:y '
                          'AND category=dataflow AND permission=TEAM AND owner="u@example.com"')
    assert parsed.title == 'say "hi"'
    assert parsed.tags_any == (("a", "b c"), ("y",)) and parsed.tags_all == ("x",)
    assert parsed.category is Category.DATAFLOW and parsed.permission is Permission.TEAM
    assert parsed.owner == "u@example.com"
    assert parse_order_by("").fingerprint() == "update_time desc"
    assert parse_order_by("title").fingerprint() == "title asc"
    assert parse_order_by("update_time DESC").fingerprint() == "update_time desc"


def test_page_token_codec_rejects_foreign_secrets_and_expiry():
    import pytest as _pytest

    from services.canvas_store.core.page_tokens import PageTokenCodec
    from services.common.errors import InvalidArgumentError

    codec = PageTokenCodec(b"k1")
    token = codec.encode("bind", [5, "id"])
    assert codec.decode(token, "bind") == [5, "id"]
    with _pytest.raises(InvalidArgumentError):
        PageTokenCodec(b"k2").decode(token, "bind")
    with _pytest.raises(InvalidArgumentError):
        PageTokenCodec(b"k1", ttl_s=-10).decode(PageTokenCodec(b"k1", ttl_s=-10).encode("bind", [1, "x"]), "bind")


async def test_title_filter_escapes_like_wildcards(store):
    tag = uuid.uuid4().hex[:12]
    literal = await create_canvas(store.alice, title=f"100% sure_{tag}", tags=[tag])
    await create_canvas(store.alice, title=f"1000 surely {tag}", tags=[tag])
    found = await store.alice.ListCanvases(pb.ListCanvasesRequest(filter=f'title:"0% sure_" AND tags:"{tag}"'))
    assert [c.id for c in found.canvases] == [literal.id]
