"""Token counting per model family, offline, and fitting a conversation into a context window.

Tokenizers come only from files litellm ships inside its wheel (`litellm_core_utils/tokenizers`):
tiktoken's cl100k_base / p50k_base (TIKTOKEN_CACHE_DIR points there, so tiktoken never downloads) and
the Anthropic and DeepSeek HF tokenizer JSONs (read with `tokenizers`). The folder is located
without importing litellm. Families without a bundled tokenizer are counted with cl100k_base.

Counting follows OpenAI's chat accounting: 3 tokens per message plus role and content, 3 for the
reply primer, images a flat 85, tool schemas as their JSON.

Trimming (`fit`): keep the leading system messages and the last message, drop the oldest turns
first (the kept history always restarts at a user turn, so no orphan tool results), and when the last
message alone is too long, cut its middle so both its start and its question at the end survive.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from services.llm_gateway.core.types import Message, ToolSpec

PER_MESSAGE = 3
REPLY_PRIMER = 3
IMAGE_TOKENS = 85
CUT_MARKER = "\n[…]\n"

_lock = threading.Lock()
_cache: dict[str, tuple[Callable[[str], list[int]], Callable[[list[int]], str]]] = {}


def bundled_tokenizer_dir() -> Path:
    """litellm's bundled tokenizer folder, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("litellm is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"


def configure_offline_tokenizers() -> Path:
    """Point tiktoken at litellm's bundled encodings (never the network)."""
    folder = bundled_tokenizer_dir()
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", str(folder))
    return folder


_HF_FILES = {"claude": "anthropic_tokenizer.json", "deepseek": "deepseek_tokenizer.json"}


def tokenizer(name: str) -> tuple[Callable[[str], list[int]], Callable[[list[int]], str], str]:
    """(encode, decode, actual name); unknown names fall back to cl100k_base."""
    if name not in _HF_FILES and name not in ("cl100k_base", "p50k_base"):
        name = "cl100k_base"
    with _lock:
        if name not in _cache:
            folder = configure_offline_tokenizers()
            if name in _HF_FILES:
                from tokenizers import Tokenizer

                hf = Tokenizer.from_file(str(folder / _HF_FILES[name]))
                _cache[name] = (lambda text, _t=hf: _t.encode(text, add_special_tokens=False).ids,
                                lambda ids, _t=hf: _t.decode(ids))
            else:
                import tiktoken

                encoding = tiktoken.get_encoding(name)
                _cache[name] = (lambda text, _e=encoding: _e.encode(text, disallowed_special=()), encoding.decode)
        encode, decode = _cache[name]
    return encode, decode, name


def message_tokens(message: Message, encode: Callable[[str], list[int]]) -> int:
    total = PER_MESSAGE + len(encode(message.role))
    if message.parts:
        for part in message.parts:
            total += len(encode(part["text"])) if "text" in part else IMAGE_TOKENS
    elif message.content:
        total += len(encode(message.content))
    for call in message.tool_calls:
        total += len(encode(call.name)) + len(encode(call.arguments_json)) + 3
    if message.name:
        total += len(encode(message.name)) + 1
    return total


def count(messages: Sequence[Message], encode: Callable[[str], list[int]], tools: Sequence[ToolSpec] = ()) -> int:
    total = REPLY_PRIMER + sum(message_tokens(m, encode) for m in messages)
    for tool in tools:
        total += len(encode(tool.name + tool.description + json.dumps(tool.parameters))) + 8
    return total


def cut_middle(text: str, keep_tokens: int, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str]) -> str:
    ids = encode(text)
    if len(ids) <= keep_tokens:
        return text
    marker = len(encode(CUT_MARKER))
    room = max(keep_tokens - marker, 2)
    head = room // 3
    tail = room - head
    return decode(ids[:head]) + CUT_MARKER + decode(ids[-tail:])


def fit(messages: Sequence[Message], budget: int, tokenizer_name: str, tools: Sequence[ToolSpec] = ()) -> list[Message]:
    """The messages trimmed to `budget` tokens (see module docstring)."""
    encode, decode, _ = tokenizer(tokenizer_name)
    kept = list(messages)
    if count(kept, encode, tools) <= budget or not kept:
        return kept
    n_system = 0
    while n_system < len(kept) - 1 and kept[n_system].role == "system":
        n_system += 1
    system, middle, last = kept[:n_system], kept[n_system:-1], kept[-1]
    while middle and count(system + middle + [last], encode, tools) > budget:
        middle.pop(0)
        while middle and middle[0].role in ("tool", "assistant"):  # history restarts at a user turn
            middle.pop(0)
    kept = system + middle + [last]
    over = count(kept, encode, tools) - budget
    if over <= 0:
        return kept
    last_tokens = message_tokens(last, encode)
    if last.content and not last.parts:
        floor = PER_MESSAGE + len(encode(last.role)) + len(encode(CUT_MARKER)) + 8
        keep = max(last_tokens - over - PER_MESSAGE - len(encode(last.role)), floor)
        last = replace(last, content=cut_middle(last.content, keep, encode, decode))
        kept = system + middle + [last]
        over = count(kept, encode, tools) - budget
    if over > 0 and system and system[-1].content:
        target = system[-1]
        keep = max(message_tokens(target, encode) - over - PER_MESSAGE - 2, 8)
        system = system[:-1] + [replace(target, content=cut_middle(target.content, keep, encode, decode))]
        kept = system + middle + [last]
    return kept
