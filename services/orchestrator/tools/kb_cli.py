"""Functions behind `agent-canvas kb add FILES…` and `agent-canvas kb list` (the CLI wires them).

Synchronous on purpose: the CLI is not async, and SQLite work is blocking anyway. Both read the
knowledge base location from the same `tools:` config the orchestrator uses, so documents added
from the command line are what the Retrieval tool searches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from services.common.errors import ViolationCollector
from services.common.settings import Config
from services.orchestrator.tools.config import ToolsSettings
from services.orchestrator.tools.errors import ToolInputError
from services.orchestrator.tools.kb.loaders import MIME_TYPES, LoadedDocument, load_file
from services.orchestrator.tools.kb.store import DocumentInfo, KnowledgeBase

__all__ = ["DocumentInfo", "add", "list_documents", "remove", "format_documents"]


def _kb(config: Config, env: Mapping[str, str] | None) -> KnowledgeBase:
    return KnowledgeBase(ToolsSettings.from_config(config, env=env).retrieval.embedded)


def _expand(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; directories contribute their supported files, recursively, in sorted order."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MIME_TYPES))
        else:
            files.append(path)
    return files


def add(
    paths: Sequence[str | os.PathLike[str]],
    config: Config,
    *,
    dataset: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[DocumentInfo]:
    """Add (or update) files in the embedded knowledge base; return one DocumentInfo per file.

    All files are read and parsed first: if any is missing or unsupported, nothing is added and an
    InvalidArgumentError lists every bad file (field `files[i]`). Re-adding an unchanged file is a
    no-op (status "unchanged"); a changed file keeps its document id (status "updated").
    """
    files = _expand(paths)
    problems = ViolationCollector()
    if not files:
        problems.add("files", "no files given (or no supported files in the given directories)")
    loaded: list[tuple[Path, LoadedDocument]] = []
    for i, path in enumerate(files):
        try:
            loaded.append((path, load_file(path.resolve())))
        except ToolInputError as exc:
            problems.add(f"files[{i}]", exc.detail)
    problems.raise_if_any("cannot add to the knowledge base")
    kb = _kb(config, env)
    try:
        return [kb.add_loaded(doc, source=str(path.resolve()), dataset=dataset) for path, doc in loaded]
    finally:
        kb.close()


def list_documents(config: Config, *, dataset: str | None = None, env: Mapping[str, str] | None = None) -> list[DocumentInfo]:
    """Documents in the embedded knowledge base, by dataset then name."""
    kb = _kb(config, env)
    try:
        return kb.list_documents(dataset)
    finally:
        kb.close()


def remove(document_ids: Sequence[str], config: Config, *, env: Mapping[str, str] | None = None) -> list[str]:
    """Remove documents by id; return the ids that existed."""
    kb = _kb(config, env)
    try:
        return [doc_id for doc_id in document_ids if kb.remove(doc_id)]
    finally:
        kb.close()


def format_documents(docs: Sequence[DocumentInfo]) -> str:
    """A plain-text table for the CLI."""
    if not docs:
        return "No documents."
    with_status = any(d.status for d in docs)
    header = ("ID", "DATASET", "NAME", "CHUNKS", "SIZE", "UPDATED") + (("STATUS",) if with_status else ())
    rows = [
        (
            d.id,
            d.dataset_id,
            d.name,
            str(d.chunk_count),
            str(d.size),
            datetime.fromtimestamp(d.updated_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        )
        + ((d.status,) if with_status else ())
        for d in docs
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows])
