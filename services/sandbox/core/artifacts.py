"""Artifact policy: which files in the output directory come back, and with what MIME type.

The backends read files without following symlinks; this module only decides names and types.
"""

from __future__ import annotations

import mimetypes

ALLOWED_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "pdf", "csv", "json", "html", "txt", "md"})

_EXTRA_TYPES = {"md": "text/markdown", "csv": "text/csv", "json": "application/json", "svg": "image/svg+xml"}

OUTPUT_DIR_NAME = "artifacts"
"""Relative to the job's working directory (RAGFlow writes to `<job>/artifacts/`)."""


def acceptable_name(name: str) -> bool:
    """A plain file name: no path, no dot file, no control characters, valid UTF-8, an allowed extension.

    Names come from os.listdir / tar headers, which turn bytes that are not UTF-8 into lone surrogates;
    protobuf strings cannot carry those (the whole RPC would fail), so such files are skipped."""
    if not name or len(name) > 200 or name.startswith(".") or "/" in name or "\\" in name or ".." in name:
        return False
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    _, dot, extension = name.rpartition(".")
    return bool(dot) and extension.lower() in ALLOWED_EXTENSIONS


def mime_type(name: str, head: bytes) -> str:
    """Trust the content for images and PDFs (magic bytes), the extension for text formats."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    extension = name.rpartition(".")[2].lower()
    if extension in {"png", "jpg", "jpeg", "gif", "pdf"}:
        return "application/octet-stream"  # claims to be an image but is not one
    return _EXTRA_TYPES.get(extension) or mimetypes.guess_type(name)[0] or "application/octet-stream"
