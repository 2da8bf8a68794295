"""VariableAssigner: writes globals or component outputs (spec §5.15).

Fix (§7 item 23): type errors fail the node (NodeError) instead of writing "ERROR:..." strings.
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.refs import whole_ref

OPERATORS = ("overwrite", "clear", "set", "append", "extend", "remove_first", "remove_last", "+=", "-=", "*=", "/=")
NEEDS_PARAMETER = ("extend", "+=", "-=", "*=", "/=")  # a null parameter cannot work for these


def _empty_like(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return 0
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    if isinstance(value, str):
        return ""
    return None


def _number(value: Any, what: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise NodeError(f"{what} is not a number: {value!r}", reason="NOT_A_NUMBER") from None
        return int(number) if number.is_integer() else number
    return value


@register
class VariableAssigner(Component):
    type_name = "VariableAssigner"
    default_timeout_s = 10.0

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        variables = params.get("variables")
        if variables and not isinstance(variables, list):
            return [("variables", "must be a list of {variable, operator, parameter}")]
        for i, item in enumerate(variables or []):
            if not isinstance(item, dict) or not item.get("variable"):
                problems.append((f"variables[{i}].variable", "missing the variable to assign"))
            elif item.get("operator") in (None, ""):
                problems.append((f"variables[{i}].operator", f"needs an operator, one of {', '.join(OPERATORS)}"))
            elif item.get("operator") not in OPERATORS:
                problems.append((f"variables[{i}].operator", f"unknown operator '{item.get('operator')}'"))
            elif item.get("operator") in NEEDS_PARAMETER and item.get("parameter") in (None, ""):
                problems.append((f"variables[{i}].parameter", f"operator '{item['operator']}' needs a parameter "
                                 f"({'a list' if item['operator'] == 'extend' else 'a number'} or a reference to one)"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        inputs: dict[str, Any] = {}
        for item in self.param("variables", []):
            target = str(item["variable"]).strip().strip("{}").strip()
            current = ctx.resolve(target)
            new = self._apply(ctx, item.get("operator"), current, item.get("parameter"))
            ctx.write(target, new)
            inputs[target] = new
        return Outcome(outputs={}, inputs=inputs)

    def _apply(self, ctx, op: str, current: Any, parameter: Any) -> Any:
        if op == "overwrite":
            return ctx.resolve(parameter)
        if op == "clear":
            return _empty_like(current)
        if op == "set":
            if isinstance(current, str) or current is None:
                return ctx.render(parameter) if isinstance(parameter, str) else parameter
            return parameter
        if op in ("append", "extend"):
            if current is None:
                current = []
            if not isinstance(current, list):
                raise NodeError(f"{op}: the variable is not a list", reason="VARIABLE_NOT_LIST")
            value = ctx.resolve(parameter) if whole_ref(parameter) else parameter
            if op == "append":
                if current and value is not None and type(value) is not type(current[0]):
                    raise NodeError("append: the value's type differs from the list's elements", reason="ELEMENT_TYPE_MISMATCH")
                return [*current, value]
            if not isinstance(value, list):
                raise NodeError("extend: the parameter is not a list", reason="PARAMETER_NOT_LIST")
            return [*current, *value]
        if op in ("remove_first", "remove_last"):
            if not isinstance(current, list):
                raise NodeError(f"{op}: the variable is not a list", reason="VARIABLE_NOT_LIST")
            return current[1:] if op == "remove_first" else current[:-1]
        left = _number(current if current is not None else 0, "the variable")
        right = _number(ctx.resolve(parameter) if whole_ref(parameter) else parameter, "the parameter")
        if op == "+=":
            return left + right
        if op == "-=":
            return left - right
        if op == "*=":
            return left * right
        if right == 0:
            raise NodeError("division by zero", reason="DIVIDE_BY_ZERO")
        result = left / right
        return int(result) if isinstance(result, float) and result.is_integer() else result
