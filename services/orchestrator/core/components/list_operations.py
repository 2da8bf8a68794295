"""ListOperations: nth, head, tail, filter, sort, drop_duplicates (spec §5.13)."""

from __future__ import annotations

import json
from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.operators import compare
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError

OPERATIONS = ("nth", "head", "tail", "filter", "sort", "drop_duplicates")


def normalise_operation(value: Any) -> str:
    op = str(value or "").strip()
    if op.lower() == "topn":  # §1.5 B8
        return "head"
    return op or "nth"


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@register
class ListOperations(Component):
    type_name = "ListOperations"
    static_outputs = ("result", "first", "last")

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        if not params.get("query"):
            problems.append(("query", "ListOperations needs a query (a reference to a list)"))
        if normalise_operation(params.get("operations")) not in OPERATIONS:
            problems.append(("operations", f"unknown operation '{params.get('operations')}'"))
        if params.get("filter") is not None and not isinstance(params["filter"], dict):
            problems.append(("filter", "filter must be an object {operator, value}"))
        try:
            int(params.get("n") or 0)
        except (TypeError, ValueError, OverflowError):
            problems.append(("n", f"n must be a whole number, got {params.get('n')!r}"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        items = ctx.resolve(self.param("query"))
        if items is None:  # a reference to nothing (an unset output): an empty list
            items = []
        if not isinstance(items, list):
            raise NodeError(f"query must resolve to a list, got {type(items).__name__}", reason="NOT_A_LIST")
        op = normalise_operation(self.param("operations"))
        strict = _truthy(self.param("strict", False))
        n = int(self.param("n", 1) or 0)
        if op == "nth":
            index = n - 1 if n > 0 else len(items) + n
            if n == 0 or not 0 <= index < len(items):
                if strict:
                    raise NodeError(f"nth: {n} is out of range for {len(items)} items", reason="OUT_OF_RANGE")
                result: list[Any] = []
            else:
                result = [items[index]]
        elif op in ("head", "tail"):
            if n < 1:
                if strict:
                    raise NodeError(f"{op}: n must be at least 1", reason="OUT_OF_RANGE")
                result = []
            else:
                result = items[:n] if op == "head" else items[-n:]
        elif op == "filter":
            rule = self.param("filter", {}) or {}
            target = ctx.resolve(rule.get("value", ""))
            result = [i for i in items if compare(i if isinstance(i, str) else json.dumps(i, ensure_ascii=False), rule.get("operator") or "=", target)]
        elif op == "sort":
            reverse = str(self.param("sort_method", "asc")).lower() == "desc"
            keys = [k.strip() for k in str(self.param("sort_by", "") or "").split(",") if k.strip()]
            if keys:
                result = sorted(items, key=lambda i: tuple(_canonical(i.get(k)) if isinstance(i, dict) else "" for k in keys), reverse=reverse)
            elif all(isinstance(i, (int, float)) and not isinstance(i, bool) for i in items):
                result = sorted(items, reverse=reverse)
            else:
                result = sorted(items, key=_canonical, reverse=reverse)
        else:
            seen: set[str] = set()
            result = []
            for item in items:
                key = _canonical(item)
                if key not in seen:
                    seen.add(key)
                    result.append(item)
        return Outcome(
            outputs={"result": result, "first": result[0] if result else None, "last": result[-1] if result else None},
            inputs={"query": items},
        )
