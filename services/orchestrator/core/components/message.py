"""Message: renders a template, streaming upstream LLM output as typed events (spec §4.3, §5.3).

Segments are emitted in template order. A reference to a producer that is streaming (an LLM whose
stream channel is open) forwards its chunks live: text → MessageDelta, reasoning → ThinkStart /
ThinkDelta / ThinkEnd. Other references are stringified with the one rule (core/render.py).
The variant among several `content` templates is chosen with the run's seeded RNG (§7 item 27).
"""

from __future__ import annotations

import re
from typing import Any

from services.orchestrator.core import events as ev
from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.jinja_sandbox import render_jinja
from services.orchestrator.core.refs import Ref, tokenize
from services.orchestrator.core.render import stringify
from services.orchestrator.core.values import parse_json

_DOWNLOAD_KEYS = ("doc_id", "filename", "mime_type")
# Text shaped like a component reference that the tokenizer does not take (e.g. `{iteration:0@generate:1}`:
# a colon in the field), so it would reach the user as written.
_LITERAL_REF = re.compile(r"\{\s*([A-Za-z0-9_:\-]+@[^{}\s\"']+)\s*\}")


def as_download(value: Any) -> list[dict[str, Any]] | None:
    """A DocGenerator-style download descriptor (dict, list of dicts, or their JSON), else None."""
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        try:
            value = parse_json(value)
        except ValueError:
            return None
    if isinstance(value, dict) and all(k in value for k in _DOWNLOAD_KEYS):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) and all(k in v for k in _DOWNLOAD_KEYS) for v in value):
        return value
    return None


def content_variants(params: dict[str, Any]) -> list[str]:
    content = params.get("content")
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [c if isinstance(c, str) else stringify(c) for c in content if c not in (None, "")]
    return []


@register
class Message(Component):
    type_name = "Message"
    static_outputs = ("content", "downloads")
    unsupported_params = {
        "output_format": "converting the answer into a file (markdown, html, pdf, docx, xlsx attachment) is not "
                         "supported yet; add a DocGenerator node after the Message",
        "auto_play": "text-to-speech is not available in this runtime",
        "memory_ids": "saving answers to RAGFlow memories is not available in this runtime",
    }
    default_timeout_s = 600.0

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        return [] if content_variants(params) else [("content", "Message needs at least one non-empty content template")]

    async def invoke(self, ctx) -> Outcome:
        variants = content_variants(self.params)
        template = variants[0] if len(variants) == 1 else ctx.rng().choice(variants)
        streaming = bool(self.param("stream", True)) and "{%" not in template
        text_parts: list[str] = []
        downloads: list[dict[str, Any]] = []
        buffered: list[str] = []

        def emit_text(piece: str) -> None:
            if not piece:
                return
            text_parts.append(piece)
            if streaming:
                ctx.emit(ev.MESSAGE_DELTA, {"component_id": self.id, "content": piece})
            else:
                buffered.append(piece)

        resolver = ctx.resolver
        unresolved: list[str] = []
        literal: list[str] = []
        for token in tokenize(template):
            if isinstance(token, str):
                literal.extend(match.group(1) for match in _LITERAL_REF.finditer(token))
                emit_text(token)
                continue
            stream = self._live_stream(ctx, token)
            if stream is not None:
                await self._forward(ctx, stream, emit_text, streaming)
                downloads.extend(d for d in stream.downloads if d not in downloads)
                continue
            value = resolver.value_of(token)
            if value is None:
                unresolved.append(token.expr)
            produced = self._producer_downloads(ctx, token)
            downloads.extend(d for d in produced if d not in downloads)
            found = as_download(value)
            if found is not None and not self.param("include_download_info_in_content", False):
                downloads.extend(found)
                continue
            emit_text(stringify(value))
        text = "".join(text_parts)
        if not streaming:
            if "{%" in template:
                text = await ctx.run_blocking(render_jinja, text)
            if text:
                ctx.emit(ev.MESSAGE_DELTA, {"component_id": self.id, "content": text})
        ctx.state.answers.append(text)
        self._warn(ctx, unresolved, literal)
        end: dict[str, Any] = {"component_id": self.id, "content": text}
        if downloads:
            end["downloads"] = downloads
        if self.params.get("status"):
            end["status"] = str(self.params["status"])
        reference = ctx.state.new_references()
        if reference:
            end["reference"] = reference
        ctx.emit(ev.MESSAGE_END, end)
        return Outcome(outputs={"content": text, "downloads": downloads}, inputs={"template": template})

    def _warn(self, ctx, unresolved: list[str], literal: list[str]) -> None:
        """The answer is shown anyway, but not silently: each kind of reference that did not give text
        is a warning event naming the references."""
        if unresolved:
            names = list(dict.fromkeys(unresolved))
            ctx.emit(ev.WARNING, {"component_id": self.id, "code": "UNRESOLVED_REFERENCE", "references": names,
                                  "message": "resolved to nothing and left an empty place in the answer: "
                                             + ", ".join("{" + n + "}" for n in names)})
        if literal:
            names = list(dict.fromkeys(literal))
            ctx.emit(ev.WARNING, {"component_id": self.id, "code": "LITERAL_REFERENCE", "references": names,
                                  "message": "not a reference the runtime can read, shown as written: "
                                             + ", ".join("{" + n + "}" for n in names)})

    @staticmethod
    def _live_stream(ctx, token: Ref):
        if token.is_global or token.root in ("item", "index", "result") or token.path[:1] != ("content",):
            return None
        return ctx.stream_of(token.root)

    @staticmethod
    def _producer_downloads(ctx, token: Ref) -> list[dict[str, Any]]:
        """Files a referenced node made (CodeExec artifacts, also through an Agent's tools) travel
        with any of its outputs into MessageEnd.downloads."""
        if token.is_global or token.root in ("item", "index", "result"):
            return []
        outputs = ctx.state.output_of(token.root) or {}
        return as_download(outputs.get("downloads")) or []

    async def _forward(self, ctx, stream, emit_text, streaming: bool) -> None:
        thinking = False
        async for kind, text in stream.chunks():
            if kind == "text":
                emit_text(text)
            elif not streaming:
                continue  # a rendered (non-streamed) message carries no reasoning
            elif kind == "think_start":
                thinking = True
                ctx.emit(ev.THINK_START, {"component_id": self.id})
            elif kind == "think_delta":
                ctx.emit(ev.THINK_DELTA, {"component_id": self.id, "content": text})
            elif kind == "think_end":
                thinking = False
                ctx.emit(ev.THINK_END, {"component_id": self.id, "truncated": False})
        if thinking:
            ctx.emit(ev.THINK_END, {"component_id": self.id, "truncated": True})
        if stream.error:
            raise NodeError(f"upstream {stream.producer_id} failed: {stream.error}", reason="UPSTREAM_FAILED")

