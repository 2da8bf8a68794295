"""History hygiene and the OpenAI-shaped messages handed to litellm.

* Think blocks in earlier assistant turns are removed (with the same splitter the gateway streams
  with), so old reasoning never costs context or confuses the model.
* `reasoning_content` of earlier assistant turns is dropped, except for families that require it to
  be echoed back on tool-call turns (DeepSeek thinking mode, Kimi and GLM thinking models): there it goes
  into the field they expect. A tool-call turn whose reasoning came back inline (`<think>…</think>` in its
  content, as RAGFlow stores history) has that block moved into `reasoning_content` first, so it is echoed
  where required and dropped everywhere else. MiniMax wants it back inline, in the content.
* Signed thinking blocks of earlier assistant turns are dropped, except on the tool-call turns of
  families that verify them (Anthropic with tools): there they go back unchanged, before the calls.
"""

from __future__ import annotations

import json
from typing import Any

from services.llm_gateway.core import structured, think, thinking_blocks
from services.llm_gateway.core.types import Message

ROLES = ("system", "user", "assistant", "tool")


def clean(messages: list[Message]) -> list[Message]:
    out = []
    for message in messages:
        if message.role == "assistant" and message.content and "<" in message.content:
            split = think.split(message.content, None, think.ThinkFormat(mode=think.TAG))
            if split.text != message.content:
                changes: dict = {"content": split.text}
                if message.tool_calls and split.reasoning and not message.reasoning_content:
                    changes["reasoning_content"] = split.reasoning  # echoed only where the family requires it
                message = Message(**{**message.__dict__, **changes})
        out.append(message)
    return out


def flatten_tools(messages: list[Message]) -> list[Message]:
    """For models without native tools: tool-call turns and tool results become plain text turns."""
    out = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            calls = [{"name": c.name, "arguments": _json_or_text(c.arguments_json)} for c in message.tool_calls]
            text = json.dumps({"tool_call": calls[0] if len(calls) == 1 else calls}, ensure_ascii=False)
            out.append(Message(role="assistant", content=(message.content + "\n" if message.content else "") + text))
        elif message.role == "tool":
            out.append(Message(role="user", content=f"Result of tool {message.name or message.tool_call_id}: {message.content}"))
        else:
            out.append(message)
    return out


def _json_or_text(text: str) -> Any:
    """The parsed arguments, or the text itself when it is not (usable) JSON."""
    try:
        return structured.loads(text)
    except ValueError:
        return text


def to_provider(messages: list[Message], echo_reasoning: bool, echo_thinking_blocks: bool = False,
                echo_inline: bool = False) -> list[dict[str, Any]]:
    """OpenAI chat format; `echo_reasoning` keeps reasoning_content, `echo_inline` puts it back into the content
    as a `<think>` block, and `echo_thinking_blocks` keeps the signed thinking blocks on assistant tool-call turns."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role}
        if message.parts:
            item["content"] = [
                {"type": "text", "text": p["text"]} if "text" in p else {"type": "image_url", "image_url": {"url": p["image_url"]}}
                for p in message.parts
            ]
        else:
            item["content"] = message.content
        if message.tool_calls:
            item["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                                  for c in message.tool_calls]
            if echo_inline and message.reasoning_content and not message.parts:
                item["content"] = f"<think>{message.reasoning_content}</think>\n{message.content}"
            elif not message.content:
                item["content"] = None
            if echo_reasoning and message.reasoning_content:
                item["reasoning_content"] = message.reasoning_content
            if echo_thinking_blocks and message.thinking_blocks:
                item["thinking_blocks"] = thinking_blocks.to_provider(message.thinking_blocks)
        if message.role == "tool":
            item["tool_call_id"] = message.tool_call_id
            if message.name:
                item["name"] = message.name
        out.append(item)
    return out
