"""The four services as processes (tests/e2e/cluster.py) plus the HTTP facade as a fifth, sharing one config."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.cluster import TOKEN, Cluster
from tests.support.cluster import free_port

__all__ = ["TOKEN", "HttpCluster"]


class HttpCluster(Cluster):
    def __init__(self, tmp: Path):
        super().__init__(tmp)
        self.ports["http_api"] = free_port()  # written into the shared config's addresses with the others

    async def start(self, routed_ids: set[str] = frozenset()) -> "HttpCluster":
        await super().start(routed_ids)
        try:
            await self.processes.spawn("http_api", "http_api", config_path=self.config_path, port=self.ports["http_api"])
        except TimeoutError:
            raise RuntimeError(f"http_api did not start: {self.log_tail('http_api')}") from None
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['http_api']}"

    @classmethod
    def started(cls, tmp: Path) -> "HttpCluster":
        cluster = cls(tmp)
        try:
            asyncio.run(cluster.start())
        except BaseException:
            cluster.close()
            raise
        return cluster
