"""The embedded knowledge base: documents and chunks in SQLite, searched with FTS5 BM25.

Ids are stable and unique:
- a document's id is derived from (dataset, source), so adding the same file again updates that
  document instead of duplicating it; an unchanged file is a no-op;
- a chunk's id is derived from (document id, chunk index, chunk text), so unchanged chunks keep
  their ids across re-adds and no two chunks share one (128-bit ids, no mod-500 folding).

Scores: FTS5 gives a BM25 rank; there are no vectors. `term_similarity` is the share of distinct
query terms the chunk contains, `vector_similarity` holds the BM25 score normalised to the best hit
of the query, and `similarity = w * term + (1 - w) * bm25_norm` with w = keywords_similarity_weight,
so RAGFlow's `similarity_threshold` and weight keep their meaning.

Blocking (sqlite3): callers run these methods in the tool thread pool. One connection, one lock.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.orchestrator.tools.citations import stable_id
from services.orchestrator.tools.config import EmbeddedKbSettings
from services.orchestrator.tools.errors import ToolInputError
from services.orchestrator.tools.kb.chunking import chunk_text
from services.orchestrator.tools.kb.loaders import LoadedDocument, load_file

logger = logging.getLogger(__name__)

TOOL = "Retrieval"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    chunk_count INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_dataset ON documents(dataset_id);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    dataset_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    content TEXT NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    content, content='chunks', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
END;
"""

_TERM = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by do does for from how i in is it of on or that the this to was what when where which who why with you your".split()
)


