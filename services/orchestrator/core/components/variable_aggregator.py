"""VariableAggregator: per group, the first referenced value that is set (spec §5.14).

Fix (§7 item 23): only None and "" (unset) are skipped; 0 and False are real values.
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.refs import UnknownReferenceError


@register
class VariableAggregator(Component):
    type_name = "VariableAggregator"

    @classmethod
    def dynamic_outputs(cls, params: dict[str, Any]) -> list[str]:
        groups = params.get("groups")
        return [str(g["group_name"]) for g in groups if isinstance(g, dict) and g.get("group_name")] \
            if isinstance(groups, list) else []
    default_timeout_s = 10.0

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        groups = params.get("groups")
        if not isinstance(groups, list) or not groups:
            return [("groups", "VariableAggregator needs at least one group")]
        problems: list[Problem] = []
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or not group.get("group_name"):
                problems.append((f"groups[{i}].group_name", "each group needs a name"))
            elif not group.get("variables") or not isinstance(group["variables"], list):
                problems.append((f"groups[{i}].variables", "each group needs a list of at least one variable"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        outputs: dict[str, Any] = {}
        for group in self.param("groups", []):
            chosen = None
            for variable in group.get("variables", []):
                ref = variable.get("value") if isinstance(variable, dict) else variable
                try:
                    value = ctx.resolve(ref)
                except UnknownReferenceError:
                    continue
                if value is not None and value != "":
                    chosen = value
                    break
            outputs[group["group_name"]] = chosen
        return Outcome(outputs=outputs)
