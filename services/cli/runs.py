"""`agent-canvas runs list|show|tail|cancel` and `agent-canvas validate`.

Listing and showing read the store's run records and persisted events (what a user token may read: its own
runs, or the tenant's for the tenant owner); following and cancelling go through the orchestrator, like `run`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import deque
from dataclasses import dataclass, field

from agentcanvas.v1 import (
    canvas_store_pb2,
    canvas_store_pb2_grpc,
    common_pb2,
    orchestrator_pb2,
    orchestrator_pb2_grpc,
)
from google.protobuf import json_format

from services.cli.commands import follow, text_delivery
from services.cli.files import load_document
from services.cli.render import TerminalView, utf8_output
from services.cli.stack import open_stack
from services.common.errors import FailedPreconditionError, InvalidArgumentError
from services.common.json_text import dump_object
from services.common.settings import Config

TERMINAL = {common_pb2.RUN_STATUS_SUCCEEDED, common_pb2.RUN_STATUS_FAILED, common_pb2.RUN_STATUS_CANCELLED}
STATUS_NAMES = {name.removeprefix("RUN_STATUS_").lower(): value for name, value in common_pb2.RunStatus.items()
                if value != common_pb2.RUN_STATUS_UNSPECIFIED}
ID = re.compile(r"[0-9a-f]{32}")
PAGE = 100  # the store's largest page
EVENTS_PAGE = 5000  # the store's largest page of events


def json_line(value: object) -> str:
    """One JSON object on one line, escaped like `run --json` when stdout cannot show UTF-8."""
    return json.dumps(value, ensure_ascii=not utf8_output(), separators=(",", ":"))


def status_name(value: int) -> str:
    return common_pb2.RunStatus.Name(value).removeprefix("RUN_STATUS_")


def parse_statuses(values: list[str] | None) -> list[int]:
    """`--status` (repeatable, or comma-separated), case-insensitive, with or without the RUN_STATUS_ prefix."""
    statuses: list[int] = []
    for value in values or []:
        for word in filter(None, (part.strip() for part in value.split(","))):
            key = word.lower().removeprefix("run_status_")
            if key not in STATUS_NAMES:
                raise InvalidArgumentError.for_field(
                    "--status", f"{word!r} is not a run status (one of {', '.join(STATUS_NAMES)})")
            if STATUS_NAMES[key] not in statuses:
                statuses.append(STATUS_NAMES[key])
    return statuses


def _check_id(value: str, flag: str, what: str) -> str:
    if not ID.fullmatch(value):
        raise InvalidArgumentError.for_field(flag, f"{value!r} is not a {what} id (32 lowercase hex characters)")
    return value


def format_time(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000)) if ms else "-"


def format_duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, second = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{second:02d}s"
    hours, minute = divmod(minutes, 60)
    return f"{hours}h{minute:02d}m"


def run_duration_ms(record: canvas_store_pb2.RunRecord, now_ms: int | None = None) -> int:
    """Until its last change for a run that stopped (finished or paused), else until now."""
    start = record.create_time.ToMilliseconds()
    if record.status in TERMINAL or record.status == common_pb2.RUN_STATUS_PAUSED:
        end = record.update_time.ToMilliseconds()
    else:
        end = int(time.time() * 1000) if now_ms is None else now_ms
    return max(0, end - start) if start else 0


def _record_json(record: canvas_store_pb2.RunRecord) -> dict:
    shown = json_format.MessageToDict(record)
    shown.pop("spec", None)  # the whole DSL and inputs: `runs show` is not an export
    shown.pop("lease", None)  # the orchestrator's bookkeeping
    return shown


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def _usage_text(usage: common_pb2.TokenUsage) -> str:
    if not (usage.calls or usage.total_tokens):
        return "no model calls"
    text = (f"tokens {usage.total_tokens} (prompt {usage.prompt_tokens}, completion {usage.completion_tokens}"
            + (f", reasoning {usage.reasoning_tokens}" if usage.reasoning_tokens else "")
            + (f", cached {usage.cached_tokens}" if usage.cached_tokens else "")
            + f"), {usage.calls} call{'s' if usage.calls != 1 else ''}")
    return text + (f", ${usage.cost_usd:.6f}" if usage.cost_usd else "")


@dataclass
class NodeTiming:
    component_id: str
    name: str = ""
    type: str = ""
    attempt: int = 1
    started_ms: int = 0
    elapsed_ms: int | None = None
    state: str = "started"  # started | finished | failed | skipped | waiting
    error: dict = field(default_factory=dict)
    detail: str = ""

    def to_json(self) -> dict:
        shown = {"componentId": self.component_id, "componentName": self.name, "componentType": self.type,
                 "attempt": self.attempt, "state": self.state, "startedAtMs": str(self.started_ms)}
        if self.elapsed_ms is not None:
            shown["elapsedMs"] = str(self.elapsed_ms)
        if self.error:
            shown["error"] = self.error
        if self.detail:
            shown["detail"] = self.detail
        return shown


def node_timings(events: list[orchestrator_pb2.RunEvent]) -> list[NodeTiming]:
    """Each node attempt in the order it started, with how long it took and how it ended."""
    nodes: dict[tuple[str, int], NodeTiming] = {}
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "node_started":
            payload = event.node_started
            key = (payload.component_id, payload.attempt or 1)
            nodes[key] = NodeTiming(payload.component_id, payload.component_name, payload.component_type,
                                    payload.attempt or 1, event.created_at_ms)
        elif kind == "node_finished":
            payload = event.node_finished
            key = (payload.component_id, payload.attempt or 1)
            node = nodes.setdefault(key, NodeTiming(payload.component_id, payload.component_name,
                                                    payload.component_type, payload.attempt or 1))
            node.elapsed_ms = payload.elapsed_ms
            node.state = "failed" if payload.error.message else "finished"
            if payload.error.message:
                node.error = json_format.MessageToDict(payload.error)
            if payload.branch:
                node.detail = f"branch {payload.branch}"
        elif kind == "node_skipped":
            payload = event.node_skipped
            nodes[(payload.component_id, 0)] = NodeTiming(payload.component_id, state="skipped",
                                                         started_ms=event.created_at_ms, detail=payload.reason)
        elif kind == "user_inputs_required":
            waiting = [node for node in nodes.values() if node.state == "started"]
            for node in waiting[-1:]:
                node.state = "waiting"
                node.detail = "for " + (", ".join(event.user_inputs_required.inputs.keys()) or "input")
        elif kind == "workflow_finished" and event.workflow_finished.status != common_pb2.RUN_STATUS_PAUSED:
            # A node that never finished was cut short by the run's end (a cancel, or a failure elsewhere).
            ended = "cancelled" if event.workflow_finished.status == common_pb2.RUN_STATUS_CANCELLED else "unfinished"
            for node in nodes.values():
                if node.state in ("started", "waiting"):
                    node.state, node.detail = ended, ""
    return list(nodes.values())


async def _all_events(stub, run_id: str, metadata) -> list[orchestrator_pb2.RunEvent]:
    events: list[orchestrator_pb2.RunEvent] = []
    after = 0
    while True:
        page = await stub.ListRunEvents(canvas_store_pb2.ListRunEventsRequest(
            run_id=run_id, after_seq=after, page_size=EVENTS_PAGE), metadata=metadata)
        for stored in page.events:
            event = orchestrator_pb2.RunEvent()
            event.ParseFromString(stored.payload)
            events.append(event)
            after = stored.seq
        if len(page.events) < EVENTS_PAGE:
            return events


async def _list(stub, args: argparse.Namespace, metadata) -> None:
    statuses = parse_statuses(args.status)
    canvas_id = _check_id(args.canvas, "--canvas", "canvas") if args.canvas else ""
    request = canvas_store_pb2.ListRunRecordsRequest(statuses=statuses, session_id=args.session, page_size=PAGE)
    # The store lists oldest first and cannot filter by canvas: walk every page, keep the newest `limit`.
    newest: deque[canvas_store_pb2.RunRecord] = deque(maxlen=args.limit)
    while True:
        page = await stub.ListRunRecords(request, metadata=metadata)
        newest.extend(record for record in page.runs if not canvas_id or record.canvas_id == canvas_id)
        if not page.next_page_token:
            break
        request.page_token = page.next_page_token
    records = list(reversed(newest))
    if args.json:
        for record in records:
            print(json_line(_record_json(record)))
        return
    if not records:
        print("no runs", file=sys.stderr)
        return
    now_ms = int(time.time() * 1000)
    rows = [["RUN", "CANVAS", "STATUS", "STARTED", "DURATION", "TOKENS"]]
    for record in records:
        status = status_name(record.status)
        if record.cancel_requested and record.status not in TERMINAL:
            status += " (cancelling)"
        rows.append([record.id, record.canvas_id or "-", status, format_time(record.create_time.ToMilliseconds()),
                     format_duration(run_duration_ms(record, now_ms)), str(record.usage.total_tokens)])
    print(_table(rows))


async def _show(stub, args: argparse.Namespace, metadata) -> None:
    record = await stub.GetRunRecord(canvas_store_pb2.GetRunRecordRequest(id=args.run_id), metadata=metadata)
    nodes = node_timings(await _all_events(stub, record.id, metadata))
    if args.json:
        print(json_line({"run": _record_json(record), "nodes": [node.to_json() for node in nodes]}))
        return
    status = status_name(record.status)
    if record.cancel_requested and record.status not in TERMINAL:
        status += " (cancel requested)"
    canvas = (f"{record.canvas_id} (revision {record.revision_id or 'head'})" if record.canvas_id
              else "inline DSL")
    lines = [("run", record.id), ("status", status), ("canvas", canvas)]
    if record.session_id:
        lines.append(("session", record.session_id))
    lines += [("started", format_time(record.create_time.ToMilliseconds())),
              ("updated", format_time(record.update_time.ToMilliseconds())),
              ("duration", format_duration(run_duration_ms(record))),
              ("usage", _usage_text(record.usage)),
              ("events", str(record.last_seq))]
    if record.error.message or record.error.reason:
        where = f" at {record.error.component_id}" if record.error.component_id else ""
        lines.append(("error", f"{record.error.reason or 'ERROR'}{where}: {record.error.message}"))
    for label, value in lines:
        print(f"{label:<10}{value}")
    if nodes:
        print("nodes:")
        start = record.create_time.ToMilliseconds()
        rows = []
        for node in nodes:
            offset = f"+{format_duration(max(0, node.started_ms - start))}" if node.started_ms and start else ""
            took = format_duration(node.elapsed_ms) if node.elapsed_ms is not None else "-"
            label = node.component_id + (f" (attempt {node.attempt})" if node.attempt > 1 else "")
            detail = node.detail
            if node.error:
                detail = f"{node.error.get('reason') or 'ERROR'}: {node.error.get('message', '')}"
            rows.append(["", label, node.type or "-", node.state, offset, took, detail])
        print(_table(rows))


async def runs(config: Config, args: argparse.Namespace) -> int:
    if args.runs_command != "list":
        _check_id(args.run_id, "RUN_ID", "run")
    if args.runs_command in ("list", "show"):
        stack = await open_stack(config, ["canvas_store"], mode=args.mode)
        try:
            stub = canvas_store_pb2_grpc.CanvasStoreStub(stack.channel("canvas_store"))
            await (_list if args.runs_command == "list" else _show)(stub, args, stack.metadata())
        finally:
            await stack.close()
        return 0
    stack = await open_stack(config, ["orchestrator"], mode=args.mode)
    try:
        stub = orchestrator_pb2_grpc.OrchestratorStub(stack.channel("orchestrator"))
        if args.runs_command == "tail":
            view = TerminalView()
            request = orchestrator_pb2.StreamRunEventsRequest(run_id=args.run_id, after_seq=args.after_seq,
                                                              text_delivery=text_delivery(args.json, view))
            return await follow(stub.StreamRunEventsBatched(request, metadata=stack.metadata()), args, view)
        run = await stub.CancelRun(orchestrator_pb2.CancelRunRequest(run_id=args.run_id), metadata=stack.metadata())
        if run.status in TERMINAL and run.status != common_pb2.RUN_STATUS_CANCELLED:
            raise FailedPreconditionError(f"run {run.id} already ended ({status_name(run.status)}); nothing to cancel",
                                          reason="RUN_ENDED")
        # A running run ends on its own replica's next heartbeat; a paused one is ended at once.
        print(f"{run.id}\t{status_name(run.status)}" + ("" if run.status in TERMINAL else "\tcancel requested"))
        return 0
    finally:
        await stack.close()


async def validate(config: Config, args: argparse.Namespace) -> int:
    if bool(args.file) == bool(args.canvas):
        raise InvalidArgumentError.for_field("FILE|--canvas", "give a canvas file or --canvas ID (one of them)")
    request = orchestrator_pb2.ValidateCanvasRequest()
    if args.file:
        request.dsl_json = dump_object(load_document(args.file).dsl)  # key order kept: problems in DSL order
    else:
        request.canvas_id = args.canvas
    stack = await open_stack(config, ["orchestrator"], mode=args.mode)
    try:
        stub = orchestrator_pb2_grpc.OrchestratorStub(stack.channel("orchestrator"))
        reply = await stub.ValidateCanvas(request, metadata=stack.metadata())
    finally:
        await stack.close()
    if args.json:
        print(json_line({"valid": reply.valid, "problems": [json_format.MessageToDict(p) for p in reply.problems]}))
    elif reply.valid:
        print("valid")
    else:
        for problem in reply.problems:
            print(f"{problem.component_id or '-'}\t{problem.field or '-'}\t{problem.code}\t{problem.message}")
    return 0 if reply.valid else 1
