"""Begin: the entry node. Form inputs, conversational/task/webhook modes (spec §5.2)."""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.forms import answer_value, form_fields
from services.orchestrator.core.components.registry import register

MODES = ("conversational", "task", "webhook")


@register
class Begin(Component):
    type_name = "Begin"
    default_timeout_s = None

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        mode = str(params.get("mode") or "conversational").lower()
        return [] if mode in MODES else [("mode", f"unknown mode '{params.get('mode')}', expected one of {', '.join(MODES)}")]

    async def invoke(self, ctx) -> Outcome:
        fields = form_fields(self.params)
        given: dict[str, Any] = dict(ctx.spec.get("inputs") or {})
        if not given and fields:
            query = ctx.globals.get("sys.query")
            if isinstance(query, dict):
                given = {k: v for k, v in query.items() if k in fields}
            elif query and len(fields) == 1:
                given = {next(iter(fields)): query}
        outputs: dict[str, Any] = {}
        inputs: dict[str, Any] = {}
        for name, field in fields.items():
            value = answer_value(field, given[name]) if name in given else field.get("value")
            outputs[name] = value
            inputs[name] = value
        payload = ctx.spec.get("webhook_payload")
        if str(self.param("mode", "")).lower() == "webhook" and isinstance(payload, dict):
            inputs["request"] = payload.get("input")
            outputs.update({k: v for k, v in payload.items() if k != "input"})
        for name, value in given.items():  # extra inputs stay available as outputs of begin
            outputs.setdefault(name, answer_value({}, value))
        return Outcome(outputs=outputs, inputs=inputs)
