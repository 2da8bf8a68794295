"""Switch: the first satisfied condition chooses the branch; else `end_cpn_ids` (spec §5.5)."""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.operators import compare
from services.orchestrator.core.components.registry import register


def _ids(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, (str, int)) and str(v)]  # a null id is no target


@register
class Switch(Component):
    type_name = "Switch"
    static_outputs = ("next",)
    default_timeout_s = 10.0

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        conditions = params.get("conditions")
        if not isinstance(conditions, list) or not conditions:
            problems.append(("conditions", "Switch needs at least one condition"))
        for i, cond in enumerate(conditions if isinstance(conditions, list) else []):
            if not isinstance(cond, dict) or not _ids(cond.get("to")):
                problems.append((f"conditions[{i}].to", "each condition needs a target"))
            elif str(cond.get("logical_operator") or "and").lower() not in ("and", "or"):
                problems.append((f"conditions[{i}].logical_operator", "must be 'and' or 'or'"))
            items = cond.get("items") if isinstance(cond, dict) else None
            for j, item in enumerate(items if isinstance(items, list) else []):
                where = f"conditions[{i}].items[{j}]"
                if not isinstance(item, dict):
                    problems.append((where, "each item needs cpn_id, operator and value (got null)" if item is None
                                     else "each item must be an object with cpn_id, operator and value"))
                elif item.get("cpn_id") and not str(item.get("operator") or "").strip():
                    problems.append((f"{where}.operator", "each item needs an operator"))
        if not _ids(params.get("end_cpn_ids")):
            problems.append(("end_cpn_ids", "Switch needs an else branch (end_cpn_ids)"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        inputs: dict[str, Any] = {}
        for index, cond in enumerate(self.param("conditions", [])):
            logic = str(cond.get("logical_operator") or "and").lower()
            results: list[bool] = []
            for item in cond.get("items", []) or []:
                if not isinstance(item, dict) or not item.get("cpn_id"):
                    continue
                value = ctx.resolve(item["cpn_id"])
                inputs[str(item["cpn_id"])] = value
                target = ctx.resolve(item.get("value", ""))
                results.append(compare(value, item.get("operator", ""), target))
                if logic == "or" and results[-1]:
                    break
            matched = any(results) if logic == "or" else bool(results) and all(results)
            if matched:
                return self._route(ctx, _ids(cond.get("to")), f"Case {index + 1}", inputs)
        return self._route(ctx, _ids(self.param("end_cpn_ids", [])), "else", inputs)

    def _route(self, ctx, targets: list[str], branch: str, inputs: dict[str, Any]) -> Outcome:
        nodes = ctx.state.canvas.nodes
        names = [nodes[t].name or t for t in targets if t in nodes]
        return Outcome(outputs={"_next": targets, "next": names}, inputs=inputs, next=targets, branch=branch)
