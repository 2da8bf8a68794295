"""The gateway core: one request in, typed events out (ChatStream), or their aggregate (Chat).

Per request: resolve the model (and fallbacks) -> clean the history -> fit the context window ->
apply the family's thinking policy -> call the provider -> split reasoning from text -> assemble and
validate tool calls -> validate structured output -> usage -> exactly one Finish.

Bad requests (unknown model, empty conversation, bad roles) raise domain errors before anything is
streamed. Everything that goes wrong after that ends the stream with Finish{ERROR, typed error}.
Retries happen only while nothing has been sent; once a think or text event left the gateway, a
failure ends the stream with STREAM_INTERRUPTED (or INCOMPLETE_STREAM) and the partial text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from services.common import context as request_context
from services.common.errors import (FailedPreconditionError, InvalidArgumentError, UnavailableError, ViolationCollector,
                                    with_article)
from services.llm_gateway.core import context, history, observe, structured, think, thinking_blocks, tools
from services.llm_gateway.core.markers import MarkerFilter, MarkerSet
from services.llm_gateway.core.policy import apply as apply_policy
from services.llm_gateway.core.policy import effective_mode, think_format_for
from services.llm_gateway.core.ports import EmbeddedModel, Provider
from services.llm_gateway.core.registry import ModelRegistry, Route
from services.llm_gateway.core.retry import RetryBudget
from services.llm_gateway.core.settings import GatewaySettings
from services.llm_gateway.core.think import ThinkFormat
from services.llm_gateway.core.types import (
    ChatError, ChatRequest, ChatResult, ErrorKind, FinishEvent, FinishReason, Generation, Message, ProviderCall, ProviderError,
    TextEvent, ThinkDeltaEvent, ThinkEndEvent, Thinking, ThinkingBlock, ThinkingBlockEvent, ThinkingMode, ThinkStartEvent,
    ToolCall, ToolCallEvent, Usage, UsageEvent,
)

logger = logging.getLogger(__name__)

_FINISH = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH, "tool_calls": FinishReason.TOOL_CALLS,
           "function_call": FinishReason.TOOL_CALLS, "content_filter": FinishReason.CONTENT_FILTER}
_THINK_START = ThinkStartEvent()


@dataclass
class _Planned:
    route: Route
    api_base: str | None


@dataclass
class _CallOutcome:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    truncated: bool = False
    thinking_blocks: list[ThinkingBlock] = field(default_factory=list)
    reasoning_as_answer: bool = False


@dataclass(frozen=True)
class _Reading:
    """How one call's output is read: think format, thinking requested off, the family's control tokens."""

    fmt: ThinkFormat
    thinking_off: bool = False
    markers: MarkerSet | None = None
    signed_blocks: bool = False
    """The family's reasoning blocks carry real signatures (Anthropic); litellm makes up others (Mistral's)."""


@dataclass
class _StreamState:
    """What already left the gateway (decides between retry and STREAM_INTERRUPTED)."""

    emitted: bool = False
    sent_text: list[str] = field(default_factory=list)


# Sampling ranges accepted by every provider family (OpenAI's ranges, which litellm passes through; narrower
# provider limits, e.g. Anthropic's temperature <= 1, are left to the provider).
GENERATION_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}


def check_generation(generation: Generation, problems: ViolationCollector) -> None:
    """Out-of-range sampling parameters are bad input (INVALID_ARGUMENT naming `generation.<field>`), not a
    provider error after the stream started."""
    for name, (low, high) in GENERATION_RANGES.items():
        value = getattr(generation, name)
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            problems.add(f"generation.{name}", f"must be between {low:g} and {high:g}, got {value!r}")
    if generation.max_tokens is not None and generation.max_tokens < 1:
        problems.add("generation.max_tokens", f"must be at least 1 when set, got {generation.max_tokens}")
    for i, stop in enumerate(generation.stop):
        if not stop:
            problems.add(f"generation.stop[{i}]", "must not be empty")


MAX_REPAIRS = 10
"""Upper bound of response_format.max_repairs (each repair is one more paid model call)."""


def check_tools(request: ChatRequest, problems: ViolationCollector) -> None:
    """Tool names as every provider accepts them, each once; parameters a usable JSON Schema; tool_choice
    "auto", "none", "required" or the name of one of the tools."""
    names: dict[str, int] = {}
    for i, tool in enumerate(request.tools):
        if not tool.name:
            problems.add(f"tools[{i}].name", "is required")
        elif not tools.NAME.fullmatch(tool.name):
            problems.add(f"tools[{i}].name", f"must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-', got {tool.name[:80]!r}")
        elif tool.name in names:
            problems.add(f"tools[{i}].name", f"duplicates tools[{names[tool.name]}].name {tool.name!r}")
        else:
            names[tool.name] = i
        if tool.parameters and (problem := structured.schema_problem(tool.parameters)) is not None:
            problems.add(f"tools[{i}].parameters", problem)
    choice = request.tool_choice
    if choice in ("", "auto", "none"):
        return
    if not request.tools:
        problems.add("tool_choice", f"{choice[:80]!r} needs tools, but the request has none")
    elif choice != "required" and choice not in names:
        problems.add("tool_choice", f"must be auto, none, required or the name of a tool in tools, got {choice[:80]!r}")


def check_thinking(thinking: Thinking, problems: ViolationCollector) -> None:
    if thinking.budget_tokens < 0:
        problems.add("thinking.budget_tokens", f"must not be negative, got {thinking.budget_tokens}")
    elif thinking.mode == ThinkingMode.BUDGET and thinking.budget_tokens == 0:
        problems.add("thinking.budget_tokens", "must be at least 1 with THINKING_MODE_BUDGET")


class LlmGateway:
    def __init__(self, registry: ModelRegistry, provider: Provider, settings: GatewaySettings,
                 embedded: EmbeddedModel | None = None, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.registry = registry
        self.provider = provider
        self.settings = settings
        self.embedded = embedded
        self._sleep = sleep

    # -- public API ------------------------------------------------------------------------------
    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        """Validate and resolve (raising domain errors), then return the event stream."""
        planned = await self._plan(request)
        return self._observed(request, planned, streaming=True)

    async def chat(self, request: ChatRequest) -> ChatResult:
        planned = await self._plan(request)
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        blocks: list[ThinkingBlock] = []
        usage = Usage()
        finish = FinishEvent(FinishReason.ERROR)
        async for event in self._observed(request, planned, streaming=False):
            if isinstance(event, TextEvent):
                text.append(event.text)
            elif isinstance(event, ThinkDeltaEvent):
                reasoning.append(event.text)
            elif isinstance(event, ToolCallEvent):
                calls.append(event.call)
            elif isinstance(event, ThinkingBlockEvent):
                blocks.append(event.block)
            elif isinstance(event, UsageEvent):
                usage = event.usage
            elif isinstance(event, FinishEvent):
                finish = event
        answer = "".join(text)
        value, has_value = None, False
        if request.structured and finish.error is None and finish.reason != FinishReason.TOOL_CALLS:
            value, problem = structured.check(answer, request.structured.schema)
            has_value = problem is None
        return ChatResult(text=answer, reasoning="".join(reasoning) if request.with_reasoning else "", tool_calls=calls,
                          structured=value, has_structured=has_value, finish_reason=finish.reason, usage=usage,
                          model=finish.model, error=finish.error, thinking_blocks=blocks,
                          reasoning_as_answer=finish.reasoning_as_answer)

    def _observed(self, request: ChatRequest, planned: list[_Planned], streaming: bool) -> AsyncIterator[Any]:
        route = planned[0].route
        return observe.observed(self._run(request, planned, streaming), model=route.llm_id, provider=route.entry.provider,
                                provider_model=route.litellm_model, streaming=streaming)

    def count_tokens(self, model: str, messages: list[Message], max_tokens: int) -> tuple[int, str, list[Message], int]:
        route = self.registry.resolve(model, need_key=False)
        encode, _, name = context.tokenizer(route.family.tokenizer)
        total = context.count(messages, encode)
        if max_tokens <= 0:
            return total, name, [], 0
        trimmed = context.fit(messages, max_tokens, name)
        return total, name, trimmed, context.count(trimmed, encode)

    # -- planning --------------------------------------------------------------------------------
    async def _plan(self, request: ChatRequest) -> list[_Planned]:
        problems = ViolationCollector()
        if not request.messages:
            problems.add("messages", "at least one message is required")
        for i, message in enumerate(request.messages):
            if message.role not in history.ROLES:
                problems.add(f"messages[{i}].role", f"must be one of {', '.join(history.ROLES)}, got {message.role!r}")
            for j, part in enumerate(message.parts):
                if "image_url" in part and not part["image_url"]:
                    problems.add(f"messages[{i}].parts[{j}]", "must set text or a non-empty image_url")
                elif "image_url" in part and message.role != "user":  # no provider takes images on other turns
                    problems.add(f"messages[{i}].parts[{j}]", f"images go on user turns only, not on {with_article(message.role)} turn")
            if message.role == "tool" and not message.tool_call_id:
                problems.add(f"messages[{i}].tool_call_id", "is required on a tool turn (the id of the call it answers)")
            for j, call in enumerate(message.tool_calls):
                if not call.id or not call.name:
                    problems.add(f"messages[{i}].tool_calls[{j}].{'id' if not call.id else 'name'}",
                                 "is required on a tool call in the history")
                if structured.json_depth(call.arguments_json) > structured.MAX_JSON_DEPTH:
                    problems.add(f"messages[{i}].tool_calls[{j}].arguments_json",
                                 f"nests JSON deeper than {structured.MAX_JSON_DEPTH} levels")
        check_tools(request, problems)
        if request.structured is not None:
            if not request.structured.schema:
                problems.add("response_format.json_schema", "is required when response_format is set")
            elif (problem := structured.schema_problem(request.structured.schema)) is not None:
                problems.add("response_format.json_schema", problem)
            repairs = request.structured.max_repairs
            if repairs is not None and not 0 <= repairs <= MAX_REPAIRS:
                problems.add("response_format.max_repairs", f"must be between 0 and {MAX_REPAIRS}, got {repairs}")
        check_thinking(request.thinking, problems)
        check_generation(request.generation, problems)
        seen: dict[str, str] = {request.model: "model"}
        for i, name in enumerate(request.fallback_models):
            if name in seen:
                problems.add(f"fallback_models[{i}]", f"repeats {seen[name]} ({name!r}): each model is tried once")
            seen.setdefault(name, f"fallback_models[{i}]")
        problems.raise_if_any("invalid chat request")
        planned = [self.registry.resolve(request.model, "model")]
        for i, name in enumerate(request.fallback_models):
            planned.append(self.registry.resolve(name, f"fallback_models[{i}]"))
        out = []
        for route in planned:
            if route.entry.is_embedded and self.embedded is None:
                raise InvalidArgumentError.for_field("model", "the embedded model is disabled (gateway.embedded.enabled)")
            # The embedded model's address is asked for when its turn comes (_run): as a fallback it must not
            # hold up the primary while it starts, nor fail the call when it cannot start.
            out.append(_Planned(route, None if route.entry.is_embedded else route.entry.api_base))
        return out

    def _build_call(self, request: ChatRequest, planned: _Planned, messages: list[Message], streaming: bool
                    ) -> tuple[ProviderCall, _Reading]:
        route = planned.route
        family = route.family
        policy = apply_policy(family, request.thinking, request.generation, route.model_name)
        params = policy.params
        system_addenda: list[str] = []
        if request.tools and request.tool_choice != "none":
            if route.native_tools:
                params["tools"] = tools.openai_tools(request.tools)
                choice = tools.tool_choice_param(request.tool_choice)
                if choice is not None:
                    params["tool_choice"] = choice
            else:
                system_addenda.append(tools.text_tools_prompt(request.tools))
        if request.structured is not None:
            if route.native_response_format:
                params["response_format"] = structured.response_format_param(request.structured.schema, request.structured.name)
            system_addenda.append(structured.schema_prompt(request.structured.schema))
        messages = history.clean(messages)
        if not route.native_tools:
            messages = history.flatten_tools(messages)
        if system_addenda:
            addendum = "\n\n".join(system_addenda)
            if messages and messages[0].role == "system":
                messages = [Message(**{**messages[0].__dict__, "content": f"{messages[0].content}\n\n{addendum}"}), *messages[1:]]
            else:
                messages = [Message(role="system", content=addendum), *messages]
        if route.context_window:
            reserve = request.generation.max_tokens or min(1024, route.context_window // 4)
            messages = context.fit(messages, max(route.context_window - reserve, 64), family.tokenizer, request.tools)
        with_tools = bool(request.tools) or any(m.tool_calls for m in messages)
        echo = family.echo_reasoning_with_tools and with_tools
        echo_inline = family.echo_reasoning_inline and with_tools
        echo_blocks = family.echo_thinking_blocks_with_tools and with_tools
        if policy.extra_body:
            params["extra_body"] = policy.extra_body
        stream = streaming or (family.stream_only_when_thinking and policy.thinking_on is True)
        if stream:
            params["stream_options"] = {"include_usage": True}
        mode = effective_mode(family, request.thinking, route.model_name)
        fmt_override = None
        if route.entry.think_format or route.entry.implicit_open is not None:
            fmt_override = ThinkFormat(mode=route.entry.think_format or family.think_format.mode,
                                       implicit_open=bool(route.entry.implicit_open))
        timeout = self.settings.request_timeout_s
        remaining = request_context.remaining_time()  # the caller's gRPC deadline, propagated
        if remaining is not None:
            timeout = max(min(timeout, remaining), 0.001)
        call = ProviderCall(model=route.litellm_model, messages=history.to_provider(messages, echo, echo_blocks, echo_inline),
                            api_base=planned.api_base, api_key=route.api_key, stream=stream, params=params,
                            timeout_s=timeout)
        return call, _Reading(think_format_for(family, mode, fmt_override), policy.thinking_on is False, family.markers,
                             family.echo_thinking_blocks_with_tools)

    # -- the run loop ----------------------------------------------------------------------------
    async def _run(self, request: ChatRequest, plan: list[_Planned], streaming: bool) -> AsyncIterator[Any]:
        state = _StreamState()
        total = Usage()
        budget = RetryBudget(self.settings.retry)
        messages = list(request.messages)
        repairs_left = 0
        if request.structured is not None:
            repairs_left = request.structured.max_repairs
            if repairs_left is None:
                repairs_left = self.settings.default_max_repairs
        tool_repairs_left = self.settings.max_tool_repairs
        route_index = 0
        last_error: ProviderError | None = None
        while True:
            planned = plan[route_index]
            if planned.route.entry.is_embedded and planned.api_base is None:
                assert self.embedded is not None  # _plan refused the route otherwise
                try:
                    planned.api_base = await self.embedded.api_base()
                except (UnavailableError, FailedPreconditionError) as exc:
                    if route_index + 1 == len(plan):
                        raise  # the status the embedded model has (UNAVAILABLE, FAILED_PRECONDITION)
                    logger.warning("the embedded model cannot answer (%s); falling back to %s", exc.message,
                                   plan[route_index + 1].route.litellm_model)
                    route_index += 1
                    continue
            call, reading = self._build_call(request, planned, messages, streaming)
            # Text that may still turn out to be JSON (structured output, text-mode tool calls) is held back.
            buffer_text = request.structured is not None or (bool(request.tools) and not planned.route.native_tools)
            attempt = 1
            outcome: _CallOutcome | None = None
            while outcome is None:
                try:
                    outcome = _CallOutcome()
                    async for event in self._one_call(call, reading, request, outcome, state, buffer_text):
                        yield event
                except ProviderError as error:
                    outcome = None
                    last_error = error
                    # an HTTP status came from a live server; only a failure without one can be the server's death
                    crash = await self._embedded_exit(planned) if error.status == 0 else None
                    if crash is not None:  # not a network problem: the model server died; no retry on it
                        if state.emitted or route_index + 1 == len(plan):
                            raise crash from None
                        logger.warning("%s; falling back to %s", crash.message, plan[route_index + 1].route.litellm_model)
                        break
                    if state.emitted:
                        kind = error.kind if error.kind == ErrorKind.INCOMPLETE_STREAM else ErrorKind.STREAM_INTERRUPTED
                        yield _usage_event(total)
                        yield FinishEvent(FinishReason.ERROR, call.model, ChatError(
                            kind, error.message, retryable=error.retryable or kind == ErrorKind.STREAM_INTERRUPTED,
                            partial_text="".join(state.sent_text), http_status=error.status))
                        return
                    delay = budget.next_delay(error, attempt)
                    if delay is None:
                        break
                    logger.info("retrying %s after %s (attempt %d, wait %.2fs)", call.model, error.kind.value, attempt, delay,
                                extra={"model": call.model, "attempt": attempt, "delay_s": round(delay, 3)})
                    await self._sleep(delay)
                    attempt += 1
            if outcome is None:
                if route_index + 1 < len(plan):
                    route_index += 1
                    logger.info("falling back from %s to %s", call.model, plan[route_index].route.litellm_model)
                    continue
                assert last_error is not None
                yield _usage_event(total)
                yield FinishEvent(FinishReason.ERROR, call.model, ChatError(
                    last_error.kind, last_error.message, retryable=last_error.retryable, http_status=last_error.status))
                return
            total.add(self._usage_of(outcome, call, planned.route))
            # -- tool calls ---------------------------------------------------------------------
            calls = outcome.tool_calls
            if request.tools and not planned.route.native_tools and not calls:
                calls = tools.parse_text_tool_calls(outcome.text, request.tools)
            if calls:
                problems = {c.id: p for c in calls if (p := tools.validate_call(c, request.tools)) is not None}
                if problems and tool_repairs_left > 0 and not state.sent_text:
                    tool_repairs_left -= 1
                    messages = messages + tools.feedback_messages(calls, problems, planned.route.native_tools,
                                                                  outcome.thinking_blocks)
                    continue
                # Signed reasoning is continuation state, not display: sent whether or not with_reasoning,
                # so a client can echo it on the next turn (see history.to_provider).
                for block in outcome.thinking_blocks:
                    yield ThinkingBlockEvent(block)
                for tool_call in calls:
                    yield ToolCallEvent(tool_call)
                yield _usage_event(total)
                yield FinishEvent(FinishReason.TOOL_CALLS, call.model)
                return
            # -- structured output --------------------------------------------------------------
            if request.structured is not None:
                value, problem = structured.check(outcome.text, request.structured.schema)
                if problem is not None:
                    if repairs_left > 0:
                        repairs_left -= 1
                        messages = messages + [Message(role="assistant", content=outcome.text),
                                               Message(role="user", content=structured.repair_prompt(problem, request.structured.schema))]
                        continue
                    yield _usage_event(total)
                    yield FinishEvent(FinishReason.ERROR, call.model, ChatError(
                        ErrorKind.INVALID_STRUCTURED_OUTPUT, f"answer does not match the schema {problem}",
                        partial_text=outcome.text))
                    return
                yield TextEvent(_json_text(value))
            elif buffer_text and outcome.text:
                yield TextEvent(outcome.text)
            for block in outcome.thinking_blocks:
                yield ThinkingBlockEvent(block)
            yield _usage_event(total)
            reason = _FINISH.get(outcome.finish_reason or "stop", FinishReason.STOP)
            if reason == FinishReason.TOOL_CALLS:  # the provider said tool_calls but sent none that could be read
                reason = FinishReason.STOP
            yield FinishEvent(reason, call.model, reasoning_as_answer=outcome.reasoning_as_answer)
            return

    async def _embedded_exit(self, planned: _Planned) -> UnavailableError | None:
        if not planned.route.entry.is_embedded or self.embedded is None:
            return None
        return await self.embedded.exit_error()

    async def _one_call(self, call: ProviderCall, reading: _Reading, request: ChatRequest, outcome: _CallOutcome,
                        state: _StreamState, buffer_text: bool) -> AsyncIterator[Any]:
        """One provider call through the splitter. With thinking requested off, reasoning is held back until an
        answer or a tool call shows it was reasoning after all: some servers (Qwen3 on SGLang or vLLM with
        enable_thinking false) send the whole answer in the reasoning channel, and then it is the answer."""
        splitter = think.ThinkSplitter(reading.fmt, with_reasoning=True)
        assembler = tools.ToolCallAssembler()
        block_assembler = thinking_blocks.ThinkingBlockAssembler()
        text: list[str] = []
        reasoning: list[str] = []
        with_reasoning = request.with_reasoning
        usage = None
        finish_reason = None
        held: list[str] | None = [] if reading.thinking_off else None
        # the family's leaked control tokens, removed before anything else reads the text
        content_filter = MarkerFilter(reading.markers) if reading.markers else None
        reasoning_filter = MarkerFilter(reading.markers) if reading.markers else None

        def convert(events: list[think.Event]) -> list[Any]:
            out: list[Any] = []
            for kind, value in events:
                if kind == think.TEXT:
                    text.append(value)
                    if not buffer_text:
                        state.sent_text.append(value)
                        out.append(TextEvent(value))
                elif kind == think.THINK_DELTA:
                    reasoning.append(value)
                    if with_reasoning:
                        out.append(ThinkDeltaEvent(value))
                elif with_reasoning:
                    out.append(_THINK_START if kind == think.THINK_START else ThinkEndEvent(truncated=bool(value)))
            if out:
                state.emitted = True
            return out

        async for chunk in self.provider.stream(call):
            if content_filter is not None and reasoning_filter is not None:
                chunk = replace(chunk, content=content_filter.feed(chunk.content), reasoning=reasoning_filter.feed(chunk.reasoning))
            if held is not None and (chunk.tool_calls or (chunk.content and not chunk.content.isspace())):
                pending, held = "".join(held), None  # an answer follows: what was held is reasoning
                for event in convert(splitter.feed_reasoning(pending)):
                    yield event
            if chunk.reasoning:
                if held is not None:
                    held.append(chunk.reasoning)
                else:
                    for event in convert(splitter.feed_reasoning(chunk.reasoning)):
                        yield event
            if chunk.content:
                for event in convert(splitter.feed_content(chunk.content)):
                    yield event
            for delta in chunk.tool_calls:
                assembler.feed(delta)
            if reading.signed_blocks:
                for piece in chunk.thinking_blocks:
                    block_assembler.feed(piece)
            if chunk.finish_reason:
                finish_reason = chunk.finish_reason
            if chunk.usage is not None:
                usage = chunk.usage  # cumulative producers repeat it: the last one counts, once
        if content_filter is not None and reasoning_filter is not None:
            if rest := reasoning_filter.finish():
                if held is not None:
                    held.append(rest)
                else:
                    for event in convert(splitter.feed_reasoning(rest)):
                        yield event
            if rest := content_filter.finish():
                for event in convert(splitter.feed_content(rest)):
                    yield event
        if held:  # still held: no answer text and no tool call came
            pending = "".join(held)
            outcome.reasoning_as_answer = bool(pending.strip())
            for event in convert(splitter.feed_content(pending)):
                yield event
        # Reasoning a provider sent in its own field and then ended with a finish reason (STOP, tool calls) ended
        # normally; only a stream that ended inside it (length) is truncated.
        for event in convert(splitter.finish(reasoning_complete=finish_reason not in (None, "length"))):
            yield event
        outcome.text = "".join(text)
        outcome.reasoning = "".join(reasoning)
        outcome.tool_calls = assembler.calls()
        if content_filter is not None:
            outcome.tool_calls = [ToolCall(c.id, c.name, content_filter.clean(c.arguments_json)) for c in outcome.tool_calls]
        outcome.finish_reason = finish_reason
        outcome.usage = usage
        outcome.truncated = splitter.reasoning_truncated
        outcome.thinking_blocks = block_assembler.blocks()

    def _usage_of(self, outcome: _CallOutcome, call: ProviderCall, route: Route) -> Usage:
        usage = outcome.usage
        if usage is None:  # provider sent none: estimate with the family tokenizer
            encode, _, _ = context.tokenizer(route.family.tokenizer)
            prompt = sum(len(encode(str(m.get("content") or ""))) + context.PER_MESSAGE for m in call.messages)
            usage = Usage(prompt_tokens=prompt, completion_tokens=len(encode(outcome.text + outcome.reasoning)))
        usage = Usage(usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens, usage.cached_tokens, calls=1)
        usage.cost_usd = self.provider.cost_usd(call.model, usage)
        return usage


def _json_text(value: Any) -> str:
    """The validated JSON as text; a lone surrogate (the model wrote "\\ud800") stays escaped, since UTF-8 cannot
    carry it."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


def _usage_event(total: Usage) -> UsageEvent:
    return UsageEvent(Usage(**total.__dict__))
