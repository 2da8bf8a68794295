"""Functional behaviour over a real gRPC server, on both backends: streaming, results, artifacts,
every exit reason, cancellation, runtimes and request validation."""

from __future__ import annotations

import asyncio
import secrets
import struct
import subprocess

import grpc
import pytest
from agentcanvas.v1 import sandbox_pb2

from tests.sandbox.harness import BLOCKING_PYTHON, METADATA, release


async def test_list_runtimes_reports_real_versions(sandbox):
    reply = await sandbox.stub.ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=METADATA)
    by_language = {r.language: r for r in reply.runtimes}
    python_version = subprocess.run(["/usr/bin/python3", "--version"], capture_output=True, text=True).stdout.split()[1]
    node_version = subprocess.run(["/usr/bin/node", "--version"], capture_output=True, text=True).stdout.strip().lstrip("v")
    assert by_language["python"].version == python_version
    assert by_language["nodejs"].version == node_version
    assert "python3" in by_language["python"].aliases and "javascript" in by_language["nodejs"].aliases
    assert {r.backend for r in reply.runtimes} == {sandbox.name}


async def test_output_streams_before_the_job_ends(sandbox):
    token = secrets.token_hex(4)
    request = sandbox_pb2.ExecuteRequest(language="python", code=BLOCKING_PYTHON.format(token=token),
                                         limits=sandbox_pb2.ResourceLimits(wall_time_ms=60_000))
    call = sandbox.stub.Execute(request, metadata=METADATA)
    seen = []
    printed = b""
    while not printed.endswith(b"\n"):
        event = await call.read()
        seen.append(event)
        if event.WhichOneof("event") == "stdout":
            printed += event.stdout.data
    assert seen[0].WhichOneof("event") == "started"
    assert all(e.WhichOneof("event") != "exit" for e in seen)  # the job is still blocked
    hostname = printed.decode().split()[1]
    await release(sandbox, token, hostname)
    while (event := await call.read()) != grpc.aio.EOF:
        seen.append(event)
    kinds = [e.WhichOneof("event") for e in seen]
    text = [e.stdout.data for e in seen if e.WhichOneof("event") == "stdout"]
    assert b"second" in b"".join(text) and kinds[-1] == "exit"
    assert seen[-1].exit.reason == sandbox_pb2.EXIT_REASON_OK
    await sandbox.no_leftovers()


@pytest.mark.parametrize("language,alias", [("python", "python3"), ("nodejs", "javascript")])
async def test_main_function_result_with_arguments(sandbox, language, alias):
    code = {
        "python": "def main(a, b, name='x'):\n    print('computing')\n    return {'sum': a + b, 'name': name, 'items': [1, 2.5, None]}\n",
        "nodejs": "async function main(args) {\n  console.log('computing');\n  return {sum: args.a + args.b, name: args.name, items: [1, 2.5, null]};\n}\n",
    }[language]
    for name in (language, alias):
        outcome = await sandbox.run(code, name, arguments={"a": 2, "b": 40, "name": "canvas"})
        assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
        assert outcome.result == {"sum": 42, "name": "canvas", "items": [1, 2.5, None]}
        assert outcome.stdout == "computing\n"
        started = outcome.of("started")[0]
        assert started.language == language and started.backend == sandbox.name


async def test_script_mode_has_no_result_and_main_is_not_called(sandbox):
    outcome = await sandbox.run("def main():\n    print('called')\nprint('top')\n", mode=sandbox_pb2.EXEC_MODE_SCRIPT)
    assert outcome.stdout == "top\n" and outcome.result is None and outcome.reason == "EXIT_REASON_OK"


async def test_main_mode_without_main_is_an_error(sandbox):
    outcome = await sandbox.run("x = 1\n", mode=sandbox_pb2.EXEC_MODE_MAIN_FUNCTION)
    assert outcome.reason == "EXIT_REASON_ERROR" and "main" in outcome.exit.message


async def test_exception_in_main_is_error_with_message(sandbox):
    outcome = await sandbox.run("def main():\n    raise ValueError('bad input')\n")
    assert outcome.reason == "EXIT_REASON_ERROR"
    assert outcome.exit.message == "ValueError: bad input"
    assert "Traceback" in outcome.stderr and "python_runner" not in outcome.stderr
    assert outcome.exit.code == 1


