"""The provider conformance harness: one case table, run against every provider's recorded wire format.

A provider module defines a `Profile`: how that provider writes a neutral `Turn` (answer text, reasoning,
tool calls, finish reason, usage) onto the wire (its SSE / NDJSON / AWS event-stream / JSON bytes, replayed
by the scripted server as `Raw`), how it writes HTTP errors, what request body the gateway's thinking policy
must produce for it, and how its history with tool turns must look. `conformance(profile)` returns the one
parametrized test that runs every case of CASES through litellm (api_base pointed at the module's server)
and the gateway core. A capability a provider lacks is an `na` entry with the reason; the case is then
skipped with that reason (the README's provider table says the same).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from services.llm_gateway.core.types import (
    ChatRequest, ErrorKind, FinishReason, Message, Thinking, ThinkingBlock, ThinkingMode, ToolCall, ToolCallEvent, ToolSpec,
    Usage, UsageEvent,
)
from tests.llm_gateway.conftest import shape
from tests.support.openai_server import Hang, Raw, ScriptedOpenAIServer

ABSENT = object()
"""In an expected request body: this key must not be sent."""


@dataclass
class Call:
    """A tool call the model makes."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Tokens:
    """Usage as the provider counts it (rendered in the provider's own field names)."""

    prompt: int = 0
    completion: int = 0
    reasoning: int = 0
    cached: int = 0


@dataclass
class Turn:
    """One model answer, provider-neutral; a Profile writes it in its provider's format."""

    text: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    finish: str | None = None
    """The provider's own finish reason; None = its natural one (tool calls when there are calls, else stop)."""
    usage: Tokens = field(default_factory=lambda: Tokens(9, 5))
    signature: str = "c2lnbmF0dXJl"
    """Providers that sign reasoning (Anthropic, Bedrock's Claude): the signature of the reasoning block."""


def pieces(text: str, size: int = 8) -> list[str]:
    """Text cut into stream deltas of `size` characters (so a stream has several of them)."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def sse(events: list[Any], *, done: bool = False, named: bool = False) -> list[bytes]:
    """Server-sent events: `data: <json>` blocks (with `event: <type>` first when `named`, Anthropic-style)."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n".encode() if named else b""
        out.append(head + b"data: " + json.dumps(event).encode() + b"\n\n")
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


class Profile:
    """One provider's wire format and expectations. Subclasses override what differs."""

    name = ""
    families: tuple[str, ...] = ()
    """Policy-table families (core.policy.FAMILIES) this module proves."""
    na: dict[str, str] = {}
    """case name -> why the provider has no such capability."""
    known_bugs: dict[str, str] = {}
    """case name -> a bug outside the gateway that breaks it (strict xfail: the test says when it is fixed)."""
    stream_content_type = "text/event-stream"
    thinking_bodies: dict[str, dict[str, Any]] = {}
    """"on" / "off" / "budget" -> the request-body subset the thinking policy must produce (ABSENT: not sent)."""
    budget = 3000
    finish_reasons: list[tuple[str, FinishReason]] = []
    """The provider's own finish reasons and what the gateway makes of them."""
    usage_in = Tokens(prompt=120, completion=40, reasoning=16, cached=64)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=16, cached_tokens=64)
    inline_parsed = True
    """Inline <think> in content becomes think events (False: the family reads reasoning only from its field)."""
    tool_ids = True
    """The provider sends call ids (Gemini and Ollama do not: litellm makes them up)."""
    auth_status = 401
    """The status the provider answers bad credentials with."""
    echoes = False
    """The family gets a tool-call turn's reasoning back (field, inline or signed blocks); others get none."""
    signs_reasoning = False
    """Reasoning comes with a signature (a whole thinking_block event after the stream)."""

    # -- models ----------------------------------------------------------------------------------
    def models(self, server: ScriptedOpenAIServer) -> dict[str, dict[str, Any]]:
        """Registry entries: "m" (plain cases) and "think" (reasoning and thinking-policy cases)."""
        raise NotImplementedError

    def setup(self, server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
        """Per-test environment the provider's client needs (credentials files, regions)."""

    # -- the wire --------------------------------------------------------------------------------
    def stream(self, turn: Turn) -> Raw:
        raise NotImplementedError

    def answer(self, turn: Turn) -> Raw:
        raise NotImplementedError

    def error(self, status: int, retry_after: float | None = None) -> Raw:
        raise NotImplementedError

    # -- request checks --------------------------------------------------------------------------
    def tool_names(self, body: dict[str, Any]) -> set[str]:
        raise NotImplementedError

    def check_history(self, body: dict[str, Any]) -> None:
        """The history of HISTORY as the provider must receive it (tool turns, reasoning echo)."""
        raise NotImplementedError


# -- shared request pieces ---------------------------------------------------------------------------
WEATHER = ToolSpec("get_weather", "Weather of a city", {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]})
TIME = ToolSpec("get_time", "Local time of a zone", {"type": "object", "properties": {"tz": {"type": "string"}},
                                                      "required": ["tz"]})
