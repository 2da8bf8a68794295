"""Four real service processes (canvas_store on SQLite, llm_gateway, sandbox, orchestrator) sharing
one config file, with the generic scripted model and the local web-API servers behind them."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import ProcessCluster, free_port
from tests.support.generic_llm import generic_reply
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.web_apis import WebApis, start_web_apis

TOKEN = "t-e2e"
SERVICES = ("canvas_store", "llm_gateway", "sandbox", "orchestrator")
KB_TEXT = """Renewable energy comes from sources that are naturally replenished: sunlight, wind, rain, tides,
waves and geothermal heat. Solar power and wind power are the fastest growing renewable energy sources.
Energy storage such as batteries makes renewable energy available when the sun does not shine."""
SQL_DB = "rag_flow.sqlite"
SQL_ROWS = [("geothermal", 3), ("solar", 41), ("wind", 56)]


def cluster_config(data_dir: Path, model_url: str, apis: WebApis, ports: dict[str, int],
                   routed_ids: set[str] = frozenset()) -> dict[str, Any]:
    scripted = {"model": "openai/{model}", "api_base": model_url, "api_key": "sk-scripted"}
    extra_models = {llm_id: {"model": "openai/routed", "api_base": model_url, "api_key": "sk-scripted"} for llm_id in routed_ids}
    tools = apis.tools_config()
    tools["retrieval"] = {"backend": "embedded", "embedded": {"path": str(data_dir / "kb.sqlite")}}
    # The G0 exesql example names database `rag_flow`: a real SQLite file (seeded by Cluster.start).
    tools["exesql"] = {"databases": {"rag_flow": {"url": f"sqlite:///{data_dir / SQL_DB}"}}}
    return {
        "data_dir": str(data_dir),
        "auth": {"embedded": False, "tokens": [{"token": TOKEN, "tenant": "acme", "user": "alice"}]},
        "addresses": {name: f"127.0.0.1:{port}" for name, port in ports.items()},
        "log": {"level": "WARNING"},
        "store": {"database_url": f"sqlite:///{data_dir / 'store.db'}", "seed_templates": False},
        "gateway": {
            "embedded": {"enabled": False},
            "retry": {"max_attempts": 1},
            "models": {"": {"model": "openai/generic-default", "api_base": model_url, "api_key": "sk-scripted"},
                       "*": scripted, **extra_models},
        },
        "sandbox": {"backend": "local", "pool": {"python": 1, "nodejs": 0}},
        # Two turns per conversation loop, so a corpus conversation ends after one resume.
        "orchestrator": {"flush_interval_ms": 5, "service_token": TOKEN, "conversation_max_turns": 2},
        "tools": tools,
    }


class Cluster:
    """Start with `Cluster.start(tmp)`; `close()` stops everything it started."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.stack = ExitStack()
        self.processes = ProcessCluster(tmp / "processes", tokens=[])
        self.ports = {name: free_port() for name in SERVICES}
        self.model = ScriptedOpenAIServer(default=generic_reply)
        self.apis: WebApis | None = None
        self.config_path = tmp / "agent-canvas.yaml"

    def address(self, service: str) -> str:
        return f"127.0.0.1:{self.ports[service]}"

    async def start(self, routed_ids: set[str] = frozenset()) -> "Cluster":
        self.model.start()
        self.stack.callback(self.model.stop)
        self.apis = self.stack.enter_context(start_web_apis())
        data_dir = self.tmp / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        self.processes.workdir.mkdir(parents=True, exist_ok=True)
        config = cluster_config(data_dir, self.model.base_url, self.apis, self.ports, routed_ids)
        self.config_path.write_text(yaml.safe_dump(config))
        self._seed_kb(data_dir)
        self._seed_sql(data_dir)
        for name in SERVICES:
            try:
                await self.processes.spawn(name, name, config_path=self.config_path, port=self.ports[name])
            except TimeoutError:
                raise RuntimeError(f"{name} did not start: {self.log_tail(name)}") from None
        return self

    def _seed_kb(self, data_dir: Path) -> None:
        from services.common.settings import Config
        from services.orchestrator.tools import kb_cli

        doc = self.tmp / "renewable_energy.md"
        doc.write_text(KB_TEXT)
        kb_cli.add([doc], Config.load(str(self.config_path)), env={})

    @staticmethod
    def _seed_sql(data_dir: Path) -> None:
        import sqlite3

        with sqlite3.connect(data_dir / SQL_DB) as db:
            db.execute("CREATE TABLE energy_sources (name TEXT PRIMARY KEY, share INTEGER)")
            db.executemany("INSERT INTO energy_sources VALUES (?, ?)", SQL_ROWS)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return self.processes.log_tail(name, chars)

    def close(self) -> None:
        self.processes.close()
        self.stack.close()