async def test_node_exception_is_error(sandbox):
    outcome = await sandbox.run("function main() { throw new TypeError('nope'); }", "nodejs")
    assert outcome.reason == "EXIT_REASON_ERROR" and "TypeError: nope" in outcome.exit.message


@pytest.mark.parametrize("code,reason", [
    ("function main() { return new Promise(() => {}); }", "EXIT_REASON_ERROR"),
    ("async function main() { await new Promise(() => {}); return 1; }", "EXIT_REASON_ERROR"),
    ("async function main() { await new Promise((r) => setTimeout(r, 20)); return 1; }", "EXIT_REASON_OK"),
    ("function main() { process.exit(0); }", "EXIT_REASON_OK"),  # an explicit exit, as Python's sys.exit(0)
])
async def test_node_main_promise_that_never_settles_is_an_error(sandbox, code, reason):
    """Node exits with 0 once nothing is left to wait on, and the runner used to report that as OK."""
    outcome = await sandbox.run(code, "nodejs")
    assert outcome.reason == reason, (outcome.exit, outcome.stderr[-1000:])
    if reason == "EXIT_REASON_ERROR":
        assert "never settled" in outcome.exit.message and outcome.exit.code == 1 and outcome.result is None
        assert "node_runner" not in outcome.stderr


async def test_python_async_main_is_awaited_like_nodes(sandbox):
    code = ("import asyncio\n"
            "async def main(n):\n"
            "    await asyncio.sleep(0)\n"
            "    return {'n': n * 2}\n")
    outcome = await sandbox.run(code, "python", arguments={"n": 21})
    assert outcome.reason == "EXIT_REASON_OK" and outcome.result == {"n": 42}, (outcome.exit, outcome.stderr[-1000:])
    assert "RuntimeWarning" not in outcome.stderr


async def test_matplotlib_png_comes_back_as_an_artifact(sandbox):
    code = (
        "import matplotlib.pyplot as plt\n"
        "def main():\n"
        "    fig, ax = plt.subplots()\n"
        "    ax.plot([1, 2, 3], [3, 1, 2])\n"
        "    fig.savefig('artifacts/chart.png')\n"
        "    open('artifacts/data.csv', 'w').write('a,b\\n1,2\\n')\n"
        "    return 'ok'\n"
    )
    outcome = await sandbox.run(code, wall_time_ms=60_000, cpu_time_ms=60_000, memory_bytes=512 << 20)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    artifacts = {a.name: a for a in outcome.artifacts}
    png = artifacts["chart.png"]
    assert png.mime_type == "image/png" and png.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert png.size == len(png.content) and not png.truncated
    width, height = struct.unpack(">II", png.content[16:24])
    assert width > 100 and height > 100
    assert artifacts["data.csv"].mime_type == "text/csv" and artifacts["data.csv"].content == b"a,b\n1,2\n"


async def test_pandas_dataframe_runs(sandbox):
    """RAGFlow suite case 8."""
    code = "import pandas as pd\ndef main():\n    df = pd.DataFrame({'a': [1, 2, 3]})\n    return int(df['a'].sum())\n"
    outcome = await sandbox.run(code, wall_time_ms=60_000, cpu_time_ms=60_000, memory_bytes=512 << 20)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    assert outcome.result == 6


async def test_artifact_caps_names_and_symlinks(sandbox):
    code = (
        "import os\n"
        "os.makedirs('artifacts', exist_ok=True)\n"
        "open('artifacts/big.txt', 'w').write('x' * (11 << 20))\n"
        "open('artifacts/evil.exe', 'w').write('MZ')\n"
        "open('artifacts/.hidden.txt', 'w').write('h')\n"
        "open('artifacts/fake.png', 'w').write('not a png')\n"
        "os.symlink('/etc/passwd', 'artifacts/leak.txt')\n"
        "os.mkfifo('artifacts/pipe.txt')\n"
    )
    outcome = await sandbox.run(code, file_size_bytes=32 << 20, memory_bytes=256 << 20)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    artifacts = {a.name: a for a in outcome.artifacts}
    assert set(artifacts) == {"big.txt", "fake.png"}
    assert artifacts["big.txt"].truncated and artifacts["big.txt"].content == b"" and artifacts["big.txt"].size == 11 << 20
    assert artifacts["fake.png"].mime_type == "application/octet-stream"


