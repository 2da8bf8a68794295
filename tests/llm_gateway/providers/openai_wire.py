"""The OpenAI Chat Completions wire format, shared by every provider that speaks it (with their quirks as knobs).

Shapes from the OpenAI API reference (platform.openai.com/docs/api-reference/chat/streaming and
/chat/object): a stream is `data: <chat.completion.chunk>` events ending in `data: [DONE]`; the first delta
carries the role, tool calls stream as a head (index, id, type, function.name, empty arguments) followed by
argument fragments at the same index, the finish chunk has an empty delta, and with
`stream_options.include_usage` a last chunk with `choices: []` carries the usage. Errors are
`{"error": {"message", "type", "param", "code"}}` with the HTTP status.
"""

from __future__ import annotations

import json
from typing import Any

from tests.llm_gateway.providers.harness import Profile, Tokens, Turn, pieces, sse
from tests.support.openai_server import Raw

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_exceeded",
               500: "server_error"}


class OpenAIChatProfile(Profile):
    reasoning_field: str | None = "reasoning_content"
    """Delta field the provider streams reasoning in (None: it sends none)."""
    model_name = "gpt-4o-2024-08-06"
    id_prefix = "chatcmpl-"
    echo: str | None = None
    """How a tool-call turn's reasoning must come back: "field" (reasoning_content), "inline" (<think> in the
    content) or None (not at all)."""
    role_delta: dict[str, Any] = {"role": "assistant", "content": ""}

    @property
    def echoes(self) -> bool:  # type: ignore[override]
        return self.echo is not None

    # -- pieces providers change -----------------------------------------------------------------
    def usage(self, tokens: Tokens) -> dict[str, Any]:
        return {"prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion,
                "total_tokens": tokens.prompt + tokens.completion,
                "prompt_tokens_details": {"cached_tokens": tokens.cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": tokens.reasoning, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}

    def error_body(self, status: int) -> dict[str, Any]:
        return {"error": {"message": f"provider says {status}", "type": ERROR_TYPES.get(status, "error"), "param": None,
                          "code": None}}

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"id": f"{self.id_prefix}A1b2C3", "object": "chat.completion.chunk", "created": 1733400000,
                "model": self.model_name, "system_fingerprint": "fp_1", **extra,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def leading(self) -> list[dict[str, Any]]:
        """Events before the first delta (Azure's prompt_filter_results)."""
        return []

    def trailing(self, turn: Turn, finish: str) -> list[dict[str, Any]]:
        """The finish chunk and the usage chunk."""
        return [self.chunk({}, finish),
                {"id": f"{self.id_prefix}A1b2C3", "object": "chat.completion.chunk", "created": 1733400000,
                 "model": self.model_name, "system_fingerprint": "fp_1", "choices": [], "usage": self.usage(turn.usage)}]

    def reasoning_deltas(self, text: str) -> list[dict[str, Any]]:
        assert self.reasoning_field, "this provider has no reasoning field"
        return [{self.reasoning_field: piece} for piece in pieces(text)]

    # -- the wire --------------------------------------------------------------------------------
    def finish_of(self, turn: Turn) -> str:
        return turn.finish or ("tool_calls" if turn.calls else "stop")

    def events(self, turn: Turn) -> list[dict[str, Any]]:
        events = [*self.leading(), self.chunk(dict(self.role_delta))]
        if turn.reasoning:
            events += [self.chunk(d) for d in self.reasoning_deltas(turn.reasoning)]
        events += [self.chunk({"content": piece}) for piece in pieces(turn.text)]
        for index, call in enumerate(turn.calls):
            arguments = json.dumps(call.arguments)
            events.append(self.chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                                      "function": {"name": call.name, "arguments": ""}}]}))
            events += [self.chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                       for piece in pieces(arguments, 6)]
        return events + self.trailing(turn, self.finish_of(turn))

    def stream(self, turn: Turn) -> Raw:
        return Raw(headers={"Content-Type": self.stream_content_type}, frames=sse(self.events(turn), done=True))

    def message(self, turn: Turn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning and self.reasoning_field:
            message[self.reasoning_field] = turn.reasoning
        if turn.calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                     for c in turn.calls]
        return message

    def answer(self, turn: Turn) -> Raw:
        body = {"id": f"{self.id_prefix}A1b2C3", "object": "chat.completion", "created": 1733400000,
                "model": self.model_name, "choices": [{"index": 0, "message": self.message(turn), "logprobs": None,
                                                       "finish_reason": self.finish_of(turn)}],
                "usage": self.usage(turn.usage)}
        return Raw(headers={"Content-Type": "application/json"}, body=json.dumps(body).encode())

    def error(self, status: int, retry_after: float | None = None) -> Raw:
        headers = {"Content-Type": "application/json"}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        return Raw(status=status, headers=headers, body=json.dumps(self.error_body(status)).encode())

    # -- request checks --------------------------------------------------------------------------
    def tool_names(self, body: dict[str, Any]) -> set[str]:
        return {tool["function"]["name"] for tool in body["tools"]}

    def check_history(self, body: dict[str, Any]) -> None:
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
        turn, result = messages[2], messages[3]
        assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in turn["tool_calls"]] == [
            ("call_w1", "get_weather", {"city": "Paris"})]
        assert (result["tool_call_id"], result["content"]) == ("call_w1", "sunny, 21 C")
        assert "thinking_blocks" not in turn
        if self.echo == "field":
            assert (turn.get("reasoning_content"), turn["content"]) == ("Need the weather tool.", "Checking.")
        elif self.echo == "inline":
            assert turn["content"] == "<think>Need the weather tool.</think>\nChecking." and "reasoning_content" not in turn
        else:
            assert turn["content"] == "Checking." and "reasoning_content" not in turn
