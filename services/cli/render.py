"""Printing RunEvents: one JSON object per line (--json), or a live terminal view.

The terminal view streams the answer to stdout as it arrives; reasoning appears in a dim, labelled
section, and node progress goes to stderr, so `2>/dev/null` leaves just the answer.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from agentcanvas.v1 import common_pb2, orchestrator_pb2
from google.protobuf import json_format

DIM, BOLD, RED, GREEN, RESET = "\033[2m", "\033[1m", "\033[31m", "\033[32m", "\033[0m"


def utf8_output(stream: TextIO | None = None) -> bool:
    """Whether `stream` (stdout by default) writes UTF-8. When it does not (LANG=C without UTF-8 mode,
    PYTHONIOENCODING=ascii), JSON goes out with \\u escapes, which stay valid JSON for any reader."""
    encoding = getattr(stream if stream is not None else sys.stdout, "encoding", None) or ""
    return encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig")


def _sorted(value):
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def _stable(shown: dict, descriptor) -> dict:
    """`shown` (MessageToDict of a message of `descriptor`) with the entries of every map and Struct in key
    order: their order in memory depends on how the message was built or parsed, and the same event printed
    live by `run --json` and replayed from the store by `runs tail --json` must be the same line."""
    for field in descriptor.fields:
        if field.json_name not in shown or field.message_type is None:
            continue
        value = shown[field.json_name]
        message = field.message_type
        if message.full_name in ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"):
            shown[field.json_name] = _sorted(value)
        elif message.GetOptions().map_entry:
            entry = message.fields_by_name["value"].message_type
            shown[field.json_name] = {key: (_stable(value[key], entry) if entry is not None and isinstance(value[key], dict)
                                            else _sorted(value[key])) for key in sorted(value)}
        elif isinstance(value, list):
            shown[field.json_name] = [_stable(item, message) if isinstance(item, dict) else item for item in value]
        elif isinstance(value, dict):
            _stable(value, message)
    return shown


def event_json(event: orchestrator_pb2.RunEvent) -> str:
    """The proto JSON mapping of one event, on one line (maps and Structs in key order)."""
    return json.dumps(_stable(json_format.MessageToDict(event), event.DESCRIPTOR), ensure_ascii=not utf8_output(),
                      separators=(",", ":"))


class TerminalView:
    """Stateful renderer; call `show(event)` for every event in order."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, color: bool | None = None):
        # Resolved now, not at import: a caller (or a test) that redirected sys.stdout/stderr since
        # the module was imported gets its output where it points.
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        out = self.out
        self.color = out.isatty() if color is None else color
        self.live_text = out.isatty()
        """Whether the answer streams as it comes (TEXT_DELIVERY_LIVE): on a terminal, where a reader sees a
        takeover's restart marked. Piped output asks for TEXT_DELIVERY_CONFIRMED (each answer once, whole)."""
        self._in_text = False
        self._in_think = False

    def _style(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self.color else text

    def _end_line(self) -> None:
        if self._in_text or self._in_think:
            self.out.write("\n")
            self.out.flush()
        self._in_text = self._in_think = False

    def _progress(self, text: str) -> None:
        self._end_line()
        self.err.write(self._style(DIM, text) + "\n")
        self.err.flush()

    def show(self, event: orchestrator_pb2.RunEvent) -> None:
        kind = event.WhichOneof("event")
        payload = getattr(event, kind) if kind else None
        if kind == "workflow_started":
            self._progress(f"▶ run {event.run_id}" + (" (resumed)" if payload.resumed else ""))
        elif kind == "node_started":
            self._progress(f"  ● {payload.component_name or payload.component_id} ({payload.component_type})")
        elif kind == "node_finished":
            mark = "✗" if payload.error.message else "✓"
            detail = f" {payload.error.message}" if payload.error.message else ""
            branch = f" → {payload.branch}" if payload.branch else ""
            self._progress(f"  {mark} {payload.component_name or payload.component_id} {payload.elapsed_ms} ms{branch}{detail}")
        elif kind == "node_skipped":
            self._progress(f"  ○ {payload.component_id} skipped: {payload.reason}")
        elif kind == "think_start":
            self._end_line()
            self.out.write(self._style(DIM, "thinking: "))
            self._in_think = True
        elif kind == "think_delta":
            self.out.write(self._style(DIM, payload.content))
            self._in_think = True
        elif kind == "think_end":
            self._end_line()
        elif kind == "message_delta":
            self.out.write(payload.content)
            self._in_text = True
            self.out.flush()
        elif kind == "message_end":
            self._end_line()
        elif kind == "message_reset":
            # A takeover started this Message again: what it printed so far is void. A terminal cannot take
            # it back, so the restart is marked and the new attempt's text starts on its own line.
            self._end_line()
            self.out.write(self._style(DIM, f"↺ {payload.component_id} restarted (attempt {payload.attempt}); "
                                            "the text above is superseded") + "\n")
            self.out.flush()
        elif kind == "event_unreadable":
            self._progress(self._style(RED, f"  ! event {event.seq}: {payload.error.message}"))
        elif kind == "user_inputs_required":
            fields = ", ".join(payload.inputs.keys()) or "(none)"
            self._progress(f"⏸ waiting for input: {fields}" + (f" — {payload.tips}" if payload.tips else ""))
        elif kind == "warning":
            self._progress(f"  ! {payload.component_id}: {payload.message}")
        elif kind == "workflow_finished":
            self._finish(payload)

    def _finish(self, payload: orchestrator_pb2.WorkflowFinished) -> None:
        status = common_pb2.RunStatus.Name(payload.status).removeprefix("RUN_STATUS_")
        usage = payload.usage
        tokens = f" · tokens {usage.total_tokens} (prompt {usage.prompt_tokens}, completion {usage.completion_tokens})" if usage.calls else ""
        color = GREEN if status in ("SUCCEEDED", "PAUSED") else RED
        self._progress(self._style(color, f"■ {status} in {payload.elapsed_ms} ms{tokens}"))
        if payload.error.message:
            where = f" at {payload.error.component_id}" if payload.error.component_id else ""
            self.err.write(self._style(RED, f"error{where}: {payload.error.message}") + "\n")