PARALLEL = [Call("call_w1", "get_weather", {"city": "Paris"}), Call("call_t2", "get_time", {"tz": "Europe/Paris"})]
SIGNED = ThinkingBlock(thinking="Need the weather tool.", signature="c2lnLWhpc3Rvcnk=")
ON = Thinking(ThinkingMode.ENABLED)
OFF = Thinking(ThinkingMode.DISABLED)


def history() -> list[Message]:
    """A tool round as RAGFlow stores it: the tool-call turn's reasoning inline in its content, plus the signed
    block a Claude answer came with."""
    return [Message("system", "You answer briefly."), Message("user", "Weather in Paris?"),
            Message("assistant", "<think>Need the weather tool.</think>Checking.",
                    tool_calls=[ToolCall("call_w1", "get_weather", '{"city": "Paris"}')], thinking_blocks=[SIGNED]),
            Message("tool", "sunny, 21 C", tool_call_id="call_w1", name="get_weather")]


def request(model: str = "m", text: str = "hi", **kw: Any) -> ChatRequest:
    return ChatRequest(model=model, messages=[Message("user", text)], **kw)


def subset(expected: dict[str, Any], actual: dict[str, Any], path: str = "") -> None:
    """Every expected key has the expected value (recursively for dicts); ABSENT keys are not there."""
    for key, value in expected.items():
        where = f"{path}.{key}" if path else key
        if value is ABSENT:
            assert key not in actual, f"{where} must not be sent, got {actual.get(key)!r}"
        elif isinstance(value, dict) and value:
            assert isinstance(actual.get(key), dict), f"{where}: {actual.get(key)!r}"
            subset(value, actual[key], where)
        else:
            assert actual.get(key) == value, f"{where}: expected {value!r}, got {actual.get(key)!r}"


@dataclass
class Env:
    """What a case runs against: the provider's local server, the gateway over it, the recorded retry waits."""

    server: ScriptedOpenAIServer
    build: Callable[..., Any]
    sleeps: Any
    profile: Profile

    def gateway(self, **section: Any) -> Any:
        retry = {"max_attempts": 2, "initial_backoff_s": 0.01, "max_backoff_s": 0.05, "jitter": 0.0,
                 "max_total_wait_s": 30.0}
        return self.build(self.profile.models(self.server), retry=retry, **section)

    async def stream(self, req: ChatRequest, **section: Any) -> list[Any]:
        gw = self.gateway(**section)
        return [event async for event in await gw.chat_stream(req)]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return self.server.chat_bodies


# -- the cases ---------------------------------------------------------------------------------------
Case = Callable[[Profile, Env], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__.removeprefix("case_")] = fn
    return fn


