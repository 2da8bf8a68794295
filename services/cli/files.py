"""Canvas files on disk: RAGFlow's template wrapper or a bare DSL, in and out.

A template wrapper looks like {"id", "title": {"en": ...} | "...", "description", "canvas_type",
"canvas_category", "avatar", "dsl": {...}}; a bare DSL is the object holding "components".
`export_document` writes the wrapper shape with every canvas field, so importing it back yields an
equal canvas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcanvas.v1 import canvas_store_pb2

from services.common.errors import InvalidArgumentError
from services.common.json_text import dump_object
from services.common.structs import find_inexact_integer, find_too_deep, from_struct


MAX_DSL_DEPTH = 30
"""The store keeps DSLs nested at most 30 levels deep (services/canvas_store/README.md, Limits); deeper ones
cannot even be sent as a Struct (protobuf's recursion limit), so they are refused here, naming the path."""


def _lone_surrogate(value: Any) -> str | None:
    """The path of the first text (or key) holding a lone surrogate (a `\\ud800` escape: JSON allows it, UTF-8
    and so protobuf cannot carry it), or None. Iterative."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    return path
                stack.append((f"{path}.{key}", child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return None


class NotJsonNumber(ValueError):
    """NaN, Infinity or -Infinity in JSON text: Python's json reads them, JSON (and a Struct) has no such number."""


def reject_constant(name: str) -> Any:
    """json.loads' parse_constant hook: refuse NaN, Infinity and -Infinity."""
    raise NotJsonNumber(f"{name} is not a JSON number")


def find_unsendable_number(value: Any) -> tuple[str, str] | None:
    """(path, why) of the first number a Struct cannot carry as given: an infinite float (1e999) or an integer
    beyond ±2^53 (Struct numbers are doubles), or None."""
    if (where := find_inexact_integer(value)) is not None:
        path, number = where
        return path, (f"{number} is an integer beyond ±2^53: numbers travel as doubles and would change; "
                      "write it as a string")
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and item in (float("inf"), float("-inf")):
            return path, "is too large for a JSON number (it would be infinite)"
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}", child) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return None


@dataclass
class CanvasDocument:
    """What a canvas file holds, independent of its shape."""

    dsl: dict[str, Any]
    title: str = ""
    description: str = ""
    avatar: str = ""
    category: str = ""
    """AGENT or DATAFLOW when the file says so; "" lets the store detect it from the DSL."""
    permission: str = ""
    tags: list[str] = field(default_factory=list)


def _localised(value: Any, field: str) -> str:
    """A text or RAGFlow's {"en": ..., "zh": ...} (English first); InvalidArgumentError for anything else."""
    if isinstance(value, dict) and all(isinstance(text, str) for text in value.values()):
        return value.get("en") or next(iter(value.values()), "")
    if value is None or isinstance(value, str):
        return value or ""
    raise InvalidArgumentError.for_field(field, 'must be a text or an object of texts by language ({"en": ...})')


