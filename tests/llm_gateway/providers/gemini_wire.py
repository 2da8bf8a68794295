"""Gemini's generateContent wire format, shared by Google AI Studio and Vertex AI (the same JSON on both).

Shapes from ai.google.dev/api/generate-content (GenerateContentResponse, Candidate, FinishReason,
UsageMetadata) and ai.google.dev/gemini-api/docs/thinking (parts with `thought: true` carry the thought
summaries when `thinkingConfig.includeThoughts` is set): `streamGenerateContent?alt=sse` sends one
GenerateContentResponse per `data:` event; function calls arrive whole (`functionCall {name, args}`, no id);
the last candidate has `finishReason`, and usageMetadata counts prompt, candidates, thoughts and cached
tokens. Errors are google.rpc.Status JSON: `{"error": {"code", "message", "status"}}`
(ai.google.dev/gemini-api/docs/troubleshooting), 429 being RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import json
from typing import Any

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import ABSENT, Profile, Tokens, Turn, pieces, sse
from tests.support.openai_server import Raw

STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}


class GeminiProfile(Profile):
    model = "gemini-2.5-flash"
    families = ("gemini", "gemini-2.5-pro", "gemini-3")
    tool_ids = False
    na = {}
    # Gemini 2.5 thinkingConfig (ai.google.dev/gemini-api/docs/thinking#set-budget): thinkingBudget 0 turns it off
    thinking_bodies = {"on": {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}},
                       "off": {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
                       "budget": {"generationConfig": {"thinkingConfig": {"thinkingBudget": 3000, "includeThoughts": True}}}}
    finish_reasons = [("STOP", FinishReason.STOP), ("MAX_TOKENS", FinishReason.LENGTH),
                      ("SAFETY", FinishReason.CONTENT_FILTER), ("RECITATION", FinishReason.CONTENT_FILTER),
                      ("STOP", FinishReason.TOOL_CALLS)]
    # candidatesTokenCount excludes thoughts: litellm's completion_tokens is candidates + thoughts
    usage_in = Tokens(prompt=120, completion=24, reasoning=16, cached=64)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40, reasoning_tokens=16, cached_tokens=64)

    def usage(self, tokens: Tokens) -> dict[str, Any]:
        return {"promptTokenCount": tokens.prompt, "candidatesTokenCount": tokens.completion,
                "thoughtsTokenCount": tokens.reasoning, "cachedContentTokenCount": tokens.cached,
                "totalTokenCount": tokens.prompt + tokens.completion + tokens.reasoning}

    def response(self, parts: list[dict[str, Any]], finish: str | None = None, usage: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        out: dict[str, Any] = {"candidates": [candidate], "modelVersion": self.model, "responseId": "mJ1vaKqLBZ"}
        if usage:
            out["usageMetadata"] = usage
        return out

    def stream(self, turn: Turn) -> Raw:
        prompt_only = {"promptTokenCount": turn.usage.prompt, "totalTokenCount": turn.usage.prompt}
        events = [self.response([{"text": p, "thought": True}], usage=prompt_only) for p in pieces(turn.reasoning)]
        events += [self.response([{"text": p}], usage=prompt_only) for p in pieces(turn.text)]
        calls = [{"functionCall": {"name": c.name, "args": c.arguments}} for c in turn.calls]
        events.append(self.response(calls or [{"text": ""}], turn.finish or "STOP", self.usage(turn.usage)))
        return Raw(headers={"Content-Type": "text/event-stream"}, frames=[f.replace(b"\n\n", b"\r\n\r\n") for f in sse(events)])

    def answer(self, turn: Turn) -> Raw:
        parts: list[dict[str, Any]] = [{"text": turn.reasoning, "thought": True}] if turn.reasoning else []
        parts += [{"text": turn.text}] if turn.text else []
        parts += [{"functionCall": {"name": c.name, "args": c.arguments}} for c in turn.calls]
        body = self.response(parts, turn.finish or "STOP", self.usage(turn.usage))
        return Raw(headers={"Content-Type": "application/json"}, body=json.dumps(body).encode())

    def error(self, status: int, retry_after: float | None = None) -> Raw:
        headers = {"Content-Type": "application/json"}
        error: dict[str, Any] = {"code": status, "message": f"provider says {status}", "status": STATUS.get(status, "UNKNOWN")}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after:g}s"}]
        return Raw(status=status, headers=headers, body=json.dumps({"error": error}).encode())

    def tool_names(self, body: dict[str, Any]) -> set[str]:
        return {f["name"] for tool in body["tools"] for f in tool.get("functionDeclarations") or tool.get("function_declarations")}

    def check_history(self, body: dict[str, Any]) -> None:
        contents = body["contents"]
        assert "You answer briefly." in json.dumps(body.get("system_instruction") or body.get("systemInstruction"))
        assert [c["role"] for c in contents] == ["user", "model", "user"]
        model_parts = contents[1]["parts"]
        assert {"text": "Checking."} in model_parts
        # proto3 JSON: the API accepts lowerCamelCase and the original snake_case field names alike
        (call,) = [p.get("functionCall") or p["function_call"] for p in model_parts if {"functionCall", "function_call"} & set(p)]
        assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})
        (response,) = [p.get("functionResponse") or p["function_response"] for p in contents[2]["parts"]
                       if {"functionResponse", "function_response"} & set(p)]
        assert response["name"] == "get_weather" and "sunny, 21 C" in json.dumps(response)
        assert "<think>" not in json.dumps(body) and ABSENT is not None
