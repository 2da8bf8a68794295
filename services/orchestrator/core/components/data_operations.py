"""DataOperations over objects (spec §5.12)."""

from __future__ import annotations

from typing import Any

from services.common import python_ast
from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.operators import compare
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.render import stringify

OPERATIONS = ("select_keys", "literal_eval", "combine", "filter_values", "append_or_update", "remove_keys", "rename_keys")


def _literal(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{(\"'" or text in ("True", "False", "None") or text.lstrip("-").replace(".", "", 1).isdigit():
            try:
                return _literal(python_ast.literal(text))
            except python_ast.UnparsablePython:
                return value
        return value
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return value


@register
class DataOperations(Component):
    type_name = "DataOperations"
    static_outputs = ("result",)

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        op = params.get("operations") or "literal_eval"
        if op not in OPERATIONS:
            return [("operations", f"unknown operation '{op}'")]
        problems: list[Problem] = []
        for key in ("select_keys", "remove_keys", "filter_values", "updates", "rename_keys"):
            if params.get(key) is not None and not isinstance(params[key], list):
                problems.append((key, f"{key} must be a list, got {type(params[key]).__name__}"))
        for key, shape in (("filter_values", "{key, operator, value}"), ("updates", "{key, value}"),
                           ("rename_keys", "{old_key, new_key}")):
            entries = params.get(key)
            for i, entry in enumerate(entries if isinstance(entries, list) else []):
                if not isinstance(entry, dict):
                    problems.append((f"{key}[{i}]", f"each entry must be an object {shape}, got "
                                     + ("null" if entry is None else type(entry).__name__)))
        return problems

    def _inputs(self, ctx) -> list[dict[str, Any]]:
        query = self.param("query", [])
        refs = query if isinstance(query, list) else [query]
        flat: list[dict[str, Any]] = []
        for ref in refs:
            value = ctx.resolve(ref)
            values = value if isinstance(value, list) else [value]
            flat.extend(v for v in values if isinstance(v, dict))
        return flat

    async def invoke(self, ctx) -> Outcome:
        data = self._inputs(ctx)
        op = self.param("operations", "literal_eval") or "literal_eval"
        if op == "select_keys":
            keys = list(self.param("select_keys", []))
            result: Any = [{k: d[k] for k in keys if k in d} for d in data]
        elif op == "literal_eval":
            result = [_literal(d) for d in data]
        elif op == "combine":
            combined: dict[str, Any] = {}
            for d in data:
                for k, v in d.items():
                    if k not in combined:
                        combined[k] = v
                    elif isinstance(combined[k], list):
                        combined[k].append(v)
                    else:
                        combined[k] = [combined[k], v]
            result = combined
        elif op == "filter_values":
            rules = [r for r in self.param("filter_values", []) or [] if isinstance(r, dict)]
            result = [
                d for d in data
                if all(compare(stringify(d.get(r.get("key"))), r.get("operator") or "=", ctx.render(stringify(r.get("value", "")))) for r in rules)
            ]
        elif op == "append_or_update":
            updates = {u["key"]: ctx.resolve(u.get("value", "")) for u in self.param("updates", []) or [] if isinstance(u, dict) and u.get("key")}
            result = [{**d, **updates} for d in data]
        elif op == "remove_keys":
            drop = set(self.param("remove_keys", []))
            result = [{k: v for k, v in d.items() if k not in drop} for d in data]
        else:
            renames = {r["old_key"]: r["new_key"] for r in self.param("rename_keys", []) or []
                       if isinstance(r, dict) and r.get("old_key") and r.get("new_key")}
            result = [{renames.get(k, k): v for k, v in d.items()} for d in data]
        return Outcome(outputs={"result": result}, inputs={"query": data})
