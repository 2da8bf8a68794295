"""UserFillUp ("await response"): pauses the run for a form answer (spec §2.8, §5.1).

The node pauses when a required field has no answer. A later RunCanvas on the same session carrying
`inputs` resumes the run (on any replica): the answers become this node's outputs and inputs.
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome
from services.orchestrator.core.components.forms import answer_value, field_schema, form_fields, satisfied
from services.orchestrator.core.components.registry import register


@register
class UserFillUp(Component):
    type_name = "UserFillUp"
    default_timeout_s = None

    def thoughts(self, ctx) -> str:
        return "Waiting for your input..."

    async def invoke(self, ctx) -> Outcome:
        fields = form_fields(self.params)
        answers: dict[str, Any] = {}
        if self.id in (ctx.spec.get("resume_pending") or []):
            answers = dict(ctx.spec.get("resume_inputs") or {})
        tips = ctx.render(str(self.param("tips", "Please fill up the form"))) if self.param("enable_tips", True) else ""
        outputs: dict[str, Any] = {"tips": tips}
        inputs: dict[str, Any] = {}
        missing: dict[str, Any] = {}
        for name, field in fields.items():
            value = answer_value(field, answers[name]) if name in answers else None
            if not satisfied(field, value):
                missing[name] = field_schema(name, field)
            outputs[name] = value
            inputs[name] = value
        if missing:
            return Outcome(outputs=outputs, inputs=inputs, pause={"inputs": missing, "tips": tips})
        return Outcome(outputs=outputs, inputs=inputs)
