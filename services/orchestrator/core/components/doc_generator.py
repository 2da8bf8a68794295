"""DocGenerator: renders content into a downloadable document (spec §5.16).

Formats produced here: markdown, txt and html (pdf/docx need converters this service does not ship;
they fail with a clear error). The file is returned inline as base64 in `download`, the shape a
downstream Message turns into MessageEnd.downloads.
"""

from __future__ import annotations

import base64
import html
import json
import re
import time
import uuid
from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError

FORMATS = {"markdown": ("md", "text/markdown"), "txt": ("txt", "text/plain"), "html": ("html", "text/html"),
           "pdf": ("pdf", "application/pdf"), "docx": ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")}
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


@register
class DocGenerator(Component):
    type_name = "DocGenerator"
    static_outputs = ("doc_id", "filename", "mime_type", "size", "download")

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        if not params.get("content"):
            problems.append(("content", "DocGenerator needs content"))
        if str(params.get("output_format", "pdf")) not in FORMATS:
            problems.append(("output_format", f"output_format must be one of {', '.join(FORMATS)}"))
        return problems

    @classmethod
    def unsupported(cls, params: dict[str, Any]) -> list[Problem]:
        fmt = str(params.get("output_format", "pdf"))
        return [("output_format", f"{fmt} output is not supported yet; use markdown, txt or html")] if fmt in ("pdf", "docx") else []

    async def invoke(self, ctx) -> Outcome:
        fmt = str(self.param("output_format", "pdf"))
        if fmt in ("pdf", "docx"):
            raise NodeError(f"{fmt} output is not supported yet", reason="UNSUPPORTED_FORMAT")
        ext, mime = FORMATS[fmt]
        text = _THINK.sub("", ctx.render(str(self.param("content", "")))).strip()
        header, footer = str(self.param("header_text", "") or ""), str(self.param("footer_text", "") or "")
        if self.param("add_timestamp", True):
            footer = (footer + "\n" if footer else "") + time.strftime("Generated %Y-%m-%d %H:%M:%S")
        body = "\n\n".join(p for p in (header, text, footer) if p)
        if fmt == "html":
            body = "<html><body>" + "".join(f"<p>{html.escape(p)}</p>" for p in body.split("\n\n")) + "</body></html>"
        data = body.encode("utf-8")
        stem = _UNSAFE.sub("_", str(self.param("filename", "") or "document")).strip() or "document"
        filename = stem.rsplit(".", 1)[0] + "." + ext
        doc_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{ctx.spec.get('run_id', '')}:{self.id}:{ctx.scope}").hex
        download = {"doc_id": doc_id, "filename": filename, "mime_type": mime, "size": len(data),
                    "base64": base64.b64encode(data).decode(), "preview_url": "",
                    "include_download_info_in_content": bool(self.param("include_download_info_in_content", False))}
        return Outcome(outputs={"doc_id": doc_id, "filename": filename, "mime_type": mime, "size": len(data),
                                "download": json.dumps(download)})
