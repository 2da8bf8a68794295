"""The one think splitter: provider output in, typed TEXT / THINK_START / THINK_DELTA / THINK_END out.

Used by both ChatStream (fed chunk by chunk) and Chat (fed the whole answer once, via `split`), so a
streamed answer and its non-streamed twin always agree.

Two sources of reasoning:
* field mode: the provider sends reasoning in a separate field (`reasoning_content`, vLLM's
  `reasoning`, Anthropic thinking blocks; litellm normalises them to `reasoning_content`). Content
  is then plain text: a literal "<think>" in it stays text.
* tag mode: the model writes reasoning inline between tags (default `<think>`/`</think>`,
  case-sensitive). Families whose chat template pre-fills the opening tag (R1 distills, QwQ) set
  `implicit_open`: everything before the first closing tag is reasoning - unless a reasoning field comes
  before any content (the server split the reasoning off): then it is field mode.
* auto (default): decided once, from the text itself, never from chunk boundaries. A reasoning field
  seen first selects field mode; otherwise the first non-whitespace content decides: it starts with
  an opening tag -> tag mode, else field mode (plain text).

Rules (spec §2.8): ThinkStart is emitted lazily on the first non-whitespace reasoning character, so
empty and whitespace-only blocks produce no events; leading whitespace of a block and of the answer
right after a block is dropped; repeated identical deltas are real content; a tag split across
chunks is held in a carry of at most len(tag)-1 characters; a stray closing tag is dropped; nested
opening tags inside a block are dropped; a block still open at the end gets ThinkEnd(truncated=True).
`with_reasoning=False` parses the same way but emits no think events.

Events are tuples `(kind, text)` (cheap to build on the hot path): kind is one of the constants below,
text is "" for THINK_START, and "truncated"/"" for THINK_END.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TEXT = 0
THINK_START = 1
THINK_DELTA = 2
THINK_END = 3

Event = tuple[int, str]

AUTO = "auto"
FIELD = "field"
TAG = "tag"

_BOM = "\ufeff"


@dataclass(frozen=True)
class ThinkFormat:
    """How a model family delivers reasoning."""

    mode: str = AUTO
    """"auto", "field" or "tag"."""
    tags: Sequence[tuple[str, str]] = (("<think>", "</think>"),)
    """Recognised (open, close) pairs, case-sensitive."""
    implicit_open: bool = False
    """Content starts inside a think block (template pre-filled the opening tag)."""


@dataclass
class SplitResult:
    """Non-streaming view of one answer."""

    text: str
    reasoning: str
    reasoning_truncated: bool


class ThinkSplitter:
    """Incremental state machine; feed content and reasoning deltas in arrival order, then finish()."""

    __slots__ = ("_fmt", "_with_reasoning", "_mode", "_in_think", "_block_open", "_carry", "_close", "_opens",
                 "_closes", "_max_tag", "_strip_answer", "_truncated", "_started_content")

    def __init__(self, fmt: ThinkFormat = ThinkFormat(), with_reasoning: bool = True):
        self._fmt = fmt
        self._with_reasoning = with_reasoning
        self._mode = TAG if fmt.implicit_open else fmt.mode
        self._in_think = fmt.implicit_open and fmt.mode != FIELD
        if fmt.implicit_open and fmt.mode == FIELD:
            self._mode = FIELD
        self._block_open = False  # ThinkStart emitted for the current block
        self._carry = ""
        self._opens = tuple(o for o, _ in fmt.tags)
        self._closes = tuple(c for _, c in fmt.tags)
        self._close = self._closes[0]
        self._max_tag = max(len(t) for pair in fmt.tags for t in pair)
        self._strip_answer = True  # drop leading whitespace of the answer (start, and after a block)
        self._truncated = False
        self._started_content = False

    @property
    def reasoning_truncated(self) -> bool:
        return self._truncated

    # -- reasoning fields ------------------------------------------------------------------------
    def feed_reasoning(self, text: str) -> list[Event]:
        if not text:
            return []
        out: list[Event] = []
        if self._mode == TAG and self._fmt.implicit_open and self._in_think and not self._started_content:
            # A reasoning field before any content: the server already split the reasoning off (vLLM's
            # reasoning parsers for R1 distills and QwQ), so the content is the answer, not more reasoning.
            self._mode = FIELD
            self._in_think = False
        if self._mode == AUTO:
            self._mode = FIELD
            if self._carry:  # undecided leading content was plain text after all
                self._emit_text(self._carry, out)
                self._carry = ""
        if self._mode == TAG and not self._in_think and self._carry:
            self._emit_text(self._carry, out)
            self._carry = ""
        self._emit_think(text, out)
        return out

    # -- content ---------------------------------------------------------------------------------
    def feed_content(self, text: str) -> list[Event]:
        if not text:
            return []
        out: list[Event] = []
        if self._block_open and not self._in_think:  # content after field reasoning closes that block
            self._end_block(out, truncated=False)
        if self._mode == TAG and not self._carry and self._started_content and "<" not in text:
            # Fast path for the common delta: no tag can start in it.
            if self._in_think:
                self._emit_think(text, out)
            else:
                self._emit_text(text, out)
            return out
        if not self._started_content:
            self._started_content = True
            if text[0] == _BOM:
                text = text[1:]
        mode = self._mode
        if mode == FIELD:
            self._emit_text(text, out)
            return out
        if mode == AUTO:
            buf = self._carry + text
            head = buf.lstrip()
            if not head:
                self._carry = buf
                return out
            if any(o.startswith(head) or head.startswith(o) for o in self._opens):
                if any(head.startswith(o) for o in self._opens):
                    self._mode = TAG
                    self._carry = ""
                    self._parse_tags(head, out)
                else:
                    self._carry = buf  # could still become an opening tag
                return out
            self._mode = FIELD
            self._carry = ""
            self._emit_text(buf, out)
            return out
        self._parse_tags(text, out)
        return out

    def finish(self, reasoning_complete: bool = False) -> list[Event]:
        """Flush the carry and close an open block.

        A block opened by a tag that never closed ended inside reasoning (truncated=True). A block opened by a
        reasoning field has no closing mark of its own: it is truncated unless the caller says the provider
        ended that reasoning normally (`reasoning_complete`: a finish reason other than length, e.g. STOP after
        reasoning alone, or tool calls after it)."""
        out: list[Event] = []
        carry, self._carry = self._carry, ""
        if self._in_think:
            if carry:
                self._emit_think(carry, out)
            self._in_think = False
            if self._block_open:
                self._end_block(out, truncated=True)
        else:
            if self._block_open:  # field mode: reasoning was the last thing sent
                self._end_block(out, truncated=not reasoning_complete)
            if carry:
                self._emit_text(carry, out)
        return out

    # -- internals -------------------------------------------------------------------------------
    def _parse_tags(self, text: str, out: list[Event]) -> None:
        buf = self._carry + text if self._carry else text
        self._carry = ""
        while buf:
            if self._in_think:
                close_at = buf.find(self._close)
                open_at, open_tag = self._find_open(buf)
                if open_at != -1 and (close_at == -1 or open_at < close_at):
                    self._emit_think(buf[:open_at], out)  # nested opening tag: dropped
                    buf = buf[open_at + len(open_tag):]
                    continue
                if close_at == -1:
                    keep = self._partial_suffix(buf)
                    self._emit_think(buf[: len(buf) - keep], out)
                    self._carry = buf[len(buf) - keep:]
                    return
                self._emit_think(buf[:close_at], out)
                buf = buf[close_at + len(self._close):]
                self._in_think = False
                if self._block_open:
                    self._end_block(out, truncated=False)
                self._strip_answer = True
                continue
            open_at, open_tag = self._find_open(buf)
            close_at, close_tag = self._find_close(buf)
            if close_at != -1 and (open_at == -1 or close_at < open_at):
                self._emit_text(buf[:close_at], out)  # stray closing tag: dropped
                buf = buf[close_at + len(close_tag):]
                continue
            if open_at == -1:
                keep = self._partial_suffix(buf)
                self._emit_text(buf[: len(buf) - keep], out)
                self._carry = buf[len(buf) - keep:]
                return
            self._emit_text(buf[:open_at], out)
            buf = buf[open_at + len(open_tag):]
            self._in_think = True
            self._close = self._closes[self._opens.index(open_tag)]

    def _find_open(self, buf: str) -> tuple[int, str]:
        best, tag = -1, ""
        for candidate in self._opens:
            at = buf.find(candidate)
            if at != -1 and (best == -1 or at < best):
                best, tag = at, candidate
        return best, tag

    def _find_close(self, buf: str) -> tuple[int, str]:
        best, tag = -1, ""
        for candidate in self._closes:
            at = buf.find(candidate)
            if at != -1 and (best == -1 or at < best):
                best, tag = at, candidate
        return best, tag

    def _partial_suffix(self, buf: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of some tag."""
        if "<" not in buf[-self._max_tag:]:
            return 0
        for size in range(min(len(buf), self._max_tag - 1), 0, -1):
            tail = buf[-size:]
            if tail[0] == "<":
                for tag in self._opens + self._closes:
                    if tag.startswith(tail):
                        return size
        return 0

    def _emit_think(self, text: str, out: list[Event]) -> None:
        if not text:
            return
        if not self._block_open:
            text = text.lstrip()
            if not text:
                return
            self._block_open = True
            if self._with_reasoning:
                out.append((THINK_START, ""))
        if self._with_reasoning:
            out.append((THINK_DELTA, text))

    def _end_block(self, out: list[Event], truncated: bool) -> None:
        self._block_open = False
        self._strip_answer = True
        if truncated:
            self._truncated = True
        if self._with_reasoning:
            out.append((THINK_END, "truncated" if truncated else ""))

    def _emit_text(self, text: str, out: list[Event]) -> None:
        if not text:
            return
        if self._strip_answer:
            text = text.lstrip()
            if not text:
                return
            self._strip_answer = False
        out.append((TEXT, text))


