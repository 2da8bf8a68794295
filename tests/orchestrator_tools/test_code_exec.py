"""CodeExec over a real gRPC socket to a Sandbox servicer that runs code in a subprocess."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcanvas.v1 import sandbox_pb2
from services.orchestrator.tools.code_exec import CodeExec, ExecOutcome, matches_type, parse_value
from services.orchestrator.tools.errors import ToolExecutionError, ToolInputError, ToolTimeoutError, ToolUpstreamError
from services.orchestrator.tools.runtime import ToolRuntime
from tests.orchestrator_tools.conftest import make_settings
from tests.orchestrator_tools.support.sandbox_servicer import SubprocessSandbox, start_sandbox


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[tuple[ToolRuntime, SubprocessSandbox]]:
    server, address, servicer = await start_sandbox()
    runtime = ToolRuntime(make_settings({"code_exec": {"address": address, "timeout_s": 20, "token": "svc-token"}}, tmp_path))
    yield runtime, servicer
    await runtime.aclose()
    await server.stop(None)


async def test_main_result_is_the_business_output(sandbox):
    runtime, servicer = sandbox
    script = "def main(a, b):\n    print('working')\n    return {'sum': a + b, 'items': [a, b]}\n"
    result = await CodeExec().invoke(
        {},
        params={"lang": "python3", "script": script, "arguments": {"a": 2, "b": 3}, "outputs": {"result": {"type": "Object", "value": ""}}},
        context=runtime.context(request_id="run1:code:1"),
    )
    assert result.ok, result.error
    assert result.outputs["result"] == {"sum": 5, "items": [2, 3]}
    assert result.outputs["actual_type"] == "Object"
    assert result.outputs["content"] == json.dumps({"sum": 5, "items": [2, 3]}, sort_keys=True, indent=2)
    assert json.loads(result.content)["result"] == {"sum": 5, "items": [2, 3]}
    request = servicer.requests[-1]
    assert request.language == "python" and request.mode == sandbox_pb2.EXEC_MODE_MAIN_FUNCTION
    assert request.request_id == "run1:code:1" and request.limits.wall_time_ms == 20_000
    assert servicer.metadata[-1]["authorization"] == "Bearer svc-token"


async def test_model_call_with_lang_and_script_and_argument_override(sandbox):
    runtime, servicer = sandbox
    result = await CodeExec().invoke(
        {"lang": "python", "script": "def main(name):\n    return 'hi ' + name\n", "name": "model"},
        params={"arguments": {"name": "from-dsl"}, "outputs": {"greeting": {"type": "String"}}},
        context=runtime.context(),
    )
    assert result.ok, result.error
    assert result.outputs["greeting"] == "hi model" and result.outputs["content"] == "hi model"


async def test_artifacts_become_downloads(sandbox):
    runtime, _ = sandbox
    script = (
        "def main():\n"
        "    open('artifacts/data.csv', 'w').write('a,b\\n1,2\\n')\n"
        "    open('artifacts/dot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\nfake')\n"
        "    return 'done'\n"
    )
    result = await CodeExec().invoke({"lang": "python", "script": script}, params={}, context=runtime.context(request_id="r:n:1"))
    assert result.ok, result.error
    names = [d.filename for d in result.downloads]
    assert names == ["data.csv", "dot.png"]
    csv = result.downloads[0]
    assert csv.mime_type == "text/csv" and base64.b64decode(csv.base64) == b"a,b\n1,2\n" and csv.size == 8
    assert len({d.doc_id for d in result.downloads}) == 2
    assert result.downloads[0].to_dict().keys() == {"doc_id", "filename", "mime_type", "size", "base64"}
    assert f"![dot.png](attachment://{result.downloads[1].doc_id})" in result.outputs["attachments"]
    assert result.outputs["_ATTACHMENT_CONTENT"].startswith("attachment_count: 2")
    assert "a,b\n1,2" in result.outputs["content"]
    assert [a["name"] for a in result.outputs["_ARTIFACTS"]] == ["data.csv", "dot.png"]


async def test_exception_in_main_is_a_typed_error(sandbox):
    runtime, _ = sandbox
    result = await CodeExec().invoke({"lang": "python", "script": "def main():\n    raise ValueError('boom')\n"}, params={}, context=runtime.context())
    assert isinstance(result.error, ToolExecutionError)
    assert "ValueError: boom" in result.error.message
    assert result.outputs["_ERROR"].endswith("ValueError: boom")


async def test_declared_type_is_checked(sandbox):
    runtime, _ = sandbox
    result = await CodeExec().invoke(
        {"lang": "python", "script": "def main():\n    return [1, 'x']\n"},
        params={"outputs": {"numbers": {"type": "Array<Number>"}}},
        context=runtime.context(),
    )
    assert isinstance(result.error, ToolExecutionError)
    assert result.outputs["numbers"] is None and "Array<Number>" in result.outputs["_ERROR"]
    assert result.outputs["content"] == json.dumps([1, "x"], indent=2)


async def test_wall_time_limit_is_a_typed_timeout(tmp_path: Path):
    server, address, _ = await start_sandbox()
    runtime = ToolRuntime(make_settings({"code_exec": {"address": address, "timeout_s": 0.5}}, tmp_path))
    try:
        result = await CodeExec().invoke({"lang": "python", "script": "def main():\n    while True:\n        pass\n"}, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
        await server.stop(None)
    assert isinstance(result.error, ToolTimeoutError)


async def test_input_errors(sandbox):
    runtime, _ = sandbox
    tool = CodeExec()
    no_code = await tool.invoke({"lang": "python", "script": " "}, params={}, context=runtime.context())
    assert isinstance(no_code.error, ToolInputError) and no_code.error.field == "script"
    bad_lang = await tool.invoke({"lang": "cobol", "script": "x"}, params={}, context=runtime.context())
    assert isinstance(bad_lang.error, ToolInputError) and bad_lang.error.field == "lang"
    rejected = await tool.invoke({"lang": "javascript", "script": "function main(){return 1}"}, params={}, context=runtime.context())
    assert isinstance(rejected.error, ToolInputError) and "not available" in rejected.error.message
    two = tool.validate({"outputs": {"a": {"type": "String"}, "b": {"type": "String"}}}, runtime.context())
    assert [p.field for p in two] == ["outputs"]


async def test_unreachable_sandbox_is_a_typed_error(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runtime = ToolRuntime(make_settings({"code_exec": {"address": f"127.0.0.1:{port}", "timeout_s": 1}}, tmp_path))
    try:
        result = await CodeExec().invoke({"lang": "python", "script": "def main():\n    return 1\n"}, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, (ToolUpstreamError, ToolTimeoutError)), result.error


def test_result_parsing_fallbacks():
    assert parse_value(ExecOutcome(result_json='{"a": 1}', stdout="ignored")) == (True, {"a": 1})
    assert parse_value(ExecOutcome(stdout='[1, 2]\n')) == (True, [1, 2])
    assert parse_value(ExecOutcome(stdout="{'a': (1, 2)}")) == (True, {"a": (1, 2)})
    assert parse_value(ExecOutcome(stdout="plain words")) == (True, "plain words")
    assert parse_value(ExecOutcome()) == (False, None)
    assert parse_value(ExecOutcome(result_json="{not json", stdout="7")) == (True, 7)
    assert matches_type([1, 2], "array<number>") and not matches_type([1, "x"], "Array<Number>")
    assert matches_type(True, "Boolean") and not matches_type(1, "Boolean") and matches_type(None, "any")
