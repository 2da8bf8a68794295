"""Shared fixtures: one in-memory span exporter for the whole test process, and each async test on the
event loop its service runs on by default (services.common.event_loops)."""

from __future__ import annotations

import ast
import asyncio
import types
from pathlib import Path

import _pytest._code.source
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.common import event_loops, python_ast, telemetry
from services.common.settings import Config


def _parse_under_the_services_lock(*args, **kwargs):
    with python_ast.PARSE_LOCK:
        return ast.parse(*args, **kwargs)


# pytest parses a failing test's source to format its traceback. Unserialised, that parse can race a service
# thread of the same process on CPython 3.11's shared AST counter, and pytest then aborts the whole session
# with an INTERNALERROR instead of reporting the one failure.
_pytest._code.source.ast = types.SimpleNamespace(**{**vars(ast), "parse": _parse_under_the_services_lock})

_EXPORTER = InMemorySpanExporter()
telemetry.configure_tracing("tests", Config.load(env={}), exporter=_EXPORTER)
_STORE_TESTS = Path(__file__).parent / "canvas_store"
_STORE_LOOP = event_loops.loop_factory("auto", "tests")  # the store's default; the other services' is asyncio


def pytest_asyncio_loop_factories(config, item):
    if _STORE_LOOP is not None and _STORE_TESTS in Path(item.path).parents:
        return {"uvloop": _STORE_LOOP}
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture
def finished_spans():
    """Spans finished during the test (the exporter is cleared first)."""
    _EXPORTER.clear()
    return _EXPORTER