@case
async def case_plain(p: Profile, env: Env) -> None:
    env.server.queue(p.stream(Turn(text="Hello, world. Nice to meet you.")))
    assert shape(await env.stream(request())) == [("text", "Hello, world. Nice to meet you."), ("usage",),
                                                  ("finish", FinishReason.STOP, None)]


@case
async def case_chat_plain(p: Profile, env: Env) -> None:
    env.server.queue(p.answer(Turn(text="Hello, world.")))
    result = await env.gateway().chat(request())
    assert (result.text, result.finish_reason, result.error) == ("Hello, world.", FinishReason.STOP, None)


@case
async def case_reasoning_channel(p: Profile, env: Env) -> None:
    env.server.queue(p.stream(Turn(reasoning="The user wants the capital.", text="Paris.")))
    signed = [("ThinkingBlockEvent",)] if p.signs_reasoning else []
    assert shape(await env.stream(request("think", thinking=ON))) == [
        ("start",), ("think", "The user wants the capital."), ("end", False), ("text", "Paris."), *signed, ("usage",),
        ("finish", FinishReason.STOP, None)]


@case
async def case_reasoning_inline(p: Profile, env: Env) -> None:
    inline = "<think>The user wants the capital.</think>Paris."
    env.server.queue(p.stream(Turn(text=inline)))
    events = shape(await env.stream(request("think", thinking=ON)))
    if p.inline_parsed:
        assert events[:4] == [("start",), ("think", "The user wants the capital."), ("end", False), ("text", "Paris.")]
    else:  # the family reads reasoning only from its own field: tags in the answer are the answer's text
        assert events[0] == ("text", inline)


async def _thinking_body(p: Profile, env: Env, mode: str, thinking: Thinking) -> None:
    env.server.queue(p.stream(Turn(text="ok")))
    events = await env.stream(request("think", thinking=thinking))
    assert events[-1].reason == FinishReason.STOP, events[-1]
    subset(p.thinking_bodies[mode], env.bodies[-1])


@case
async def case_thinking_on(p: Profile, env: Env) -> None:
    await _thinking_body(p, env, "on", ON)


@case
async def case_thinking_off(p: Profile, env: Env) -> None:
    await _thinking_body(p, env, "off", OFF)


@case
async def case_thinking_budget(p: Profile, env: Env) -> None:
    await _thinking_body(p, env, "budget", Thinking(ThinkingMode.BUDGET, budget_tokens=p.budget))


@case
async def case_reasoning_only_promoted(p: Profile, env: Env) -> None:
    env.server.queue(p.stream(Turn(reasoning="The answer is 4.")))
    events = await env.stream(request("think", "2+2?", thinking=OFF))
    assert shape(events) == [("text", "The answer is 4."), ("usage",), ("finish", FinishReason.STOP, None)]
    assert events[-1].reasoning_as_answer


@case
async def case_parallel_tools(p: Profile, env: Env) -> None:
    env.server.queue(p.stream(Turn(calls=PARALLEL)))
    events = await env.stream(request(text="Weather and time in Paris?", tools=[WEATHER, TIME]))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.name, json.loads(c.arguments_json)) for c in calls] == [(c.name, c.arguments) for c in PARALLEL]
    if p.tool_ids:
        assert [c.id for c in calls] == [c.id for c in PARALLEL]
    assert len({c.id for c in calls}) == 2 and all(calls[i].id for i in range(2))
    assert events[-1].reason == FinishReason.TOOL_CALLS
    assert p.tool_names(env.bodies[-1]) == {"get_weather", "get_time"}


@case
async def case_usage(p: Profile, env: Env) -> None:
    env.server.queue(p.stream(Turn(text="ok", usage=p.usage_in)))
    events = await env.stream(request())
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    got = Usage(usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens, usage.cached_tokens)
    assert got == p.usage_out and usage.calls == 1