def _tags(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise InvalidArgumentError.for_field(field, "must be a list of texts")
    return list(value)


def _permission(value: Any, field: str) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or value.upper() not in ("ME", "TEAM"):
        raise InvalidArgumentError.for_field(field, f"must be ME or TEAM, not {value!r}")
    return value.upper()


def parse_document(raw: Any, *, source: str = "canvas file") -> CanvasDocument:
    """Accept a template wrapper or a bare DSL; raise InvalidArgumentError naming what is wrong."""
    if not isinstance(raw, dict):
        raise InvalidArgumentError.for_field(source, "must hold a JSON object")
    if isinstance(raw.get("dsl"), dict) and "components" not in raw:  # as the store's import tells them apart
        dsl = raw["dsl"]
        declared = str(raw.get("canvas_category") or "").lower()
        category = "DATAFLOW" if declared.startswith("dataflow") else "AGENT" if declared.startswith("agent") else ""
        avatar = raw.get("avatar")
        if avatar is not None and not isinstance(avatar, str):
            raise InvalidArgumentError.for_field(f"{source}.avatar", "must be a text (an image URL or data URI)")
        return CanvasDocument(
            dsl=dsl,
            title=_localised(raw.get("title"), f"{source}.title"),
            description=_localised(raw.get("description"), f"{source}.description"),
            avatar=avatar or "",
            category=category,
            permission=_permission(raw.get("permission"), f"{source}.permission"),
            tags=_tags(raw.get("tags"), f"{source}.tags"),
        )
    if isinstance(raw.get("components"), dict):
        return CanvasDocument(dsl=raw)
    raise InvalidArgumentError.for_field(source, "is neither a template wrapper (with 'dsl') nor a DSL (with 'components')")


def read_text(path: Path) -> str:
    """A file's text (UTF-8), or InvalidArgumentError naming the file and why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidArgumentError.for_field(str(path), "file does not exist") from None
    except IsADirectoryError:
        raise InvalidArgumentError.for_field(str(path), "is a directory, not a file") from None
    except PermissionError:
        raise InvalidArgumentError.for_field(str(path), "cannot be read (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError.for_field(str(path), f"is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InvalidArgumentError.for_field(str(path), f"cannot be read ({exc.strerror or exc})") from None


def write_text(path: Path, text: str) -> None:
    """Write a file, or InvalidArgumentError naming it and why it cannot be written."""
    try:
        path.write_text(text, encoding="utf-8")
    except IsADirectoryError:
        raise InvalidArgumentError.for_field(str(path), "is a directory, not a file") from None
    except OSError as exc:
        raise InvalidArgumentError.for_field(str(path), f"cannot be written ({exc.strerror or exc})") from None


def load_document(path: Path) -> CanvasDocument:
    text = read_text(path)
    try:
        raw = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError.for_field(str(path), f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InvalidArgumentError.for_field(str(path), "nests arrays or objects too deeply to read") from None
    except NotJsonNumber as exc:
        raise InvalidArgumentError.for_field(str(path), f"is not valid JSON: {exc}") from None
    except ValueError:  # the only other refusal: Python reads integers of at most 4300 digits
        raise InvalidArgumentError.for_field(str(path), "holds an integer of more than 4300 digits") from None
    if (where := find_inexact_integer(raw)) is not None:
        field_path, number = where
        raise InvalidArgumentError.for_field(
            f"{path}{field_path}", f"{number} is an integer beyond ±2^53: canvas numbers are doubles and would "
            "store a different value; write it as a string")
    if (where := find_unsendable_number(raw)) is not None:
        field_path, problem = where
        raise InvalidArgumentError.for_field(f"{path}{field_path}", problem)
    if "\\u" in text and (where := _lone_surrogate(raw)) is not None:  # only a backslash-u escape can make one
        raise InvalidArgumentError.for_field(
            f"{path}{where}", "holds a lone surrogate escape (\\ud800-\\udfff), which UTF-8 text cannot carry")
    document = parse_document(raw, source=str(path))
    if (deep := find_too_deep(document.dsl, MAX_DSL_DEPTH)) is not None:
        prefix = "" if document.dsl is raw else ".dsl"
        raise InvalidArgumentError.for_field(
            f"{path}{prefix}{deep}",
            f"nests objects and arrays more than {MAX_DSL_DEPTH} levels deep (the store's limit)")
    if not document.title:
        document.title = path.stem
    return document


def export_document(document: CanvasDocument) -> dict[str, Any]:
    return {
        "title": document.title,
        "description": document.description,
        "avatar": document.avatar,
        "canvas_category": {"DATAFLOW": "dataflow_canvas", "AGENT": "agent_canvas"}.get(document.category, ""),
        "permission": document.permission,
        "tags": document.tags,
        "dsl": document.dsl,
    }


def to_canvas_message(document: CanvasDocument, title: str | None = None) -> canvas_store_pb2.Canvas:
    """The Canvas to create from a document (category and permission left unset when not given)."""
    canvas = canvas_store_pb2.Canvas(
        title=title or document.title,
        description=document.description,
        avatar=document.avatar,
        tags=document.tags,
    )
    if document.category:
        canvas.category = canvas_store_pb2.CanvasCategory.Value(f"CANVAS_CATEGORY_{document.category}")
    if document.permission:
        canvas.permission = canvas_store_pb2.CanvasPermission.Value(
            f"CANVAS_PERMISSION_{_permission(document.permission, 'permission')}")
    canvas.dsl_json = dump_object(document.dsl)  # text keeps the key order a Struct loses
    return canvas


def from_canvas_message(canvas: canvas_store_pb2.Canvas) -> CanvasDocument:
    """The document describing a stored canvas, for export."""
    return CanvasDocument(
        dsl=json.loads(canvas.dsl_json) if canvas.dsl_json else from_struct(canvas.dsl),
        title=canvas.title,
        description=canvas.description,
        avatar=canvas.avatar,
        category=canvas_store_pb2.CanvasCategory.Name(canvas.category).removeprefix("CANVAS_CATEGORY_"),
        permission=canvas_store_pb2.CanvasPermission.Name(canvas.permission).removeprefix("CANVAS_PERMISSION_"),
        tags=list(canvas.tags),
    )
