"""The one reference tokenizer and resolver (spec §3, fix list §7 items 18-20).

Grammar of a reference token inside text: `{`, any mix of `{` and spaces, an expression, any mix of
spaces and `}`, then `}`. The whole span (extra braces included) is replaced. Expressions:

    <component id>@<field>[.<sub>...]   ids may contain letters, digits, `_`, `:` and `-`
    sys.<name>[.<sub>...]               globals, with sub-paths (`sys.files.0`)
    env.<name>[.<sub>...]
    item | index | result               only inside an Iteration body (aliases of the IterationItem)

A parameter that is exactly one reference, with or without braces (`sys.query`, `Agent:X@content`),
is a *whole reference* and resolves to the typed value instead of a string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from services.orchestrator.core.values import parse_json

_EXPR = r"[A-Za-z0-9_:\-]+@[A-Za-z0-9_.\-]+|(?:sys|env)\.[A-Za-z0-9_.\-]+|(?:item|index|result)(?:\.[A-Za-z0-9_.\-]+)?"
_TOKEN = re.compile(r"\{[{ ]*(" + _EXPR + r")[ }]*\}")
_WHOLE = re.compile(r"^[{ ]*(" + _EXPR + r")[ }]*$")
ALIASES = ("item", "index", "result")


@dataclass(frozen=True)
class Ref:
    """A parsed reference: `root` is a component id, or "sys"/"env"; `path` the field segments."""

    expr: str
    root: str
    path: tuple[str, ...]

    @property
    def is_global(self) -> bool:
        return self.root in ("sys", "env")


def parse_expr(expr: str) -> Ref:
    if "@" in expr:
        cid, field = expr.split("@", 1)
        return Ref(expr, cid, tuple(p for p in field.split(".") if p != ""))
    root, _, rest = expr.partition(".")
    return Ref(expr, root, tuple(p for p in rest.split(".") if p != ""))


def tokenize(text: str) -> Iterator[str | Ref]:
    """Literal strings and Refs, in order."""
    pos = 0
    for match in _TOKEN.finditer(text):
        if match.start() > pos:
            yield text[pos : match.start()]
        yield parse_expr(match.group(1))
        pos = match.end()
    if pos < len(text):
        yield text[pos:]


# Parameters that hold model ids ("name@Factory"), never references.
NOT_TEMPLATES = frozenset({"llm_id", "tts_id", "rerank_id", "embd_id", "model", "llm_filter", "tenant_llm_id"})


def find_refs(value: Any) -> list[Ref]:
    """Every reference in a parameter value (strings anywhere in nested lists/dicts, bare or braced)."""
    found: list[Ref] = []
    if isinstance(value, str):
        whole = _WHOLE.match(value)
        if whole and ("@" in whole.group(1) or whole.group(1).startswith(("sys.", "env."))):
            return [parse_expr(whole.group(1))]
        found.extend(t for t in tokenize(value) if isinstance(t, Ref))
    elif isinstance(value, list):
        for v in value:
            found.extend(find_refs(v))
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in NOT_TEMPLATES:
                found.extend(find_refs(v))
    return found


def whole_ref(value: Any) -> Ref | None:
    """The Ref when `value` is a single reference, braced or bare; None otherwise."""
    if not isinstance(value, str):
        return None
    match = _WHOLE.match(value)
    if not match:
        return None
    ref = parse_expr(match.group(1))
    if ref.root in ALIASES and not value.strip().startswith("{"):
        return None  # a bare word "item" is text, not an alias
    return ref


def walk(value: Any, path: tuple[str, ...]) -> Any:
    """Follow dotted segments: JSON strings are parsed first, dicts by key, lists by index."""
    for segment in path:
        if isinstance(value, str):
            try:
                value = parse_json(value)
            except ValueError:
                return None
        if isinstance(value, Mapping):
            value = value.get(segment)
        elif isinstance(value, (list, tuple)):
            try:
                value = value[int(segment)]
            except (ValueError, IndexError):
                return None
        else:
            return None
        if value is None:
            return None
    return value


class UnknownReferenceError(LookupError):
    """A reference names a component or global that does not exist."""


class Resolver:
    """Resolves references against run state. `outputs(cid)` returns a component's outputs dict."""

    def __init__(
        self,
        outputs: Callable[[str], Mapping[str, Any] | None],
        globals_: Mapping[str, Any],
        aliases: Mapping[str, str] | None = None,
        stream_text: Callable[[str], str | None] | None = None,
    ):
        self._outputs = outputs
        self._globals = globals_
        self._aliases = aliases or {}
        self._stream_text = stream_text

    def with_aliases(self, item_node: str) -> "Resolver":
        return Resolver(self._outputs, self._globals, {a: item_node for a in ALIASES}, self._stream_text)

    def lookup(self, ref: Ref) -> Any:
        if ref.root in ALIASES:
            item_node = self._aliases.get(ref.root)
            if not item_node:
                raise UnknownReferenceError(f"{{{ref.expr}}} is only valid inside an Iteration body")
            return walk((self._outputs(item_node) or {}).get(ref.root), ref.path)
        if ref.is_global:
            return self._lookup_global(ref)
        outputs = self._outputs(ref.root)
        if outputs is None:
            raise UnknownReferenceError(f"unknown component '{ref.root}' in {{{ref.expr}}}")
        if not ref.path:
            return dict(outputs)
        return walk(outputs.get(ref.path[0]), ref.path[1:])

    def _lookup_global(self, ref: Ref) -> Any:
        # The longest dotted prefix that is a key wins, so both "sys.files" + "0" and keys that
        # themselves contain dots work.
        parts = (ref.root, *ref.path)
        for cut in range(len(parts), 1, -1):
            key = ".".join(parts[:cut])
            if key in self._globals:
                return walk(self._globals[key], parts[cut:])
        raise UnknownReferenceError(f"unknown variable '{ref.expr}'")

    def value_of(self, ref: Ref) -> Any:
        """Like lookup, but an alias outside an Iteration body stays literal text."""
        if ref.root in ALIASES and ref.root not in self._aliases:
            return "{" + ref.expr + "}"
        return self.lookup(ref)

    def resolve(self, value: Any) -> Any:
        """A parameter value: whole reference → typed value; text with references → rendered string;
        anything else as is."""
        ref = whole_ref(value)
        if ref is not None:
            return self.lookup(ref)
        if isinstance(value, str) and "{" in value:
            return self.render(value)
        return value

    def render(self, text: str, joiner: str | None = None) -> str:
        from services.orchestrator.core.render import stringify

        if "{" not in text:
            return text  # no reference can start without a brace

        parts: list[str] = []
        for token in tokenize(text):
            if isinstance(token, str):
                parts.append(token)
            else:
                parts.append(stringify(self.value_of(token), joiner))
        return "".join(parts)