def split(content: str, reasoning: str | None = None, fmt: ThinkFormat = ThinkFormat(),
          with_reasoning: bool = True) -> SplitResult:
    """Non-streaming: the same state machine over the whole answer (reasoning field first)."""
    splitter = ThinkSplitter(fmt, with_reasoning=True)
    events = splitter.feed_reasoning(reasoning or "") + splitter.feed_content(content or "") + splitter.finish()
    text, thought = join(events)
    return SplitResult(text=text, reasoning=thought if with_reasoning else "", reasoning_truncated=splitter.reasoning_truncated)


def join(events: Iterable[Event]) -> tuple[str, str]:
    """Concatenate TEXT and THINK_DELTA events into (text, reasoning)."""
    text: list[str] = []
    thought: list[str] = []
    for kind, value in events:
        if kind == TEXT:
            text.append(value)
        elif kind == THINK_DELTA:
            thought.append(value)
    return "".join(text), "".join(thought)


def coalesce(events: Iterable[Event]) -> list[Event]:
    """Merge adjacent events of the same kind (TEXT, THINK_DELTA) for comparisons."""
    merged: list[Event] = []
    for kind, value in events:
        if merged and kind in (TEXT, THINK_DELTA) and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + value)
        else:
            merged.append((kind, value))
    return merged
