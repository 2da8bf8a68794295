"""Model control tokens that leak into the text, removed before the think splitter sees it.

Some model families emit their chat template's sentinel tokens as plain text (MiniMax: `]~b]` role starts,
`[e~[` message ends, `]<]minimax[>[`-style bracketed sentinels around tool calls and media). They are never
part of an answer. A stream can split one across deltas, so a suffix that could still become a marker is
held back (at most one marker's length) until the next delta decides; prose that merely names the model
("MiniMax") is never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class MarkerSet:
    """A family's control tokens: fixed strings, and an open/close pair that brackets a short name."""

    fixed: tuple[str, ...] = ()
    open: str = ""
    close: str = ""
    max_name: int = 48

    def pattern(self) -> re.Pattern[str]:
        parts = [re.escape(token) for token in sorted(self.fixed, key=len, reverse=True)]
        if self.open:
            parts.insert(0, f"{re.escape(self.open)}[^\\[\\]<>\\n]{{1,{self.max_name}}}{re.escape(self.close)}")
        return re.compile("|".join(parts))


# MiniMax-Text-01 / M1 / M2 chat templates (their tokenizer_config.json on huggingface.co/MiniMaxAI): `]~!b[`
# begins the text, `]~b]` starts a role, `[e~[` ends a message; `]<]…[>[` brackets special names.
MINIMAX = MarkerSet(fixed=("]~!b[", "]~b]", "[e~[", "]!d~[", "]!p~["), open="]<]", close="[>[")


class MarkerFilter:
    """Streaming remover: feed() deltas in order, then finish(); the output never contains a whole marker."""

    __slots__ = ("_set", "_re", "_carry", "_starts", "_prefix")

    def __init__(self, markers: MarkerSet):
        self._set = markers
        self._re = markers.pattern()
        self._carry = ""
        self._starts = frozenset(t[0] for t in (*markers.fixed, markers.open) if t)
        self._prefix = re.compile(f"{re.escape(markers.open)}[^\\[\\]<>\\n]{{0,{markers.max_name}}}"
                                  f"({'|'.join(re.escape(markers.close[:i]) for i in range(len(markers.close), 0, -1))})?")

    def feed(self, text: str) -> str:
        buf = self._carry + text if self._carry else text
        if not buf:
            return ""
        buf = self._re.sub("", buf)
        keep = self._hold(buf)
        self._carry = buf[len(buf) - keep:] if keep else ""
        return buf[: len(buf) - keep] if keep else buf

    def finish(self) -> str:
        carry, self._carry = self._carry, ""
        return self._re.sub("", carry)

    def clean(self, text: str) -> str:
        """A whole text at once."""
        return self._re.sub("", text)

    def _hold(self, buf: str) -> int:
        """Length of the longest suffix that could still grow into a marker."""
        window = len(self._set.open) + self._set.max_name + len(self._set.close)
        start = max(0, len(buf) - window)
        for i in range(start, len(buf)):
            if buf[i] not in self._starts:
                continue
            tail = buf[i:]
            if any(token.startswith(tail) for token in self._set.fixed):
                return len(tail)
            if self._set.open and (self._set.open.startswith(tail) or self._prefix.fullmatch(tail)):
                return len(tail)
        return 0
