"""Reference chunks, document aggregates and citation ids (spec §4.6, fix list §7 item 21).

RAGFlow keys chunks by SHA-1(chunk id) mod 500 and shows that number to the model as the citation
id, so ids collide with a few dozen chunks and collisions overwrite silently. Here a run owns one
`ReferenceBucket`; it hands out sequential citation ids (0, 1, 2, ...) in the order chunks are first
seen, keyed by the chunk's own unique id. The same chunk retrieved twice keeps its first id, two
different chunks never share one, and ids never depend on hashing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Fields of RAGFlow's normalised reference chunk, in its order, with empty defaults.
CHUNK_FIELDS: dict[str, Any] = {
    "id": "",
    "content": "",
    "document_id": "",
    "document_name": "",
    "dataset_id": "",
    "image_id": "",
    "positions": [],
    "url": None,
    "similarity": 0.0,
    "vector_similarity": 0.0,
    "term_similarity": 0.0,
    "row_id": None,
    "doc_type": "",
    "document_metadata": {},
}

_BASE64_IMAGE = re.compile(r"!?\[[^\]]*\]\(data:image/[^)]*\)|data:image/[a-zA-Z+]+;base64,[A-Za-z0-9+/=]+")
WEB_CONTENT_LIMIT = 10_000


def stable_id(*parts: str, length: int = 32) -> str:
    """A hex id from SHA-256 of the parts (128 bits by default: collisions are not a concern)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:length]


def normalize_chunk(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Map a chunk from any backend onto RAGFlow's reference shape (unknown keys are dropped).

    Accepts RAGFlow HTTP API names too (`document_keyword` for the name, `kb_id` for the dataset).
    """
    chunk = {key: (list(default) if isinstance(default, list) else dict(default) if isinstance(default, dict) else default)
             for key, default in CHUNK_FIELDS.items()}
    for key in CHUNK_FIELDS:
        if key in raw and raw[key] is not None:
            chunk[key] = raw[key]
    if not chunk["document_name"]:
        chunk["document_name"] = raw.get("document_keyword") or raw.get("docnm_kwd") or ""
    if not chunk["dataset_id"]:
        chunk["dataset_id"] = raw.get("kb_id") or ""
    if not chunk["document_id"]:
        chunk["document_id"] = raw.get("doc_id") or ""
    if not chunk["id"]:
        chunk["id"] = raw.get("chunk_id") or stable_id(str(chunk["document_id"]), str(chunk["content"]))
    if "citation_id" in raw:
        chunk["citation_id"] = raw["citation_id"]
    return chunk


def doc_aggs_of(chunks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`[{doc_id, doc_name, count}]` in first-seen order."""
    aggs: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        doc_id = str(chunk.get("document_id") or "")
        entry = aggs.setdefault(doc_id, {"doc_id": doc_id, "doc_name": chunk.get("document_name", ""), "count": 0})
        entry["count"] += 1
    return list(aggs.values())


def web_chunks(results: Iterable[Mapping[str, Any]], *, source: str) -> list[dict[str, Any]]:
    """Turn web-search results `{title, url, content}` into reference chunks (spec §5.20).

    Inline base64 images are stripped and content is capped at 10 000 characters. The chunk id is a
    hash of the URL and content, so the same page gives the same chunk across calls.
    """
    chunks = []
    for item in results:
        content = _BASE64_IMAGE.sub("", str(item.get("content") or ""))[:WEB_CONTENT_LIMIT]
        if not content.strip():
            continue
        url = str(item.get("url") or "")
        title = str(item.get("title") or url)
        chunks.append(
            normalize_chunk(
                {
                    "id": stable_id(source, url, content),
                    "content": content,
                    "document_id": stable_id(source, url or title),
                    "document_name": title,
                    "url": url or None,
                    "similarity": float(item.get("score") or 1.0),
                    "doc_type": "web",
                }
            )
        )
    return chunks


@dataclass
class ReferenceBucket:
    """One run's references: chunks with citation ids, and document aggregates.

    Not locked: the orchestrator runs one event loop per process and `add` does no awaiting.
    """

    _chunks: dict[str, dict[str, Any]] = field(default_factory=dict)
    _docs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, chunks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Register chunks; return them normalised, each with its `citation_id` (int)."""
        out = []
        for raw in chunks:
            chunk = normalize_chunk(raw)
            known = self._chunks.get(chunk["id"])
            if known is None:
                chunk["citation_id"] = len(self._chunks)
                self._chunks[chunk["id"]] = chunk
                doc_id = str(chunk["document_id"])
                doc = self._docs.setdefault(doc_id, {"doc_id": doc_id, "doc_name": chunk["document_name"], "count": 0})
                doc["count"] += 1
                known = chunk
            out.append(dict(known))
        return out

    def __len__(self) -> int:
        return len(self._chunks)

    def chunk(self, citation_id: int) -> dict[str, Any] | None:
        for chunk in self._chunks.values():
            if chunk["citation_id"] == citation_id:
                return dict(chunk)
        return None

    def snapshot(self, since: int = 0) -> dict[str, list[dict[str, Any]]]:
        """`{chunks: [...], doc_aggs: [...]}` ordered by citation id, as MessageEnd carries it.

        `since`: only chunks with citation_id >= since (so a MessageEnd can carry what is new rather
        than the whole bucket, fix list §7 item 21); doc_aggs then count those chunks only.
        """
        chunks = [dict(c) for c in self._chunks.values() if c["citation_id"] >= since]
        if since <= 0:
            return {"chunks": chunks, "doc_aggs": [dict(d) for d in self._docs.values()]}
        return {"chunks": chunks, "doc_aggs": doc_aggs_of(chunks)}


def _metadata_lines(metadata: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, value in metadata.items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, ensure_ascii=False, sort_keys=True)
        lines.append(f"├── {key}: {value}")
    return lines


def format_knowledge(chunks: Iterable[Mapping[str, Any]], max_chars: int = 12_000) -> str:
    """The knowledge block shown to the model: one entry per chunk, headed by its citation id.

    Entries are added whole until `max_chars` would be exceeded (the first one is always included,
    truncated if it alone is too long), so the model never sees a citation id without its text.
    """
    blocks: list[str] = []
    used = 0
    for position, chunk in enumerate(chunks):
        cid = chunk.get("citation_id", position)
        lines = [f"ID: {cid}", f"├── Title: {chunk.get('document_name') or ''}"]
        if chunk.get("url"):
            lines.append(f"├── URL: {chunk['url']}")
        lines.extend(_metadata_lines(chunk.get("document_metadata") or {}))
        lines.append("└── Content:")
        lines.append(str(chunk.get("content") or ""))
        block = "\n".join(lines)
        if blocks and used + len(block) > max_chars:
            break
        if not blocks and len(block) > max_chars:
            block = block[:max_chars]
        blocks.append(block)
        used += len(block) + 2
    return "\n\n".join(blocks)
