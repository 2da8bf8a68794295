"""Advisory static findings (off by default). They are never a security boundary: code can build any
name at run time, and the sandbox contains the job whether or not a finding was reported."""

from __future__ import annotations

import ast
import re

from services.common.python_ast import UnparsablePython, parse_module

_PY_MODULES = {"subprocess", "socket", "ctypes", "os", "shutil", "multiprocessing", "importlib"}
_JS_PATTERNS = {
    "child_process": re.compile(r"child_process"),
    "network": re.compile(r"require\(\s*['\"](?:node:)?(?:https?|net|dgram)['\"]"),
    "eval": re.compile(r"\beval\s*\(|\bFunction\s*\("),
}


def findings(language: str, code: str) -> list[str]:
    """Human-readable notes such as "imports subprocess (it runs without network or host files)"."""
    if language == "python":
        try:
            tree = parse_module(code)
        except UnparsablePython:
            return []
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
        return [f"imports {name} (it runs without network or host files)" for name in sorted(names & _PY_MODULES)]
    return [f"uses {label} (it runs without network or host files)" for label, rx in _JS_PATTERNS.items() if rx.search(code)]
