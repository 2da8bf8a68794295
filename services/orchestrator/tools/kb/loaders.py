"""Turn files into plain text for the knowledge base: .txt, .md, .html, .json, .csv and .pdf.

The text loaders use only the standard library; PDF text comes from `pypdf` (the text layer only:
a scanned PDF yields no text). A missing `pypdf` is a clear error rather than garbage text.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from services.orchestrator.tools.errors import ToolInputError

TOOL = "Retrieval"
MAX_FILE_BYTES = 50 * 1024 * 1024

MIME_TYPES = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".json": "application/json",
    ".csv": "text/csv",
    ".pdf": "application/pdf",
}


@dataclass(frozen=True)
class LoadedDocument:
    name: str
    text: str
    mime_type: str
    size: int


class _TextExtractor(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "head"}
    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre", "table", "ul", "ol"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self._skip:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    parser = _TextExtractor()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.parts)
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    body = "\n\n".join(p for p in paragraphs if p)
    title = " ".join(parser.title.split())
    return f"{title}\n\n{body}" if title and not body.startswith(title) else body


def _json_lines(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict):
        return [line for k, v in value.items() for line in _json_lines(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            return [f"{prefix}: {', '.join(str(v) for v in value)}"]
        out: list[str] = []
        for i, v in enumerate(value):
            out.extend(_json_lines(v, f"{prefix}[{i}]"))
            out.append("")
        return out
    return [f"{prefix}: {value}" if prefix else str(value)]


def json_to_text(raw: str) -> str:
    return "\n".join(_json_lines(json.loads(raw))).strip()


def csv_to_text(raw: str) -> str:
    """One paragraph per row, `column: value; ...`, so each row stays searchable on its own."""
    rows = list(csv.reader(io.StringIO(raw)))
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    if not body:
        return "; ".join(header)
    return "\n\n".join("; ".join(f"{h}: {v}" for h, v in zip(header, row) if v != "") for row in body)


def pdf_to_text(data: bytes, name: str) -> str:
    try:
        import pypdf  # imported lazily: only PDFs need it
    except ImportError:
        raise ToolInputError(TOOL, "files", f"{name}: PDF support needs the 'pypdf' package") from None
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except pypdf.errors.PdfReadError as exc:
        raise ToolInputError(TOOL, "files", f"{name}: not a readable PDF ({exc})") from None


def load_file(path: Path) -> LoadedDocument:
    suffix = path.suffix.lower()
    mime = MIME_TYPES.get(suffix)
    if mime is None:
        raise ToolInputError(TOOL, "files", f"{path.name}: unsupported file type (use {', '.join(sorted(MIME_TYPES))})")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ToolInputError(TOOL, "files", f"{path.name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ToolInputError(TOOL, "files", f"{path}: no such file") from None
    except IsADirectoryError:
        raise ToolInputError(TOOL, "files", f"{path}: is a directory") from None
    except PermissionError:
        raise ToolInputError(TOOL, "files", f"{path}: permission denied") from None
    if suffix == ".pdf":
        return LoadedDocument(path.name, pdf_to_text(data, path.name), mime, size)
    if b"\x00" in data:
        raise ToolInputError(TOOL, "files", f"{path.name}: looks binary, not {suffix} text")
    raw = data.decode("utf-8-sig", errors="replace")
    try:
        if suffix in (".html", ".htm"):
            text = html_to_text(raw)
        elif suffix == ".json":
            text = json_to_text(raw)
        elif suffix == ".csv":
            text = csv_to_text(raw)
        else:
            text = raw
    except (ValueError, csv.Error) as exc:
        raise ToolInputError(TOOL, "files", f"{path.name}: cannot parse ({exc})") from None
    return LoadedDocument(path.name, text, mime, size)
