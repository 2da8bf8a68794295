from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.orchestrator.tools.config import ToolsSettings
from services.orchestrator.tools.runtime import ToolRuntime
from tests.support.web_apis import WebApis, start_web_apis


@pytest.fixture(scope="session")
def web_apis() -> Iterator[WebApis]:
    with start_web_apis() as apis:
        yield apis


def make_settings(section: dict[str, Any], data_dir: Path, **kwargs: Any) -> ToolsSettings:
    return ToolsSettings.from_mapping(section, data_dir=data_dir, env={}, **kwargs)


@pytest.fixture
async def runtime(web_apis: WebApis, tmp_path: Path) -> AsyncIterator[ToolRuntime]:
    rt = ToolRuntime(make_settings(web_apis.tools_config(), tmp_path))
    yield rt
    await rt.aclose()
