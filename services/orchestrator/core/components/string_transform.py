"""StringTransform: split a referenced string, or merge a template (spec §5.11)."""

from __future__ import annotations

import re
from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.jinja_sandbox import render_jinja


@register
class StringTransform(Component):
    type_name = "StringTransform"
    static_outputs = ("result",)

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        method = params.get("method", "split")
        if method not in ("split", "merge"):
            problems.append(("method", "method must be 'split' or 'merge'"))
        delimiters = params.get("delimiters", [","])
        if not isinstance(delimiters, list) or not delimiters:
            problems.append(("delimiters", "at least one delimiter is required"))
        if method == "split" and not params.get("split_ref"):
            problems.append(("split_ref", "split needs split_ref"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        delimiters = [str(d) for d in self.param("delimiters", [","]) or [] if d not in (None, "")] or [","]
        if self.param("method", "split") == "split":
            value = ctx.resolve(self.param("split_ref"))
            if value is None:  # a reference to nothing (an unset output): nothing to split
                value = ""
            if not isinstance(value, str):
                raise NodeError(f"split_ref must be a string, got {type(value).__name__}", reason="NOT_A_STRING")
            pattern = "|".join(re.escape(d) for d in sorted(delimiters, key=len, reverse=True))
            parts = [p for p in re.split(pattern, value) if p]
            return Outcome(outputs={"result": parts}, inputs={"split_ref": value})
        script = str(self.param("script", ""))
        merged = ctx.render(script, joiner=delimiters[0])
        if "{%" in script:  # Jinja-like script: render the control structures after the references
            merged = await ctx.run_blocking(render_jinja, merged)
        return Outcome(outputs={"result": merged}, inputs={"script": script})
