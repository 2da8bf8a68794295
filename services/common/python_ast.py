"""Parsing untrusted Python text (literals, code) without letting it break the interpreter.

CPython 3.11 keeps one AST-construction recursion counter per interpreter, not per thread. Two threads
parsing at once (gRPC worker threads do) can interleave on it and fail with a spurious
"SystemError: AST constructor recursion depth mismatch" (python/cpython#106905), so every parse in a
process that imports this module goes through one lock: not only ours, but also the standard library's
own (`traceback` parses source lines to place its carets whenever a traceback is formatted, in whatever
thread logs it), which is why `ast.parse` itself is replaced by a serialised one. Deeply nested input
raises RecursionError or MemoryError rather than SyntaxError; callers get all of them as `UnparsablePython`.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_PARSE_LOCK = threading.RLock()  # re-entrant: literal_eval calls the serialised parse below under it
_UNSERIALISED_PARSE = ast.parse


def _serialised_parse(*args: Any, **kwargs: Any) -> Any:
    with _PARSE_LOCK:
        return _UNSERIALISED_PARSE(*args, **kwargs)


if ast.parse is _UNSERIALISED_PARSE:
    ast.parse = _serialised_parse
_PARSE_FAILURES = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, SystemError)


class UnparsablePython(ValueError):
    """The text is not (safe, finite) Python of the kind asked for."""


def parse_module(code: str) -> ast.Module:
    with _PARSE_LOCK:
        try:
            return ast.parse(code)
        except _PARSE_FAILURES as exc:
            raise UnparsablePython(type(exc).__name__) from None


def literal(text: str) -> Any:
    """`ast.literal_eval` of untrusted text, serialised and with every failure as UnparsablePython."""
    with _PARSE_LOCK:
        try:
            return ast.literal_eval(text)
        except _PARSE_FAILURES as exc:
            raise UnparsablePython(type(exc).__name__) from None
