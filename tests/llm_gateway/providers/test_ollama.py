"""Ollama's native chat API (github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion,
ollama.com/blog/thinking): POST /api/chat streams newline-delimited JSON objects (`application/x-ndjson`), each
with `message {role, content, thinking, tool_calls}` and `done`; the last has `done: true`, `done_reason` and the
counts `prompt_eval_count` / `eval_count`. Tool calls come whole, arguments as an object, without ids.
`think: true|false` switches thinking. Errors are `{"error": "<text>"}` with the HTTP status."""

from __future__ import annotations

import json
from typing import Any

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import Profile, Tokens, Turn, conformance, pieces
from tests.support.openai_server import Raw

STAMP = "2025-10-10T12:00:00.000000Z"
# POST /api/show (docs/api.md#show-model-information): litellm asks it for the model's capabilities
SHOW = Raw(headers={"Content-Type": "application/json"}, body=json.dumps({
    "modelfile": "FROM qwen3:8b", "parameters": "temperature 0.6", "template": "{{ .Prompt }}",
    "details": {"parent_model": "", "format": "gguf", "family": "qwen3", "families": ["qwen3"], "parameter_size": "8.2B",
                "quantization_level": "Q4_K_M"},
    "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
    "capabilities": ["completion", "tools", "thinking"], "modified_at": STAMP}).encode())


class Ollama(Profile):
    name = "Ollama"
    families = ("ollama-qwen3", "ollama")
    tool_ids = False
    known_bugs = {"reasoning_inline": "litellm's ollama_chat stream parser drops `<think>` and ends the reasoning at the "
                                      "next content chunk (and misses tags split across chunks); reasoning through "
                                      "Ollama's own `thinking` field is unaffected"}
    thinking_bodies = {"on": {"think": True}, "off": {"think": False}, "budget": {"think": True}}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH), ("stop", FinishReason.TOOL_CALLS)]
    usage_in = Tokens(prompt=120, completion=40)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40)
    model = "qwen3:8b"

    def models(self, server):
        base = {"api_base": server.root_url}
        return {"m": {"model": f"ollama_chat/{self.model}", **base}, "think": {"model": f"ollama_chat/{self.model}", **base},
                "llama": {"model": "ollama_chat/llama3.2", **base}}

    def setup(self, server, monkeypatch):
        server.fixed["/api/show"] = SHOW

    def line(self, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"model": self.model, "created_at": STAMP, "message": {"role": "assistant", "content": "", **message},
                "done": False, **extra}

    def last(self, turn: Turn) -> dict[str, Any]:
        return self.line({}, done=True, done_reason=turn.finish or "stop", total_duration=4883583458,
                         load_duration=1334875, prompt_eval_count=turn.usage.prompt, prompt_eval_duration=342546000,
                         eval_count=turn.usage.completion, eval_duration=4535599000)

    def stream(self, turn: Turn) -> Raw:
        lines = [self.line({"thinking": p}) for p in pieces(turn.reasoning)]
        lines += [self.line({"content": p}) for p in pieces(turn.text)]
        if turn.calls:
            lines.append(self.line({"tool_calls": [{"function": {"name": c.name, "arguments": c.arguments}}
                                                   for c in turn.calls]}))
        lines.append(self.last(turn))
        return Raw(headers={"Content-Type": "application/x-ndjson"}, frames=[json.dumps(x).encode() + b"\n" for x in lines])

    def answer(self, turn: Turn) -> Raw:
        body = self.last(turn)
        body["message"] = {"role": "assistant", "content": turn.text, **({"thinking": turn.reasoning} if turn.reasoning else {})}
        return Raw(headers={"Content-Type": "application/json"}, body=json.dumps(body).encode())

    def error(self, status: int, retry_after: float | None = None) -> Raw:
        headers = {"Content-Type": "application/json"}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        return Raw(status=status, headers=headers, body=json.dumps({"error": f"provider says {status}"}).encode())

    def tool_names(self, body):
        return {tool["function"]["name"] for tool in body["tools"]}

    def check_history(self, body):
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
        turn = messages[2]
        assert turn["content"] == "Checking." and "thinking" not in turn and "reasoning_content" not in turn
        (call,) = turn["tool_calls"]
        arguments = call["function"]["arguments"]
        assert call["function"]["name"] == "get_weather"
        assert (json.loads(arguments) if isinstance(arguments, str) else arguments) == {"city": "Paris"}
        assert messages[3]["content"] == "sunny, 21 C"
        assert "<think>" not in json.dumps(body)


PROFILE = Ollama()
test_conformance = conformance(PROFILE)
