"""`agent-canvas canvas revisions ID | publish ID [REV] | rollback ID REV`: a canvas's immutable revisions,
which one runs as "published", and restoring an old one as the new head."""

from __future__ import annotations

import argparse
import json
import time

from agentcanvas.v1 import canvas_store_pb2
from google.protobuf import json_format

from services.cli.render import utf8_output

PAGE = 100  # the store's largest page


def _time(timestamp) -> str:
    ms = timestamp.ToMilliseconds()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000)) if ms else "-"


def _markers(revision: canvas_store_pb2.CanvasRevision, canvas: canvas_store_pb2.Canvas) -> str:
    marks = []
    if revision.id == canvas.head_revision_id:
        marks.append("head")
    if revision.id == canvas.published_revision_id:
        marks.append("published")
    return ",".join(marks)


async def _list(stub, args: argparse.Namespace, metadata) -> None:
    canvas = await stub.GetCanvas(canvas_store_pb2.GetCanvasRequest(id=args.id), metadata=metadata)
    request = canvas_store_pb2.ListRevisionsRequest(canvas_id=args.id, page_size=PAGE)
    revisions: list[canvas_store_pb2.CanvasRevision] = []
    while True:
        page = await stub.ListRevisions(request, metadata=metadata)
        revisions += page.revisions
        if not page.next_page_token:
            break
        request.page_token = page.next_page_token
    if args.json:
        for revision in revisions:
            shown = json_format.MessageToDict(revision)
            shown.pop("dsl", None)
            shown.pop("dslJson", None)
            shown["head"] = revision.id == canvas.head_revision_id
            shown["published"] = revision.id == canvas.published_revision_id
            print(json.dumps(shown, ensure_ascii=not utf8_output(), separators=(",", ":")))
        return
    rows = [["REVISION", "CREATED", "CONTENT HASH", ""]]
    rows += [[revision.id, _time(revision.create_time), revision.content_hash, _markers(revision, canvas)]
             for revision in revisions]  # newest first, as the store lists them
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


async def revisions_command(stub, args: argparse.Namespace, metadata) -> None:
    if args.canvas_command == "revisions":
        await _list(stub, args, metadata)
    elif args.canvas_command == "publish":
        published = await stub.PublishCanvas(canvas_store_pb2.PublishCanvasRequest(
            canvas_id=args.id, revision_id=args.revision, etag=args.etag), metadata=metadata)
        print(f"{args.id}\tpublished\t{published.id}")
    else:
        etag = args.etag
        if not etag:
            # The store wants the etag the change was based on; without --etag the operator means "whatever
            # is current", so read it now (a change between this read and the rollback is still ABORTED).
            current = await stub.GetCanvas(canvas_store_pb2.GetCanvasRequest(id=args.id), metadata=metadata)
            etag = current.etag
        head = await stub.RollbackCanvas(canvas_store_pb2.RollbackCanvasRequest(
            canvas_id=args.id, revision_id=args.revision, etag=etag), metadata=metadata)
        print(f"{args.id}\trolled back to {args.revision}\thead {head.id}")
