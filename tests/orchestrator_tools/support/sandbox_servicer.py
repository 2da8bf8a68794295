"""A tiny Sandbox servicer for tests: speaks the real agentcanvas.v1.Sandbox protocol over a real
gRPC socket, and runs Python code in a plain subprocess (no isolation; tests only).

It implements MAIN_FUNCTION mode: `main(**arguments)` is called and its JSON return value is sent
as ExecResult; files written under `artifacts/` are sent as Artifact events.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import grpc

from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc
from services.common.structs import from_struct, to_value

_RUNNER = """
import importlib.util, json
spec = importlib.util.spec_from_file_location("user_code", "main.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open("args.json") as f:
    args = json.load(f)
value = module.main(**args)
with open("result.json", "w") as f:
    json.dump(value, f)
"""


class SubprocessSandbox(sandbox_pb2_grpc.SandboxServicer):
    def __init__(self) -> None:
        self.requests: list[sandbox_pb2.ExecuteRequest] = []
        self.metadata: list[dict[str, Any]] = []

    async def Execute(self, request: sandbox_pb2.ExecuteRequest, context: grpc.aio.ServicerContext):
        self.requests.append(request)
        self.metadata.append(dict(context.invocation_metadata() or ()))
        if request.language != "python":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"language {request.language!r} is not available here")
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "main.py").write_text(request.code)
            (work / "args.json").write_text(json.dumps(from_struct(request.arguments)))
            (work / "runner.py").write_text(_RUNNER)
            (work / "artifacts").mkdir()
            yield sandbox_pb2.ExecEvent(
                started=sandbox_pb2.ExecStarted(job_id=uuid.uuid4().hex, backend="test-subprocess", language="python", request_id=request.request_id)
            )
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "runner.py", cwd=work, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            wall = (request.limits.wall_time_ms or 30_000) / 1000
            try:
                out, err = await asyncio.wait_for(proc.communicate(), timeout=wall)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                yield sandbox_pb2.ExecEvent(exit=sandbox_pb2.ExecExit(code=-1, signal=9, reason=sandbox_pb2.EXIT_REASON_TIMEOUT, message="wall time limit exceeded"))
                return
            if out:
                yield sandbox_pb2.ExecEvent(stdout=sandbox_pb2.OutputChunk(data=out))
            if err:
                yield sandbox_pb2.ExecEvent(stderr=sandbox_pb2.OutputChunk(data=err))
            result_file = work / "result.json"
            if proc.returncode == 0 and result_file.exists():
                text = result_file.read_text()
                yield sandbox_pb2.ExecEvent(result=sandbox_pb2.ExecResult(value=to_value(json.loads(text)), json=text))
            for path in sorted((work / "artifacts").iterdir()):
                data = path.read_bytes()
                mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                yield sandbox_pb2.ExecEvent(artifact=sandbox_pb2.Artifact(name=path.name, mime_type=mime, size=len(data), content=data))
            lines = err.decode("utf-8", "replace").strip().splitlines()
            yield sandbox_pb2.ExecEvent(
                exit=sandbox_pb2.ExecExit(
                    code=proc.returncode,
                    reason=sandbox_pb2.EXIT_REASON_OK if proc.returncode == 0 else sandbox_pb2.EXIT_REASON_ERROR,
                    message=lines[-1] if proc.returncode and lines else "",
                )
            )


async def start_sandbox() -> tuple[grpc.aio.Server, str, SubprocessSandbox]:
    """Start the servicer on 127.0.0.1:0; return (server, "127.0.0.1:<port>", servicer)."""
    servicer = SubprocessSandbox()
    server = grpc.aio.server()
    sandbox_pb2_grpc.add_SandboxServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}", servicer