@case
async def case_finish_reasons(p: Profile, env: Env) -> None:
    seen = []
    for native, expected in p.finish_reasons:
        calls = PARALLEL[:1] if expected == FinishReason.TOOL_CALLS else []
        env.server.queue(p.stream(Turn(text="" if calls else "Some text.", calls=calls, finish=native)))
        events = await env.stream(request(tools=[WEATHER]))
        seen.append((native, events[-1].reason))
    assert seen == p.finish_reasons


async def _error(p: Profile, env: Env, status: int, kind: ErrorKind) -> None:
    env.server.queue(p.error(status), p.error(status))
    events = await env.stream(request())
    finish = events[-1]
    assert (finish.reason, finish.error.kind, finish.error.http_status) == (FinishReason.ERROR, kind, status)
    assert "Traceback" not in finish.error.message
    assert len(env.bodies) == (2 if finish.error.retryable else 1)


@case
async def case_http_400(p: Profile, env: Env) -> None:
    await _error(p, env, 400, ErrorKind.BAD_REQUEST)


@case
async def case_http_401(p: Profile, env: Env) -> None:
    await _error(p, env, p.auth_status, ErrorKind.AUTH)


@case
async def case_http_500(p: Profile, env: Env) -> None:
    await _error(p, env, 500, ErrorKind.SERVER)


@case
async def case_http_429_retry_after(p: Profile, env: Env) -> None:
    env.server.queue(p.error(429, retry_after=3), p.stream(Turn(text="Fine now.")))
    events = await env.stream(request())
    assert shape(events)[0] == ("text", "Fine now.") and events[-1].reason == FinishReason.STOP
    assert len(env.bodies) == 2 and env.sleeps.delays and env.sleeps.delays[0] >= 3


@case
async def case_timeout(p: Profile, env: Env) -> None:
    env.server.queue(Hang(1.5), Hang(1.5))
    events = await env.stream(request(), request_timeout_s=0.3)
    finish = events[-1]
    assert (finish.reason, finish.error.kind, finish.error.retryable) == (FinishReason.ERROR, ErrorKind.TIMEOUT, True)
    assert len(env.bodies) == 2


@case
async def case_drop_mid_stream(p: Profile, env: Env) -> None:
    raw = p.stream(Turn(text="Partial answer, and then the rest of it."))
    first = next(i for i, frame in enumerate(raw.frames) if b"Partial" in frame)
    raw.drop_after = first + 1
    env.server.queue(raw)
    events = await env.stream(request())
    finish = events[-1]
    assert (finish.reason, finish.error.kind) == (FinishReason.ERROR, ErrorKind.STREAM_INTERRUPTED)
    assert finish.error.partial_text.startswith("Partial") and "rest" not in finish.error.partial_text


@case
async def case_history_echo(p: Profile, env: Env) -> None:
    env.server.queue(p.stream(Turn(text="Sunny, 21 C.")))
    events = await env.stream(ChatRequest(model="think", messages=history(), thinking=ON, tools=[WEATHER]))
    assert events[-1].reason == FinishReason.STOP, events[-1]
    body = env.bodies[-1]
    assert "Need the weather tool." not in json.dumps(body) or p.echoes, "reasoning sent to a family without echo"
    p.check_history(body)


def conformance(profile: Profile) -> Callable[..., Awaitable[None]]:
    """The module's parametrized test: every case of CASES against `profile` (n/a ones skipped with the reason)."""
    def marks(name: str) -> list[Any]:
        if name in profile.na:
            return [pytest.mark.skip(reason=f"n/a: {profile.na[name]}")]
        if name in profile.known_bugs:
            return [pytest.mark.xfail(reason=profile.known_bugs[name], strict=True)]
        return []

    params = [pytest.param(name, marks=marks(name)) for name in CASES]

    @pytest.mark.parametrize("case_name", params)
    async def test_conformance(case_name: str, wire: ScriptedOpenAIServer, make_gateway, sleeps, monkeypatch) -> None:
        profile.setup(wire, monkeypatch)
        await CASES[case_name](profile, Env(wire, make_gateway, sleeps, profile))

    return test_conformance
