"""Begin: the entry node. Form inputs, conversational/task/webhook modes (spec §5.2)."""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.forms import answer_value, form_fields, satisfied
from services.orchestrator.core.components.registry import register

MODES = ("conversational", "task", "webhook")


def given_inputs(fields: dict[str, dict[str, Any]], inputs: Any, query: Any) -> dict[str, Any]:
    """The answers Begin takes (spec §5.2): the run's `inputs`; without them and with a query, the
    query's matching keys (a dict query) or, for a form of exactly one field, the query itself."""
    given: dict[str, Any] = dict(inputs) if isinstance(inputs, dict) else {}
    if not given and fields:
        if isinstance(query, dict):
            given = {k: v for k, v in query.items() if k in fields}
        elif query and len(fields) == 1:
            given = {next(iter(fields)): query}
    return given


def required(field: dict[str, Any]) -> bool:
    """RAGFlow's form entries say `optional: false` for a required field. An entry without the key
    (or with null) is not enforced: only what the DSL asks for explicitly is required."""
    optional = field.get("optional")
    return optional is False or (isinstance(optional, str) and optional.strip().lower() == "false")


def _answered(field: dict[str, Any], value: Any) -> bool:
    if value is None or (isinstance(value, str) and not value.strip()):
        return False  # null or blank text is no answer to a required field
    return satisfied(field, value)


def missing_required_inputs(params: dict[str, Any], inputs: Any, query: Any) -> list[tuple[str, str]]:
    """(field name, description) of every required Begin input that neither the run's inputs, the
    query shortcut nor the field's default `value` answers, in form order."""
    fields = form_fields(params)
    given = given_inputs(fields, inputs, query)
    missing: list[tuple[str, str]] = []
    for name, field in fields.items():
        if not required(field):
            continue
        value = answer_value(field, given[name]) if name in given else None
        if not _answered(field, value) and not _answered(field, field.get("value")):
            label = str(field.get("name") or name)
            kind = str(field.get("type") or "line")
            missing.append((name, f"the Begin input '{label}' ({kind}) is required"))
    return missing


@register
class Begin(Component):
    type_name = "Begin"
    default_timeout_s = None
    unsupported_params = {"layout_recognize": "files are read as text; RAGFlow's layout recognizers (OCR, DeepDOC) "
                                              "are not available, so leave layout_recognize empty"}

    @classmethod
    def output_names(cls, params: dict[str, Any]) -> set[str] | None:
        if str(params.get("mode") or "").lower() == "webhook":
            return None  # the payload's keys become outputs
        return super().output_names(params)

    @classmethod
    def dynamic_outputs(cls, params: dict[str, Any]) -> list[str]:
        return list(form_fields(params))

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        mode = str(params.get("mode") or "conversational").lower()
        return [] if mode in MODES else [("mode", f"unknown mode '{params.get('mode')}', expected one of {', '.join(MODES)}")]

    async def invoke(self, ctx) -> Outcome:
        fields = form_fields(self.params)
        given = given_inputs(fields, ctx.spec.get("inputs"), ctx.globals.get("sys.query"))
        outputs: dict[str, Any] = {}
        inputs: dict[str, Any] = {}
        for name, field in fields.items():
            value = answer_value(field, given[name]) if name in given else None
            if value is None:  # not answered, or answered with null: the form's default
                value = field.get("value")
            outputs[name] = value
            inputs[name] = value
        payload = ctx.spec.get("webhook_payload")
        if str(self.param("mode", "")).lower() == "webhook" and isinstance(payload, dict):
            inputs["request"] = payload.get("input")
            outputs.update({k: v for k, v in payload.items() if k != "input"})
        for name, value in given.items():  # extra inputs stay available as outputs of begin
            outputs.setdefault(name, answer_value({}, value))
        return Outcome(outputs=outputs, inputs=inputs)
