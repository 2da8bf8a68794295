"""One provider server per module (reused by all its cases, cleared between them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.register_assert_rewrite("tests.llm_gateway.providers.harness", "tests.llm_gateway.providers.openai_wire",
                               "tests.llm_gateway.providers.gemini_wire")

from tests.support.openai_server import ScriptedOpenAIServer  # noqa: E402


@pytest.fixture(scope="module")
def _module_server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def wire(_module_server: ScriptedOpenAIServer) -> ScriptedOpenAIServer:
    _module_server.clear()
    _module_server.fixed.clear()
    return _module_server