@dataclass(frozen=True)
class DocumentInfo:
    id: str
    dataset_id: str
    name: str
    source: str
    mime_type: str
    size: int
    chunk_count: int
    content_hash: str
    created_at: float
    updated_at: float
    status: str = ""  # set by add: "added", "updated" or "unchanged"; empty when listed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchHits:
    """Chunks (RAGFlow reference shape, best first), doc aggregates over all hits, and the hit count."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    doc_aggs: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0


def query_terms(query: str) -> list[str]:
    terms = list(dict.fromkeys(t.lower() for t in _TERM.findall(query)))
    meaningful = [t for t in terms if t not in _STOPWORDS]
    return meaningful or terms


class KnowledgeBase:
    """A SQLite FTS5 knowledge base at `settings.path` (created on first use)."""

    def __init__(self, settings: EmbeddedKbSettings):
        self.settings = settings
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.settings.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.settings.path, check_same_thread=False, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=5000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ToolInputError(TOOL, "kb", f"{self.settings.path} was written by a newer version (schema {version})")
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ---- writing -----------------------------------------------------------------------------

    def add_file(self, path: str | Path, *, dataset: str | None = None) -> DocumentInfo:
        resolved = Path(path).expanduser().resolve()
        return self.add_loaded(load_file(resolved), source=str(resolved), dataset=dataset)

    def add_loaded(self, loaded: LoadedDocument, *, source: str, dataset: str | None = None) -> DocumentInfo:
        return self.add_text(loaded.name, loaded.text, source=source, mime_type=loaded.mime_type, size=loaded.size, dataset=dataset)

    def add_text(
        self,
        name: str,
        text: str,
        *,
        source: str | None = None,
        mime_type: str = "text/plain",
        size: int | None = None,
        dataset: str | None = None,
    ) -> DocumentInfo:
        dataset_id = dataset or self.settings.dataset
        source = source or name
        doc_id = stable_id("document", dataset_id, source)
        content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
        pieces = chunk_text(text, self.settings.chunk_tokens, self.settings.chunk_overlap)
        now = time.time()
        with self._lock:
            db = self._db()
            existing = db.execute("SELECT * FROM documents WHERE id = ?", (doc_id,)).fetchone()
            if existing is not None and existing["content_hash"] == content_hash and existing["name"] == name:
                return _doc(existing, "unchanged")
            db.execute("BEGIN IMMEDIATE")
            committed = False
            try:
                db.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
                created = existing["created_at"] if existing is not None else now
                db.execute(
                    "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc_id, dataset_id, name, source, mime_type, size if size is not None else len(text.encode()),
                     content_hash, len(pieces), created, now),
                )
                db.executemany(
                    "INSERT INTO chunks (id, document_id, dataset_id, idx, content, start_offset, end_offset) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(stable_id("chunk", doc_id, str(p.index), p.content), doc_id, dataset_id, p.index, p.content, p.start, p.end) for p in pieces],
                )
                db.execute("COMMIT")
                committed = True
            finally:
                if not committed:
                    db.execute("ROLLBACK")
            row = db.execute("SELECT * FROM documents WHERE id = ?", (doc_id,)).fetchone()
        status = "updated" if existing is not None else "added"
        logger.info("kb: %s %s (%d chunks) in dataset %s", status, name, len(pieces), dataset_id)
        return _doc(row, status)

    def remove(self, document_id: str) -> bool:
        with self._lock:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
            removed = db.execute("DELETE FROM documents WHERE id = ?", (document_id,)).rowcount
            db.execute("COMMIT")
        return bool(removed)

    # ---- reading -----------------------------------------------------------------------------

    def list_documents(self, dataset: str | None = None) -> list[DocumentInfo]:
        with self._lock:
            db = self._db()
            if dataset:
                rows = db.execute("SELECT * FROM documents WHERE dataset_id = ? ORDER BY name, id", (dataset,)).fetchall()
            else:
                rows = db.execute("SELECT * FROM documents ORDER BY dataset_id, name, id").fetchall()
        return [_doc(r) for r in rows]

    def datasets(self) -> list[str]:
        with self._lock:
            rows = self._db().execute("SELECT DISTINCT dataset_id FROM documents ORDER BY dataset_id").fetchall()
        return [r[0] for r in rows]

    def chunks_of(self, document_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db().execute(
                "SELECT id, idx, content, start_offset, end_offset FROM chunks WHERE document_id = ? ORDER BY idx", (document_id,)
            ).fetchall()
        return [dict(r) for r in rows]

    def search(
        self,
        query: str,
        *,
        dataset_ids: Sequence[str] | None = None,
        document_ids: Sequence[str] | None = None,
        top_n: int = 8,
        top_k: int = 1024,
        similarity_threshold: float = 0.2,
        keywords_similarity_weight: float = 0.5,
    ) -> SearchHits:
        terms = query_terms(query)
        if not terms:
            return SearchHits()
        match = " OR ".join(f'"{t}"' for t in terms)
        sql = [
            "SELECT c.id, c.document_id, c.dataset_id, c.idx, c.content, c.start_offset, c.end_offset,",
            "       d.name, d.source, d.mime_type, bm25(chunks_fts) AS rank",
            "FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid JOIN documents d ON d.id = c.document_id",
            "WHERE chunks_fts MATCH ?",
        ]
        args: list[Any] = [match]
        for column, values in (("c.dataset_id", dataset_ids), ("c.document_id", document_ids)):
            if values:
                sql.append(f"AND {column} IN ({','.join('?' * len(values))})")
                args.extend(values)
        sql.append("ORDER BY rank, c.id LIMIT ?")
        args.append(max(1, int(top_k)))
        with self._lock:
            rows = self._db().execute("\n".join(sql), args).fetchall()
        return _rank(rows, terms, top_n, similarity_threshold, keywords_similarity_weight)


def _doc(row: sqlite3.Row, status: str = "") -> DocumentInfo:
    return DocumentInfo(
        id=row["id"], dataset_id=row["dataset_id"], name=row["name"], source=row["source"], mime_type=row["mime_type"],
        size=row["size"], chunk_count=row["chunk_count"], content_hash=row["content_hash"],
        created_at=row["created_at"], updated_at=row["updated_at"], status=status,
    )


def _rank(rows: Iterable[sqlite3.Row], terms: list[str], top_n: int, threshold: float, weight: float) -> SearchHits:
    rows = list(rows)
    if not rows:
        return SearchHits()
    best = max(-r["rank"] for r in rows) or 1.0
    weight = min(max(float(weight), 0.0), 1.0)
    scored = []
    for r in rows:
        present = set(t.lower() for t in _TERM.findall(r["content"]))
        term_sim = sum(1 for t in terms if t in present) / len(terms)
        bm25_sim = max(-r["rank"], 0.0) / best
        similarity = weight * term_sim + (1 - weight) * bm25_sim
        if similarity < threshold:
            continue
        scored.append((similarity, term_sim, bm25_sim, r))
    scored.sort(key=lambda s: (-s[0], -s[2], s[3]["id"]))
    aggs: dict[str, dict[str, Any]] = {}
    for _, _, _, r in scored:
        agg = aggs.setdefault(r["document_id"], {"doc_id": r["document_id"], "doc_name": r["name"], "count": 0})
        agg["count"] += 1
    chunks = [
        {
            "id": r["id"],
            "content": r["content"],
            "document_id": r["document_id"],
            "document_name": r["name"],
            "dataset_id": r["dataset_id"],
            "image_id": "",
            "positions": [[r["idx"], r["start_offset"], r["end_offset"]]],
            "url": None,
            "similarity": round(sim, 6),
            "vector_similarity": round(bm25_sim, 6),
            "term_similarity": round(term_sim, 6),
            "row_id": None,
            "doc_type": r["mime_type"],
            "document_metadata": {},
        }
        for sim, term_sim, bm25_sim, r in scored[: max(1, int(top_n))]
    ]
    return SearchHits(chunks=chunks, doc_aggs=list(aggs.values()), total=len(scored))