@pytest.mark.parametrize("language,code,reason", [
    ("python", "print('fine')", "EXIT_REASON_OK"),
    ("python", "import sys; sys.exit(3)", "EXIT_REASON_ERROR"),
    ("python", "while True: pass", "EXIT_REASON_TIMEOUT"),
    ("python", "x = bytearray(1 << 30)", "EXIT_REASON_MEMORY"),
    ("python", "while True: print('y' * 1000)", "EXIT_REASON_OUTPUT_LIMIT"),
    ("python", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "EXIT_REASON_KILLED"),
    ("nodejs", "console.log('fine')", "EXIT_REASON_OK"),
    ("nodejs", "process.exit(4)", "EXIT_REASON_ERROR"),
    ("nodejs", "for (;;) {}", "EXIT_REASON_TIMEOUT"),
    ("nodejs", "const a = []; for (;;) a.push(new Array(1e6).fill(1.5));", "EXIT_REASON_MEMORY"),
    ("nodejs", "for (;;) console.log('y'.repeat(1000));", "EXIT_REASON_OUTPUT_LIMIT"),
    ("nodejs", "process.kill(process.pid, 'SIGKILL')", "EXIT_REASON_KILLED"),
])
async def test_every_exit_reason(sandbox, language, code, reason):
    # Only the timeout cases need a short wall clock; the others end on their own long before 20 s.
    outcome = await sandbox.run(code, language, wall_time_ms=3000 if reason == "EXIT_REASON_TIMEOUT" else 20_000)
    assert outcome.reason == reason, (outcome.exit, outcome.stderr[-2000:])
    if reason == "EXIT_REASON_OUTPUT_LIMIT":
        assert outcome.exit.output_truncated
        assert len(outcome.stdout.encode()) + len(outcome.stderr.encode()) == 64 << 10
    if reason == "EXIT_REASON_KILLED":
        assert outcome.exit.signal == 9
    await sandbox.no_leftovers()


async def test_cpu_time_limit_is_a_timeout(sandbox):
    outcome = await sandbox.run("while True: pass", cpu_time_ms=1000, wall_time_ms=30_000)
    assert outcome.reason == "EXIT_REASON_TIMEOUT" and "CPU" in outcome.exit.message


async def test_client_cancel_kills_the_job(sandbox):
    token = secrets.token_hex(4)
    request = sandbox_pb2.ExecuteRequest(language="python", code=BLOCKING_PYTHON.format(token=token),
                                         limits=sandbox_pb2.ResourceLimits(wall_time_ms=60_000))
    call = sandbox.stub.Execute(request, metadata=METADATA)
    while (await call.read()).WhichOneof("event") != "stdout":
        pass
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call.read()
    await sandbox.no_leftovers()


async def test_bad_requests_are_invalid_argument(sandbox):
    cases = [
        sandbox_pb2.ExecuteRequest(language="cobol", code="x"),
        sandbox_pb2.ExecuteRequest(language="python", code="   "),
        sandbox_pb2.ExecuteRequest(language="python", code="x", limits=sandbox_pb2.ResourceLimits(memory_bytes=-1)),
        sandbox_pb2.ExecuteRequest(language="python", code="x", request_id="r" * 129),  # echoed in Started and logs
    ]
    for request, field in zip(cases, ("language", "code", "limits.memory_bytes", "request_id")):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in sandbox.stub.Execute(request, metadata=METADATA):
                pass
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in caught.value.details(), caught.value.details()
    outcome = await sandbox.run("def main():\n    return 1\n", request_id="r" * 128)
    assert outcome.result == 1 and outcome.of("started")[0].request_id == "r" * 128


async def test_stdin_is_empty_and_result_marker_cannot_be_forged(sandbox):
    code = (
        "import sys\n"
        "def main():\n"
        "    data = sys.stdin.read()\n"
        "    print('__RAGFLOW_RESULT__:eyJwcmVzZW50Ijp0cnVlLCJ2YWx1ZSI6ImhhY2tlZCJ9')\n"
        "    return {'stdin': data}\n"
    )
    outcome = await sandbox.run(code)
    assert outcome.result == {"stdin": ""}
    assert "__RAGFLOW_RESULT__" in outcome.stdout  # plain output, never parsed
