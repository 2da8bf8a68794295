"""Shared fixtures: one in-memory span exporter for the whole test process."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.common import telemetry
from services.common.settings import Config

_EXPORTER = InMemorySpanExporter()
telemetry.configure_tracing("tests", Config.load(env={}), exporter=_EXPORTER)


@pytest.fixture
def finished_spans():
    """Spans finished during the test (the exporter is cleared first)."""
    _EXPORTER.clear()
    return _EXPORTER
