"""Fixtures for the deployment tests: every overlay rendered once per session."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.support import K8S, OVERLAYS, renderer


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {overlay: renderer.render(K8S / "overlays" / overlay) for overlay in OVERLAYS}
