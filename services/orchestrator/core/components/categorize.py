"""Categorize: an LLM router (spec §5.4, fix §7 item 22).

The model is asked for JSON constrained to the category names (`{"category": <enum>}`); the answer is
matched exactly (case and surrounding whitespace ignored). Only when the answer is not such JSON does
the RAGFlow rule apply: the category whose name occurs most often in the text wins (first on ties),
and the last category when none occurs. The chosen category's `to` ids are taken; every other
downstream gets "branch not taken".
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.llm import apply_generation, parse_json_answer
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.ports import ChatRequest
from services.orchestrator.core.render import stringify


def _categories(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    raw = params.get("category_description")
    return {str(k): v for k, v in raw.items() if isinstance(v, dict)} if isinstance(raw, dict) else {}


def _targets(category: dict[str, Any]) -> list[str]:
    to = category.get("to")
    if isinstance(to, str):
        return [to] if to else []
    return [str(t) for t in to if isinstance(t, (str, int)) and str(t)] if isinstance(to, list) else []


def choose(names: list[str], answer: str) -> str:
    try:
        parsed = parse_json_answer(answer)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("category"), str):
        wanted = parsed["category"].strip().lower()
        for name in names:
            if name.strip().lower() == wanted:
                return name
    text = answer.lower()
    counts = [text.count(name.strip().lower()) if name.strip() else 0 for name in names]
    best = max(counts)
    return names[counts.index(best)] if best > 0 else names[-1]


@register
class Categorize(Component):
    type_name = "Categorize"
    static_outputs = ("category_name",)
    default_timeout_s = 600.0
    durable_start = True

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        raw = params.get("category_description")
        broken = [(f"category_description.{name}", "each category must be an object with a target (to), got "
                   + ("null" if value is None else type(value).__name__))
                  for name, value in (raw.items() if isinstance(raw, dict) else ()) if not isinstance(value, dict)]
        categories = _categories(params)
        if not categories and not broken:
            return [("category_description", "Categorize needs at least one category")]
        return broken + [(f"category_description.{name}.to", "each category needs a target (to)")
                         for name, category in categories.items() if not _targets(category)] \
            + [(f"category_description.{name}.examples", "examples must be a list of texts")
               for name, category in categories.items()
               if category.get("examples") is not None and not isinstance(category["examples"], list)]

    def _prompt(self, ctx, categories: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        lines = ["Classify the user's input into exactly one of these categories:"]
        for name, category in categories.items():
            lines.append(f"- {name.strip()}: {category.get('description', '')}".rstrip(": "))
        examples = [(name, ex) for name, c in categories.items() for ex in (c.get("examples") or []) if isinstance(ex, str) and ex.strip()]
        if examples:
            lines.append("\nExamples:")
            lines.extend(f'USER: "{ex.strip()}" → {name.strip()}' for name, ex in examples)
        lines.append('\nAnswer with JSON only: {"category": "<one of the category names>"}')
        window = int(self.param("message_history_window_size", 1) or 1)
        history = list(ctx.spec.get("history") or [])[-2 * window:]
        query = stringify(ctx.resolve(self.param("query", "sys.query") or "sys.query"))
        turns = [f"{h.get('role', 'user').upper()}: {h.get('content', '')}" for h in history] + [f"USER: {query}"]
        return [{"role": "system", "content": "\n".join(lines)}, {"role": "user", "content": "Real Data: " + " | ".join(turns)}]

    async def invoke(self, ctx) -> Outcome:
        if ctx.services.llm is None:
            raise NodeError("no model gateway is configured", reason="NO_GATEWAY")
        categories = _categories(self.params)
        names = list(categories)
        schema = {"type": "object", "properties": {"category": {"type": "string", "enum": [n.strip() for n in names]}},
                  "required": ["category"]}
        messages = self._prompt(ctx, categories)
        request = ChatRequest(model=str(self.param("llm_id", "")), messages=messages, json_schema=schema,
                              request_id=f"{ctx.spec.get('run_id', '')}:{self.id}:{ctx.scope}:{ctx.attempt}")
        apply_generation(request, self.params)  # RAGFlow's Categorize sends the LLM's gen_conf too
        text: list[str] = []
        async for chunk in ctx.services.llm.chat_stream(request):
            if chunk.kind == "text":
                text.append(chunk.text)
            elif chunk.kind == "usage" and chunk.usage is not None:
                ctx.usage.add(chunk.usage)
            elif chunk.kind == "finish" and chunk.error:
                raise NodeError(f"{self.id}: model call failed: {chunk.error}", reason="MODEL_ERROR", retryable=chunk.retryable)
        answer = "".join(text)
        name = choose(names, answer)
        targets = _targets(categories[name])
        return Outcome(outputs={"category_name": name, "_next": targets}, inputs={"messages": messages, "answer": answer},
                       next=targets, branch=name)
