from __future__ import annotations

import pytest

from tests.http_api.stack import HttpCluster


@pytest.fixture(scope="package")
def cluster(tmp_path_factory):
    running = HttpCluster.started(tmp_path_factory.mktemp("http_api"))
    try:
        yield running
    finally:
        running.close()
