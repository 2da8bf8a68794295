"""UserFillUp ("await response"): pauses the run for a form answer (spec §2.8, §5.1).

The node pauses when a required field has no answer. A later RunCanvas on the same session carrying
`inputs` resumes the run (on any replica): the answers become this node's outputs and inputs.

`query_field` (ours; set by the G0 Answer migration) names a field that the user's chat message
(the RunCanvas `query`) answers when `inputs` does not; the answer is also written to `sys.query`,
so the nodes after it see the message of this turn.

As the entry of a conversation loop (a Conversation pass, dsl/conversation.py) the node takes this
run's message only in the first turn that runs in this run, and pauses in the next turn: each run
advances the conversation by one user message.
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome
from services.orchestrator.core.components.containers import TURN_RUN, conversation_frame
from services.orchestrator.core.components.forms import answer_value, field_schema, form_fields, satisfied
from services.orchestrator.core.components.registry import register


@register
class UserFillUp(Component):
    type_name = "UserFillUp"
    default_timeout_s = None
    static_outputs = ("tips",)
    unsupported_params = {"layout_recognize": "files are read as text; RAGFlow's layout recognizers (OCR, DeepDOC) "
                                              "are not available, so leave layout_recognize empty"}

    @classmethod
    def dynamic_outputs(cls, params: dict[str, Any]) -> list[str]:
        return list(form_fields(params))

    def thoughts(self, ctx) -> str:
        return "Waiting for your input..."

    def _answers(self, ctx, conversation) -> dict[str, Any]:
        if conversation is not None and not conversation.item["message_pending"]:
            return {}  # this run's message went to an earlier turn: wait for the next one
        answers: dict[str, Any] = {}
        resumed = self.id in (ctx.spec.get("resume_pending") or [])
        if resumed:
            answers = dict(ctx.spec.get("resume_inputs") or {})
        field = self.param("query_field", "")
        query = str(ctx.spec.get("query") or "")
        if field and field not in answers and query and (resumed or conversation is not None):
            answers[field] = query
        return answers

    async def invoke(self, ctx) -> Outcome:
        fields = form_fields(self.params)
        conversation = conversation_frame(ctx)
        answers = self._answers(ctx, conversation)
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
            pause: dict[str, Any] = {"inputs": missing, "tips": tips}
            if conversation is not None:
                pause["conversation"] = True  # the turn's answer was shown: it belongs to the session history
            return Outcome(outputs=outputs, inputs=inputs, pause=pause)
        field = self.param("query_field", "")
        if field and outputs.get(field) is not None:
            ctx.write("sys.query", str(outputs[field]))
        if conversation is not None:
            outputs[TURN_RUN] = str(ctx.spec.get("run_id", ""))
        return Outcome(outputs=outputs, inputs=inputs)
