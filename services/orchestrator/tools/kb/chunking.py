"""Split text into overlapping windows of whitespace tokens, preferring paragraph and sentence ends.

A "token" here is a run of non-space characters: cheap, deterministic, and needs no tokenizer
download. A window holds at most `chunk_tokens` tokens; the next window starts `overlap` tokens
before the previous one ended. When a window would cut text, its end moves back (by at most a
quarter of the window) to the nearest paragraph break, else to the nearest sentence end.
Chunks keep their character offsets into the source text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?。！？;:]['\")\]]*$")


@dataclass(frozen=True)
class TextChunk:
    index: int
    content: str
    start: int
    end: int


def _snap(text: str, tokens: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Best window end in (lo, hi]: after a paragraph break, else after a sentence end, else hi."""
    for k in range(hi, lo, -1):
        if "\n\n" in text[tokens[k - 1][1] : tokens[k][0]] or "\n#" in text[tokens[k - 1][1] : tokens[k][0] + 1]:
            return k
    for k in range(hi, lo, -1):
        if _SENTENCE_END.search(text[tokens[k - 1][0] : tokens[k - 1][1]]):
            return k
    return hi


def chunk_text(text: str, chunk_tokens: int = 256, overlap: int = 32) -> list[TextChunk]:
    if chunk_tokens < 1 or not 0 <= overlap < chunk_tokens:
        raise ValueError("need chunk_tokens >= 1 and 0 <= overlap < chunk_tokens")
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    chunks: list[TextChunk] = []
    i = 0
    while i < len(tokens):
        j = min(i + chunk_tokens, len(tokens))
        if j < len(tokens):
            j = _snap(text, tokens, i + max(1, (chunk_tokens * 3) // 4), j)
        start, end = tokens[i][0], tokens[j - 1][1]
        chunks.append(TextChunk(len(chunks), text[start:end], start, end))
        if j >= len(tokens):
            break
        i = max(j - overlap, i + 1)
    return chunks
