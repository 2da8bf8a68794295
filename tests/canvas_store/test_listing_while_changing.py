"""ListCanvases keyset paging while canvases are created, updated, retitled and deleted between pages.

Guarantee (README, Listing): no canvas appears twice in one walk, and every canvas unchanged since before the
walk's first page appears exactly once, in order. Canvases created or changed during the walk may be left out.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb
from google.protobuf import field_mask_pb2

from tests.canvas_store.conftest import create_canvas

ORDERS = ["update_time desc", "update_time asc", "title", "title desc"]


def _sort_key(order: str):
    if order.startswith("update_time"):
        return lambda c: (c.update_time.ToMilliseconds(), c.id)
    return lambda c: (c.title, c.id)


async def _update(store, canvas_id: str, **fields) -> None:
    current = await store.alice.GetCanvas(pb.GetCanvasRequest(id=canvas_id))
    await store.alice.UpdateCanvas(pb.UpdateCanvasRequest(
        canvas=pb.Canvas(id=canvas_id, etag=current.etag, **fields),
        update_mask=field_mask_pb2.FieldMask(paths=list(fields))))


@pytest.mark.parametrize("order", ORDERS)
async def test_a_walk_never_repeats_and_never_skips_unchanged_canvases(store, order):
    tag = uuid.uuid4().hex[:12]
    seeded = [await create_canvas(store.alice, title=f"walk {tag} {n:02d}", tags=[tag]) for n in range(12)]
    await asyncio.sleep(0.01)  # the walk starts in a later millisecond than every seeded change
    request = pb.ListCanvasesRequest(page_size=3, filter=f'tags:"{tag}"', order_by=order)
    seen: list[pb.Canvas] = []
    changed: set[str] = set()
    deleted: set[str] = set()
    step = 0
    while True:
        page = await store.alice.ListCanvases(request)
        seen.extend(page.canvases)
        if not page.next_page_token:
            break
        request.page_token = page.next_page_token
        # Between pages: touch a canvas already seen and one not seen yet, retitle one to the front and
        # one to the back, delete one, and create a new one.
        seen_ids = {c.id for c in seen}
        unseen = [c for c in seeded if c.id not in seen_ids and c.id not in changed | deleted]
        seen_live = [c for c in seen if c.id not in changed | deleted]
        if seen_live:
            first = seen_live[0]
            await _update(store, first.id, description=f"touched {step}")
            changed.add(first.id)
        if seen_live[1:]:
            await _update(store, seen_live[1].id, title=f"walk {tag} zz moved {step}")
            changed.add(seen_live[1].id)
        if unseen:
            await _update(store, unseen[-1].id, description=f"touched {step}")
            changed.add(unseen[-1].id)
        if unseen[1:]:
            await _update(store, unseen[0].id, title=f"walk {tag} 00 moved {step}")
            changed.add(unseen[0].id)
        if unseen[2:]:
            await store.alice.DeleteCanvas(pb.DeleteCanvasRequest(id=unseen[1].id))
            deleted.add(unseen[1].id)
        await create_canvas(store.alice, title=f"walk {tag} new {step}", tags=[tag])
        step += 1
    ids = [c.id for c in seen]
    assert len(ids) == len(set(ids)), f"a canvas was listed twice ({order})"
    unchanged = {c.id for c in seeded} - changed - deleted
    assert unchanged <= set(ids), f"unchanged canvases were skipped ({order})"
    assert not deleted & set(ids[-len(deleted):] if deleted else [])
    in_order = [c for c in seen if c.id in unchanged]
    expected = sorted(in_order, key=_sort_key(order), reverse=order.endswith("desc"))
    assert [c.id for c in in_order] == [c.id for c in expected]


async def test_concurrent_writers_while_paging(store):
    """Walks racing real concurrent writers: still no canvas twice, every untouched canvas once."""
    tag = uuid.uuid4().hex[:12]
    seeded = [await create_canvas(store.alice, title=f"race {tag} {n:02d}", tags=[tag]) for n in range(20)]
    touched = set(c.id for c in seeded[::2])
    await asyncio.sleep(0.01)

    async def writer():
        for round_ in range(3):
            for canvas in seeded[::2]:
                await _update(store, canvas.id, description=f"round {round_}")
            await create_canvas(store.alice, title=f"race {tag} new {round_}", tags=[tag])

    async def walk(order: str) -> list[str]:
        request = pb.ListCanvasesRequest(page_size=2, filter=f'tags:"{tag}"', order_by=order)
        ids: list[str] = []
        while True:
            page = await store.alice.ListCanvases(request)
            ids.extend(c.id for c in page.canvases)
            if not page.next_page_token:
                return ids
            request.page_token = page.next_page_token
            await asyncio.sleep(0)

    results = await asyncio.gather(writer(), *(walk(order) for order in ORDERS))
    untouched = {c.id for c in seeded} - touched
    for order, ids in zip(ORDERS, results[1:]):
        assert len(ids) == len(set(ids)), f"a canvas was listed twice ({order})"
        assert untouched <= set(ids), f"untouched canvases were skipped ({order})"
