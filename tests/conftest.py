"""Shared fixtures: one in-memory span exporter for the whole test process, and each async test on the
event loop its service runs on by default (services.common.event_loops)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.common import event_loops, telemetry
from services.common.settings import Config

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
