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

from services.common.errors import InvalidArgumentError

# Component classes that only exist in ingestion pipelines (RAGFlow's rag.flow package).
INGESTION_COMPONENTS = {"File", "Parser", "TokenChunker", "TitleChunker", "Splitter", "HierarchicalMerger", "Extractor", "Tokenizer"}


@dataclass
class CanvasDocument:
    """What a canvas file holds, independent of its shape."""

    dsl: dict[str, Any]
    title: str = ""
    description: str = ""
    avatar: str = ""
    category: str = "AGENT"
    permission: str = ""
    tags: list[str] = field(default_factory=list)


def _localised(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("en") or next(iter(value.values()), ""))
    return "" if value is None else str(value)


def _is_ingestion(dsl: dict[str, Any]) -> bool:
    components = dsl.get("components")
    if not isinstance(components, dict):
        return False
    names = {((entry or {}).get("obj") or {}).get("component_name") for entry in components.values() if isinstance(entry, dict)}
    return bool(names & INGESTION_COMPONENTS)


def parse_document(raw: Any, *, source: str = "canvas file") -> CanvasDocument:
    """Accept a template wrapper or a bare DSL; raise InvalidArgumentError naming what is wrong."""
    if not isinstance(raw, dict):
        raise InvalidArgumentError.for_field(source, "must hold a JSON object")
    if isinstance(raw.get("dsl"), dict):
        dsl = raw["dsl"]
        marked_dataflow = str(raw.get("canvas_category") or "").lower().startswith("dataflow")
        return CanvasDocument(
            dsl=dsl,
            title=_localised(raw.get("title")),
            description=_localised(raw.get("description")),
            avatar=str(raw.get("avatar") or ""),
            category="DATAFLOW" if marked_dataflow or _is_ingestion(dsl) else "AGENT",
            permission=str(raw.get("permission") or ""),
            tags=[str(t) for t in raw.get("tags") or []],
        )
    if isinstance(raw.get("components"), dict):
        return CanvasDocument(dsl=raw, category="DATAFLOW" if _is_ingestion(raw) else "AGENT")
    raise InvalidArgumentError.for_field(source, "is neither a template wrapper (with 'dsl') nor a DSL (with 'components')")


def load_document(path: Path) -> CanvasDocument:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidArgumentError.for_field(str(path), "file does not exist") from None
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
        "canvas_category": "dataflow_canvas" if document.category == "DATAFLOW" else "agent_canvas",
        "permission": document.permission,
        "tags": document.tags,
        "dsl": document.dsl,
    }
