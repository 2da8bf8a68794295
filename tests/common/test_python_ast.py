"""Untrusted Python text: every way a parse can fail surfaces as UnparsablePython, never as a crash."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from services.common.python_ast import UnparsablePython, literal, parse_module

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = {
    "deep attribute chain (RecursionError)": "x" + ".a" * 100_000,
    "deep unary chain (MemoryError in the parser)": "not " * 100_000 + "x",
    "deep signs": "-" * 100_000 + "1",
    "syntax error": "def broken(:",
    "NUL byte": "1\x002",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_is_unparsable_for_both_entry_points(text):
    with pytest.raises(UnparsablePython):
        literal(text)
    with pytest.raises(UnparsablePython):
        parse_module(text)


def test_literals_and_modules_still_parse_after_hostile_input():
    with pytest.raises(UnparsablePython):
        literal("x" + ".a" * 100_000)
    assert literal("{'a': [1, 2.5, None, True]}") == {"a": [1, 2.5, None, True]}
    assert [type(node).__name__ for node in parse_module("import os\nx = 1").body] == ["Import", "Assign"]


def test_parsing_from_many_threads_gives_every_caller_its_own_answer():
    results: dict[int, object] = {}

    def work(i: int) -> None:
        results[i] = [literal(f"[{i}, {{'k': {i}}}]") for _ in range(200)][-1]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: [i, {"k": i}] for i in range(8)}


def test_importing_the_services_serialises_every_parse_in_the_process():
    # traceback formatting parses too (its carets, through ast.parse), in whatever thread logs: the same lock
    probe = "import ast, services; print(ast.parse.__module__, ast.literal_eval('[1]'))"
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert shown.stdout.split() == ["services.common.python_ast", "[1]"]
