"""Iteration / IterationItem and Loop / LoopItem / ExitLoop (spec §2.6, §2.7; fixes §7 item 5).

A container runs its body (the nodes whose parent_id is the container) as a nested scope, one pass
at a time, through `ctx.run_body`. The pass index is part of every body node's journal key, so the
counters survive a takeover or a pause; nested containers work because a body may hold a container.
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.operators import compare
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.context import Frame
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.refs import parse_expr

DEFAULT_MAX_LOOPS = 10
# A Loop runs its body at most this many times: a larger maximum_loop_count (a typo, or a loop meant to
# run "forever") is refused at validation, naming the node, instead of running for hours. An Iteration
# over a longer list fails before its first pass (every pass is journaled and streamed).
MAX_LOOP_COUNT = 1000


def loop_count(value: Any) -> int | None:
    """maximum_loop_count as a count (0 = the default), or None when it is not a whole number >= 0."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


@register
class Iteration(Component):
    type_name = "Iteration"
    default_timeout_s = None

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = [] if params.get("items_ref") else [("items_ref", "Iteration needs items_ref (a reference to a list)")]
        if params.get("outputs") is not None and not isinstance(params["outputs"], dict):
            problems.append(("outputs", "outputs must be an object {name: {ref}}"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        items_ref = self.param("items_ref")
        items = ctx.resolve(items_ref)
        if not isinstance(items, list):
            # RAGFlow's message. Null too: a reference to an output nobody wrote (e.g. a field the
            # upstream model never produced) would otherwise run no passes and end "successfully".
            raise NodeError(f"{items_ref} must be an array, but its type is {type(items)}", reason="NOT_A_LIST")
        if len(items) > MAX_LOOP_COUNT:
            raise NodeError(f"items_ref holds {len(items)} items; an Iteration runs at most {MAX_LOOP_COUNT} passes "
                            "(split the list, e.g. with ListOperations head/tail)", reason="TOO_MANY_ITEMS")
        collectors = {
            name: spec.get("ref") for name, spec in (self.param("outputs", {}) or {}).items() if isinstance(spec, dict) and spec.get("ref")
        }
        collected: dict[str, list[Any]] = {name: [] for name in collectors}
        for index, item in enumerate(items):
            await ctx.run_body(self.id, Frame(self.id, index, item))
            for name, ref in collectors.items():
                collected[name].append(ctx.resolve(ref))
        return Outcome(outputs=collected, inputs={"items": items})


@register
class IterationItem(Component):
    type_name = "IterationItem"
    default_timeout_s = None
    static_outputs = ("item", "result", "index")

    async def invoke(self, ctx) -> Outcome:
        frame = ctx.frame
        if frame is None:
            raise NodeError("IterationItem outside an Iteration", reason="BAD_CONTAINER")
        return Outcome(outputs={"item": frame.item, "result": frame.item, "index": frame.index})


def _condition_holds(ctx, cond: dict[str, Any]) -> bool:
    variable = cond.get("variable")
    operator = cond.get("operator")
    if not variable or not operator:
        raise NodeError("loop termination condition is incomplete", reason="BAD_CONDITION")
    value = ctx.resolve(variable)
    target = ctx.resolve(cond.get("value")) if cond.get("input_mode") == "variable" else cond.get("value")
    return compare(value, operator, target)


@register
class Loop(Component):
    type_name = "Loop"
    default_timeout_s = None
    static_outputs = ("loop_count",)

    @classmethod
    def dynamic_outputs(cls, params: dict[str, Any]) -> list[str]:
        variables = params.get("loop_variables")
        return [str(v["variable"]) for v in variables if isinstance(v, dict) and v.get("variable")] \
            if isinstance(variables, list) else []

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        variables = params.get("loop_variables")
        if variables and not isinstance(variables, list):
            problems.append(("loop_variables", "must be a list of {variable, input_mode, value}"))
        for i, var in enumerate(variables if isinstance(variables, list) else []):
            if not isinstance(var, dict) or not var.get("variable") or not var.get("input_mode"):
                problems.append((f"loop_variables[{i}]", "Loop Variable is not complete."))
        if str(params.get("logical_operator") or "and").lower() not in ("and", "or"):
            problems.append(("logical_operator", "must be 'and' or 'or'"))
        conditions = params.get("loop_termination_condition")
        if conditions and not isinstance(conditions, list):
            problems.append(("loop_termination_condition", "must be a list of {variable, operator, value}"))
        for i, cond in enumerate(conditions if isinstance(conditions, list) else []):
            if not isinstance(cond, dict):
                problems.append((f"loop_termination_condition[{i}]", "each condition needs variable, operator and value"))
            elif not cond.get("variable"):
                problems.append((f"loop_termination_condition[{i}].variable", "each condition needs a variable"))
            elif not cond.get("operator"):
                problems.append((f"loop_termination_condition[{i}].operator", "each condition needs an operator"))
        count = loop_count(params.get("maximum_loop_count"))
        if count is None:
            problems.append(("maximum_loop_count", f"must be a whole number from 0 to {MAX_LOOP_COUNT}, "
                                                   f"got {params.get('maximum_loop_count')!r}"))
        elif count > MAX_LOOP_COUNT:
            problems.append(("maximum_loop_count", f"is {count}; at most {MAX_LOOP_COUNT} passes are allowed"))
        return problems

    async def invoke(self, ctx) -> Outcome:
        for var in self.param("loop_variables", []):
            value = ctx.resolve(var.get("value")) if var.get("input_mode") == "variable" else var.get("value")
            ctx.write(f"{self.id}@{var['variable']}", value)
        # §7 item 5: RAGFlow's default of 0 means "never runs"; 0 or missing means the UI default.
        maximum = min(loop_count(self.param("maximum_loop_count", 0)) or DEFAULT_MAX_LOOPS, MAX_LOOP_COUNT)
        conditions = self.param("loop_termination_condition", []) or []
        any_of = str(self.param("logical_operator", "and") or "and").lower() == "or"
        index = 0
        while index < maximum:
            if conditions:
                holds = [_condition_holds(ctx, c) for c in conditions]
                if (any(holds) if any_of else all(holds)):
                    break
            frame = Frame(self.id, index)
            await ctx.run_body(self.id, frame)
            index += 1
            if frame.exit_requested:
                break
        outputs = {k: v for k, v in ctx.state.outputs.get(self.id, {}).items()}
        outputs["loop_count"] = index
        return Outcome(outputs=outputs)


@register
class LoopItem(Component):
    type_name = "LoopItem"
    default_timeout_s = None
    static_outputs = ("index",)

    async def invoke(self, ctx) -> Outcome:
        return Outcome(outputs={"index": ctx.frame.index if ctx.frame else 0})


@register
class ExitLoop(Component):
    type_name = "ExitLoop"
    default_timeout_s = None

    async def invoke(self, ctx) -> Outcome:
        if ctx.frame is None:
            raise NodeError("ExitLoop outside a Loop", reason="BAD_CONTAINER")
        ctx.frame.exit_requested = True
        return Outcome()


@register
class Conversation(Component):
    """A conversation loop (dsl/conversation.py): one body pass per user message. The body starts at
    the node that waits for the user (`params.entry`, a UserFillUp); it takes this run's message
    (the RunCanvas query, or the resume's inputs) in the first pass that runs here, and pauses the
    run in the next one. Passes already journaled (earlier turns of the session's resume chain) are
    replayed, not run. After `orchestrator.conversation_max_turns` passes the loop ends and the run
    goes on past it (usually: SUCCEEDED)."""

    type_name = "Conversation"
    static_outputs = ("turns",)
    default_timeout_s = None

    def thoughts(self, ctx) -> str:
        return "Waiting for your messages..."

    async def invoke(self, ctx) -> Outcome:
        entry = str(self.param("entry", ""))
        turn_edges = [(str(e[0]), str(e[1])) for e in self.param("turn_edges", []) or [] if isinstance(e, list) and len(e) == 2]
        maximum = max(ctx.services.conversation_max_turns, 1)
        run_id = str(ctx.spec.get("run_id", ""))
        message_pending = True  # this run's message has not been taken by a turn yet
        for turn in range(maximum):
            await ctx.run_body(self.id, Frame(self.id, turn, item={"message_pending": message_pending, "entry": entry}))
            # The waiting node marks the turn that took this run's message; replayed turns of
            # earlier runs carry their own run's id, so they do not count (also after a takeover).
            if (ctx.state.outputs.get(entry) or {}).get(TURN_RUN) == run_id:
                message_pending = False
            entry = _next_entry(ctx.state.routes, turn_edges, entry)
        return Outcome(outputs={"turns": maximum}, inputs={"max_turns": maximum})


TURN_RUN = "_turn_run"


def _next_entry(routes: dict[str, list[str] | None], turn_edges: list[tuple[str, str]], entry: str) -> str:
    """The waiting node the next turn starts at: the target of the first turn edge (an edge back into a
    waiting node, in canvas order) whose source ran in this turn and took it; the same node when none did.
    Replayed turns restore the routes from the journal, so a resume or takeover walks the same nodes."""
    for source, target in turn_edges:
        if source in routes and (routes[source] is None or target in routes[source]):
            return target
    return entry


def conversation_frame(ctx) -> Frame | None:
    """The frame of the Conversation pass `ctx`'s node runs in directly (None elsewhere)."""
    frame = ctx.frame
    if frame is None or frame.container_id != ctx.node.parent_id or not isinstance(frame.item, dict):
        return None
    return frame if "message_pending" in frame.item else None


__all__ = ["Iteration", "IterationItem", "Loop", "LoopItem", "ExitLoop", "Conversation", "conversation_frame",
           "parse_expr"]
