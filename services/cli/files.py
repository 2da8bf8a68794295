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
from services.common.structs import from_struct, to_struct



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


def _localised(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("en") or next(iter(value.values()), ""))
    return "" if value is None else str(value)


def parse_document(raw: Any, *, source: str = "canvas file") -> CanvasDocument:
    """Accept a template wrapper or a bare DSL; raise InvalidArgumentError naming what is wrong."""
    if not isinstance(raw, dict):
        raise InvalidArgumentError.for_field(source, "must hold a JSON object")
    if isinstance(raw.get("dsl"), dict):
        dsl = raw["dsl"]
        declared = str(raw.get("canvas_category") or "").lower()
        category = "DATAFLOW" if declared.startswith("dataflow") else "AGENT" if declared.startswith("agent") else ""
        return CanvasDocument(
            dsl=dsl,
            title=_localised(raw.get("title")),
            description=_localised(raw.get("description")),
            avatar=str(raw.get("avatar") or ""),
            category=category,
            permission=str(raw.get("permission") or ""),
            tags=[str(t) for t in raw.get("tags") or []],
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
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError.for_field(str(path), f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    document = parse_document(raw, source=str(path))
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
        canvas.permission = canvas_store_pb2.CanvasPermission.Value(f"CANVAS_PERMISSION_{document.permission.upper()}")
    canvas.dsl.CopyFrom(to_struct(document.dsl))
    return canvas


def from_canvas_message(canvas: canvas_store_pb2.Canvas) -> CanvasDocument:
    """The document describing a stored canvas, for export."""
    return CanvasDocument(
        dsl=from_struct(canvas.dsl),
        title=canvas.title,
        description=canvas.description,
        avatar=canvas.avatar,
        category=canvas_store_pb2.CanvasCategory.Name(canvas.category).removeprefix("CANVAS_CATEGORY_"),
        permission=canvas_store_pb2.CanvasPermission.Name(canvas.permission).removeprefix("CANVAS_PERMISSION_"),
        tags=list(canvas.tags),
    )
