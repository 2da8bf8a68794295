"""The Jinja pass of Message and StringTransform: RAGFlow renders their text with Jinja after the references
are filled in (core/render.py stays the one reference renderer; this pass only runs `{% ... %}` control
structures).

The text is rendered in Jinja's sandbox, which keeps a template away from Python's internals but not from
the CPU or memory. Because references are filled in first, an end user's query can be part of the template,
so the pass also bounds what one render may cost:
- a time budget, checked on every line the compiled template runs (a trace function limited to the
  template's own frames), so nested loops end instead of keeping a worker thread busy after the node timed
  out;
- a size cap on `*` and `**`, on the size arguments of `str.ljust` and its kin, and on field widths in
  format strings (`%` and `str.format`), so one expression cannot allocate gigabytes.
Both, like unbounded recursion, fail the node with TEMPLATE_ERROR. Text that is not a valid template is kept
as it is.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import SandboxedEnvironment

from services.orchestrator.core.errors import NodeError

BUDGET_S = 5.0
"""Wall time one render may take."""
MAX_RESULT_CHARS = 1 << 20
"""The largest text, list or number (in bytes of digits' bits) one operation of a template may build."""
_TEMPLATE_FILE = "<template>"  # the file name Jinja gives code compiled from a string


class _TooCostly(Exception):
    pass


_SIZED_METHODS = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs"})
_HUGE_WIDTH = re.compile(r"\d{8,}")  # a field width of 10**7 characters or more, written in the format
_WIDTH_FROM_ARGUMENT = re.compile(r"%[-+ #0]*\*|\{[^{}]*:[^{}]*\{")  # '%*d', '{:>{w}}': the width is an argument


def _huge_ints(*values: Any) -> bool:
    return any(isinstance(value, int) and value > MAX_RESULT_CHARS for value in values)


def _bounded_filter(function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that takes the result's size (center, indent) refusing a huge one."""
    @functools.wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if _huge_ints(*args[1:], *kwargs.values()):
            raise _TooCostly("a size argument beyond the size limit")
        return function(*args, **kwargs)
    return bounded


class _BoundedSandbox(SandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self) -> None:
        super().__init__()
        for name in ("center", "indent"):  # compiled templates call filters directly, not through the environment
            self.filters[name] = _bounded_filter(self.filters[name])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%":
            if isinstance(left, str) and (_HUGE_WIDTH.search(left) or (
                    _WIDTH_FROM_ARGUMENT.search(left) and _huge_ints(*(right if isinstance(right, tuple) else (right,))))):
                raise _TooCostly("a format width beyond the size limit")
        elif operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, (str, list, tuple)) and isinstance(times, int) \
                        and len(sequence) * times > MAX_RESULT_CHARS:
                    raise _TooCostly("a repetition beyond the size limit")
        elif isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
                and right * left.bit_length() > 8 * MAX_RESULT_CHARS:
            raise _TooCostly("a power beyond the size limit")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's signature)
        method = getattr(__obj, "__wrapped__", __obj)  # the sandbox hands out str.format wrapped
        owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
        if isinstance(owner, str):
            huge = _huge_ints(*args, *kwargs.values())
            if name in _SIZED_METHODS and huge:  # padding methods take the result's size
                raise _TooCostly("a size argument beyond the size limit")
            if name in ("format", "format_map") and (_HUGE_WIDTH.search(owner) or (huge and _WIDTH_FROM_ARGUMENT.search(owner))):
                raise _TooCostly("a format width beyond the size limit")
        return super().call(__context, __obj, *args, **kwargs)


def render_jinja(text: str, budget_s: float = BUDGET_S) -> str:
    """`text` rendered as a Jinja template in the bounded sandbox (blocking: run it off the event loop)."""
    environment = _BoundedSandbox()
    try:
        template = environment.from_string(text)
    except TemplateError:
        return text
    deadline = time.monotonic() + budget_s

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _TooCostly(f"it ran longer than {budget_s:g} s")
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        return on_line if frame.f_code.co_filename == _TEMPLATE_FILE else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        return template.render()
    except TemplateError:
        return text
    except (RecursionError, MemoryError, _TooCostly) as exc:
        kind = {RecursionError: "recursion too deep", MemoryError: "result too large"}.get(type(exc), str(exc))
        raise NodeError(f"the template could not be rendered: {kind}", reason="TEMPLATE_ERROR") from None
    finally:
        sys.settrace(previous)
