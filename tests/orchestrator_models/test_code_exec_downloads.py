"""CodeExec as a node: its artifacts reach MessageEnd.downloads through whichever output the Message
references (a real sandbox socket; the servicer speaks the real protocol)."""

from __future__ import annotations

from services.orchestrator.tools import ToolRuntime, ToolsSettings
from tests.orchestrator.support.harness import dsl, finished, make_orchestrator, run_dsl
from tests.orchestrator_tools.support.sandbox_servicer import start_sandbox

SCRIPT = ("def main():\n"
          "    open('artifacts/chart.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\nfake')\n"
          "    return 'drawn'\n")


async def test_code_exec_node_artifacts_reach_message_end(tmp_path):
    server, address, _ = await start_sandbox()
    runtime = ToolRuntime(ToolsSettings.from_mapping({"code_exec": {"address": address, "timeout_s": 20}},
                                                     data_dir=tmp_path, env={}))
    try:
        canvas = dsl({
            "begin": {"type": "Begin", "down": ["code"]},
            "code": {"type": "CodeExec", "down": ["msg"], "params": {"lang": "python", "script": SCRIPT, "arguments": {},
                                                                    "outputs": {"result": {"type": "String", "value": ""}}}},
            "msg": {"type": "Message", "params": {"content": ["Result: {code@result}"]}},
        })
        orch = make_orchestrator(tools=runtime)
        _, events = await run_dsl(orch, canvas, "draw")
        assert finished(events)["status"] == 4, finished(events).get("error")
        end = [e for e in events if e.kind == "message_end"][0].data
        assert end["content"] == "Result: drawn"
        assert [(d["filename"], d["mime_type"]) for d in end["downloads"]] == [("chart.png", "image/png")]
        await orch.stop(0)
    finally:
        await runtime.aclose()
        await server.stop(None)
