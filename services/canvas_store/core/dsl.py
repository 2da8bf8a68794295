"""DSL helpers: canonical form and hash, shape validation, category detection, template files."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from services.canvas_store.core.types import Category, JsonObject, Template
from services.canvas_store.core.validation import MAX_JSON_DEPTH, json_depth
from services.common.errors import InvalidArgumentError

# Components that start an ingestion pipeline instead of an agent conversation (RAGFlow dataflow).
_DATAFLOW_ENTRY = {"File"}
_AGENT_ENTRY = {"Begin"}
MAX_DSL_DEPTH = MAX_JSON_DEPTH - 1
"""A run's spec holds the DSL one level down, so a DSL that fits can always be run."""


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: equal DSLs give equal bytes (and equal hashes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def content_hash(dsl: JsonObject) -> str:
    """Hash of the DSL as written, key order included: order carries meaning (Categorize's categories,
    Switch's conditions, form fields), so a reordered DSL is a new revision, not the same one."""
    return hashlib.sha256(json.dumps(dsl, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()).hexdigest()


def validate_dsl(dsl: Any, *, field: str, max_bytes: int) -> int:
    """Check the DSL's shape and size; returns its canonical size in bytes.

    The store checks only what it needs to stay sound: an object with a `components` object, within the
    size and nesting limits. The orchestrator's ValidateCanvas checks the graph itself.
    """
    if not isinstance(dsl, dict):
        raise InvalidArgumentError.for_field(field, "must be a JSON object")
    components = dsl.get("components")
    if not isinstance(components, dict):
        raise InvalidArgumentError.for_field(f"{field}.components", "is required and must be an object of components")
    json_depth(dsl, field, MAX_DSL_DEPTH)
    try:
        size = len(canonical_json(dsl))
    except ValueError as error:
        raise InvalidArgumentError.for_field(field, f"is not valid JSON: {error}") from None
    if size > max_bytes:
        raise InvalidArgumentError.for_field(field, f"is {size} bytes; the limit is {max_bytes} (store.max_dsl_bytes)")
    return size


def detect_category(dsl: JsonObject, declared: str | None = None) -> Category:
    """DATAFLOW for ingestion pipelines (RAGFlow "dataflow_canvas", or a File entry and no Begin)."""
    if declared == "dataflow_canvas":
        return Category.DATAFLOW
    names = set()
    for component in (dsl.get("components") or {}).values():
        if isinstance(component, dict) and isinstance(component.get("obj"), dict):
            names.add(component["obj"].get("component_name"))
    if names & _DATAFLOW_ENTRY and not names & _AGENT_ENTRY:
        return Category.DATAFLOW
    return Category.AGENT


def split_import(document: Any) -> tuple[JsonObject, JsonObject]:
    """Accept RAGFlow's template wrapper ({"dsl": {...}, "title": ...}) or a bare DSL.

    Returns (dsl, metadata) where metadata holds the wrapper's other keys (empty for a bare DSL).
    """
    if isinstance(document, dict) and isinstance(document.get("dsl"), dict) and "components" not in document:
        metadata = {key: value for key, value in document.items() if key != "dsl"}
        return document["dsl"], metadata
    return document, {}


def _i18n(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str) and value:
        return {"en": value}
    return {}


def template_from_file(stem: str, document: Any) -> Template:
    """Build a Template from one bundled file (wrapper or bare DSL); the id is the file stem."""
    dsl, metadata = split_import(document)
    validate_dsl(dsl, field=f"templates/{stem}.json", max_bytes=1 << 30)
    title = _i18n(metadata.get("title")) or {"en": stem.replace("_", " ").capitalize()}
    return Template(
        id=stem,
        title=title,
        description=_i18n(metadata.get("description")),
        canvas_type=str(metadata.get("canvas_type") or ""),
        category=detect_category(dsl, metadata.get("canvas_category")),
        avatar=str(metadata.get("avatar") or ""),
        dsl=dsl,
    )
