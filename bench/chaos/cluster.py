"""The chaos suite's deployment: its own PostgreSQL and Redis, the scripted model, one store, one gateway, one
sandbox and two orchestrator replicas, each a process on loopback (tests/support/cluster.py), restartable on
the same port after a kill -9."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.chaos.infra import ChaosModel, OwnPostgres, OwnRedis
from tests.support.cluster import ProcessCluster

USER_TOKEN, SERVICE_TOKEN = "t-chaos-user", "t-chaos-svc"
TOKENS = [{"token": USER_TOKEN, "tenant": "acme", "user": "alice"},
          {"token": SERVICE_TOKEN, "tenant": "system", "user": "orchestrator", "role": "service"}]
KB_TEXT = """Renewable energy comes from sources that are naturally replenished: sunlight, wind, rain, tides,
waves and geothermal heat. Solar power and wind power are the fastest growing renewable energy sources."""
ORCHESTRATORS = ("orch-a", "orch-b")

# Begin -> Retrieval -> CodeExec -> LLM -> Message. The nodes that call out retry what a fault makes retryable
# (a peer restarting, the model's 500/429), so most runs ride a fault out; what cannot is FAILED with a reason.
RETRY = {"max_retries": 4, "delay_after_error": 1}
CANVAS = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["retrieval:0"], "upstream": []},
    "retrieval:0": {"obj": {"component_name": "Retrieval", "params": {
        "query": "{sys.query}", "top_n": 2, "similarity_threshold": 0.0, "empty_response": "nothing", **RETRY}},
        "downstream": ["code"], "upstream": ["begin"]},
    "code": {"obj": {"component_name": "CodeExec", "params": {
        "lang": "python3", "script": "import time\ndef main(q):\n    time.sleep(0.1)\n    return len(q)\n",
        "arguments": {"q": "{sys.query}"}, "outputs": {"n": {"type": "Number", "value": 0}}, **RETRY}},
        "downstream": ["llm"], "upstream": ["retrieval:0"]},
    "llm": {"obj": {"component_name": "LLM", "params": {
        "llm_id": "chaos", "sys_prompt": "Knowledge: {retrieval:0@formalized_content} n={code@n}",
        "prompts": [{"role": "user", "content": "{sys.query}"}], **RETRY}},
        "downstream": ["msg"], "upstream": ["code"]},
    "msg": {"obj": {"component_name": "Message", "params": {"content": ["{llm@content}"]}},
            "downstream": [], "upstream": ["llm"]},
}}


class ChaosCluster:
    def __init__(self, *, lease_ttl_ms: int = 2000) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ac-chaos-"))
        self.processes = ProcessCluster(self.tmp / "processes", tokens=TOKENS, log_level="WARNING")
        self.postgres: OwnPostgres | None = None
        self.redis: OwnRedis | None = None
        self.model = ChaosModel()
        self.lease_ttl_ms = lease_ttl_ms
        self._spawn: dict[str, dict[str, Any]] = {}

    async def start(self) -> "ChaosCluster":
        self.processes.workdir.mkdir(parents=True, exist_ok=True)
        self.postgres = await asyncio.to_thread(lambda: OwnPostgres().start())
        self.redis = await asyncio.to_thread(lambda: OwnRedis().start())
        self.model.start()
        kb = self.tmp / "kb.sqlite"
        await asyncio.to_thread(self._seed_kb, kb)
        tools = {"retrieval": {"backend": "embedded", "embedded": {"path": str(kb)}}}
        models = {"*": {"model": "openai/chaos", "api_base": self.model.base_url, "api_key": "sk-chaos"}}
        await self._start("store", "canvas_store", {"database_url": self.postgres.url, "seed_templates": False})
        await self._start("gateway", "llm_gateway", {"models": models, "embedded": {"enabled": False}})
        # Its own work_root: the default (<tmp>/agentcanvas-sandbox) is shared by every sandbox on the machine, and
        # each one that starts replaces the runner there, failing the worker spawns of the others meanwhile.
        work_root = self.tmp / "sandbox"
        work_root.mkdir()
        os.chmod(self.tmp, 0o711)  # the sandbox's uid 65534 must reach its job directories
        await self._start("sandbox", "sandbox", {"backend": "local", "pool": {"python": 2, "nodejs": 0},
                                                 "work_root": str(work_root)})
        for name in ORCHESTRATORS:
            await self._start(name, "orchestrator", {
                "holder": name, "service_token": SERVICE_TOKEN, "redis_url": self.redis.url, "flush_interval_ms": 5,
                "lease_ttl_ms": self.lease_ttl_ms, "takeover_interval_s": 0.5, "heartbeat_interval_s": 1,
                "max_runs_per_tenant": 32}, extra={"tools": tools})
        return self

    def _seed_kb(self, path: Path) -> None:
        from services.common.settings import Config
        from services.orchestrator.tools import kb_cli

        doc = self.tmp / "renewable_energy.md"
        doc.write_text(KB_TEXT)
        config = self.tmp / "kb.yaml"
        config.write_text(yaml.safe_dump({"data_dir": str(self.tmp),
                                          "tools": {"retrieval": {"backend": "embedded", "embedded": {"path": str(path)}}}}))
        kb_cli.add([doc], Config.load(str(config)), env={})

    async def _start(self, name: str, service: str, section: dict[str, Any], **kwargs: Any) -> None:
        addresses = {peer: process.address for peer, process in (
            ("canvas_store", self.processes.processes.get("store")), ("llm_gateway", self.processes.processes.get("gateway")),
            ("sandbox", self.processes.processes.get("sandbox"))) if process is not None}
        known = self._spawn.get(name)
        if known is None:
            known = self._spawn[name] = {"service": service, "section": section, "addresses": addresses, **kwargs}
        process = self.processes.processes.get(name)
        await self.processes.spawn(name, known["service"], known["section"], addresses=known["addresses"],
                                   extra=known.get("extra"), port=process.port if process else None, timeout=120)

    def address(self, name: str) -> str:
        return self.processes.processes[name].address

    async def kill(self, name: str) -> None:
        await asyncio.to_thread(self.processes.kill, name)

    async def restart(self, name: str) -> None:
        """Start a killed process again on its port (with its config)."""
        await self._start(name, self._spawn[name]["service"], self._spawn[name]["section"])

    def close(self, keep_logs: Path | None = None) -> None:
        with contextlib.suppress(Exception):
            self.processes.close()
        if keep_logs is not None:
            keep_logs.mkdir(parents=True, exist_ok=True)
            for log in self.processes.workdir.glob("*.log"):
                shutil.copy(log, keep_logs / log.name)
        self.model.close()
        for part in (self.redis, self.postgres):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
