"""Parsing untrusted Python text (literals, code) without letting it break the interpreter.

CPython 3.11 keeps one AST-construction recursion counter per interpreter, not per thread. Two threads
parsing at once (gRPC worker threads do) can interleave on it and fail with a spurious
"SystemError: AST constructor recursion depth mismatch" (python/cpython#106905), so every parse in a
service goes through one lock. Deeply nested input raises RecursionError or MemoryError rather than
SyntaxError; callers get all of them as `UnparsablePython`.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

PARSE_LOCK = threading.Lock()
"""Held around every parse in this process; code that parses outside this module (a test runner formatting a
traceback) takes it too, or it can race a service thread on the shared counter."""
_PARSE_FAILURES = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, SystemError)


class UnparsablePython(ValueError):
    """The text is not (safe, finite) Python of the kind asked for."""


def parse_module(code: str) -> ast.Module:
    with PARSE_LOCK:
        try:
            return ast.parse(code)
        except _PARSE_FAILURES as exc:
            raise UnparsablePython(type(exc).__name__) from None


def literal(text: str) -> Any:
    """`ast.literal_eval` of untrusted text, serialised and with every failure as UnparsablePython."""
    with PARSE_LOCK:
        try:
            return ast.literal_eval(text)
        except _PARSE_FAILURES as exc:
            raise UnparsablePython(type(exc).__name__) from None
