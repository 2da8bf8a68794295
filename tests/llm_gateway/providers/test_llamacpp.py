"""llama.cpp's server (github.com/ggml-org/llama.cpp/tree/master/tools/server, OpenAI-compatible
/v1/chat/completions), as the embedded SmolLM2 model is served (family smollm2): no native tools, so the tools
are described in the system prompt and the model answers `{"tool_call": …}` as text; no reasoning, no thinking
switch. The embedded child process itself is tested in tests/llm_gateway/test_embedded*.py."""

from __future__ import annotations

import json

from services.llm_gateway.core.types import FinishReason, Usage
from tests.llm_gateway.providers.harness import ABSENT, Tokens, Turn, conformance
from tests.llm_gateway.providers.openai_wire import OpenAIChatProfile

NO_REASONING = "SmolLM2 does not reason and llama.cpp's server has no reasoning channel for it"
NOTHING = {"thinking": ABSENT, "enable_thinking": ABSENT, "reasoning_effort": ABSENT, "chat_template_kwargs": ABSENT}


class LlamaCpp(OpenAIChatProfile):
    name = "llama.cpp (embedded SmolLM2)"
    families = ("smollm2",)
    reasoning_field = None
    model_name = "smollm2-135m-instruct"
    tool_ids = False  # text-mode calls carry no ids: the gateway makes them
    na = {"reasoning_channel": NO_REASONING, "reasoning_only_promoted": NO_REASONING}
    thinking_bodies = {"on": NOTHING, "off": NOTHING, "budget": NOTHING}
    finish_reasons = [("stop", FinishReason.STOP), ("length", FinishReason.LENGTH), ("stop", FinishReason.TOOL_CALLS)]
    usage_in = Tokens(prompt=120, completion=40)
    usage_out = Usage(prompt_tokens=120, completion_tokens=40)

    def usage(self, tokens: Tokens):
        return {"prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion,
                "total_tokens": tokens.prompt + tokens.completion}

    def events(self, turn: Turn):
        if turn.calls:  # text-mode tools: the calls are the answer's text
            calls = [{"name": c.name, "arguments": c.arguments} for c in turn.calls]
            turn = Turn(text=json.dumps({"tool_call": calls if len(calls) > 1 else calls[0]}),
                        finish=turn.finish if turn.finish != "tool_calls" else "stop", usage=turn.usage)
        return super().events(turn)

    def models(self, server):
        entry = {"model": "openai/smollm2-135m-instruct", "api_base": server.base_url, "family": "smollm2"}
        return {"m": entry, "think": entry}

    def tool_names(self, body):
        assert "tools" not in body
        system = body["messages"][0]["content"]
        return {name for name in ("get_weather", "get_time") if f"- {name}:" in system}

    def check_history(self, body):
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert json.loads(messages[2]["content"].split("\n", 1)[1]) == {
            "tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        assert messages[2]["content"].startswith("Checking.")
        assert messages[3]["content"] == "Result of tool get_weather: sunny, 21 C"
        assert "tools" not in body and "<think>" not in json.dumps(body)


PROFILE = LlamaCpp()
test_conformance = conformance(PROFILE)
