"""The Node.js client in client.test.mjs, against the real services on ephemeral ports.

The services run in this process through the CLI's own stack (services.cli.stack), the gateway talks
HTTP to the scripted OpenAI-compatible server, and Node talks gRPC to the store and orchestrator
using nothing but protos/.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from services.cli.stack import open_stack
from services.common.settings import Config
from tests.support import openai_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


async def test_node_client_creates_and_runs_a_canvas(tmp_path):
    assert shutil.which("node"), "Node.js is required (scripts/setup.sh --test installs it)"
    assert (HERE / "node_modules" / "@grpc" / "grpc-js").is_dir(), "run `npm ci` in tests/polyglot (scripts/setup.sh --test does)"
    with openai_server.ScriptedOpenAIServer() as provider:
        config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides({
            "gateway": {"embedded": {"enabled": False},
                        "models": {"*": {"model": "openai/test-model", "api_base": provider.base_url, "api_key": "sk-test"}}},
            "sandbox": {"pool": {"python": 0, "nodejs": 0}},
        })
        stack = await open_stack(config, ["orchestrator", "canvas_store"], mode="embedded")
        try:
            env = dict(os.environ, PROTO_ROOT=str(ROOT / "protos"), AGENT_CANVAS_TOKEN=stack.token or "",
                       CANVAS_STORE_ADDR=stack.address("canvas_store"), ORCHESTRATOR_ADDR=stack.address("orchestrator"))
            node = await asyncio.create_subprocess_exec(
                "node", "--test", "--test-reporter=spec", str(HERE / "client.test.mjs"),
                cwd=HERE, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            output, _ = await asyncio.wait_for(node.communicate(), timeout=240)
        finally:
            await stack.close()
    text = output.decode()
    assert node.returncode == 0, text
    assert "pass 4" in text and "fail 0" in text, text
    # The model really was called over HTTP by the gateway.
    assert provider.chat_bodies
