"""gRPC adapter: proto -> core types, call the core, core -> proto. Nothing else."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import grpc
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc

from services.common.errors import InvalidArgumentError
from services.common.structs import from_struct, to_value
from services.sandbox.core.models import (
    ArtifactFile,
    Event,
    ExecMode,
    Exit,
    ExitReason,
    Limits,
    Output,
    Result,
    Started,
)
from services.sandbox.core.service import Sandbox

logger = logging.getLogger(__name__)

_MODES = {
    sandbox_pb2.EXEC_MODE_UNSPECIFIED: ExecMode.AUTO,
    sandbox_pb2.EXEC_MODE_MAIN_FUNCTION: ExecMode.MAIN,
    sandbox_pb2.EXEC_MODE_SCRIPT: ExecMode.SCRIPT,
}
_REASONS = {
    ExitReason.OK: sandbox_pb2.EXIT_REASON_OK,
    ExitReason.ERROR: sandbox_pb2.EXIT_REASON_ERROR,
    ExitReason.TIMEOUT: sandbox_pb2.EXIT_REASON_TIMEOUT,
    ExitReason.MEMORY: sandbox_pb2.EXIT_REASON_MEMORY,
    ExitReason.OUTPUT_LIMIT: sandbox_pb2.EXIT_REASON_OUTPUT_LIMIT,
    ExitReason.KILLED: sandbox_pb2.EXIT_REASON_KILLED,
}


def _mode(value: int) -> ExecMode:
    """The request's mode; a value this server does not know is INVALID_ARGUMENT, never a silent default."""
    mode = _MODES.get(value)
    if mode is None:
        known = ", ".join(sandbox_pb2.ExecMode.Name(v) for v in sorted(_MODES))
        raise InvalidArgumentError.for_field("mode", f"unknown execution mode {value}; expected one of {known}")
    return mode


def _limits(message: sandbox_pb2.ResourceLimits) -> Limits:
    return Limits(
        wall_time_ms=message.wall_time_ms, cpu_time_ms=message.cpu_time_ms, memory_bytes=message.memory_bytes,
        pids=message.pids, output_bytes=message.output_bytes, file_size_bytes=message.file_size_bytes,
        open_files=message.open_files,
    )


def to_proto(event: Event) -> sandbox_pb2.ExecEvent:
    if isinstance(event, Output):
        chunk = sandbox_pb2.OutputChunk(data=event.data)
        return sandbox_pb2.ExecEvent(stdout=chunk) if event.stream == "stdout" else sandbox_pb2.ExecEvent(stderr=chunk)
    if isinstance(event, Started):
        return sandbox_pb2.ExecEvent(started=sandbox_pb2.ExecStarted(
            job_id=event.job_id, backend=event.backend, language=event.language,
            runtime_version=event.runtime_version, request_id=event.request_id))
    if isinstance(event, Result):
        return sandbox_pb2.ExecEvent(result=sandbox_pb2.ExecResult(value=to_value(json.loads(event.json_text)),
                                                                   json=event.json_text))
    if isinstance(event, ArtifactFile):
        return sandbox_pb2.ExecEvent(artifact=sandbox_pb2.Artifact(
            name=event.name, mime_type=event.mime_type, size=event.size, content=event.content, truncated=event.truncated))
    assert isinstance(event, Exit)
    return sandbox_pb2.ExecEvent(exit=sandbox_pb2.ExecExit(
        code=event.code, signal=event.signal, reason=_REASONS[event.reason], message=event.message,
        wall_time_ms=event.wall_time_ms, output_truncated=event.output_truncated))


class SandboxServicer(sandbox_pb2_grpc.SandboxServicer):
    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    async def Execute(self, request: sandbox_pb2.ExecuteRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[sandbox_pb2.ExecEvent]:
        job = self._sandbox.prepare(
            language=request.language, code=request.code, arguments=from_struct(request.arguments, field="arguments"),
            mode=_mode(request.mode), limits=_limits(request.limits), request_id=request.request_id,
        )
        events = self._sandbox.execute(job)
        try:
            async for event in events:
                yield to_proto(event)
        finally:
            await events.aclose()

    async def ListRuntimes(self, request: sandbox_pb2.ListRuntimesRequest, context: grpc.aio.ServicerContext) -> sandbox_pb2.ListRuntimesResponse:
        return sandbox_pb2.ListRuntimesResponse(runtimes=[
            sandbox_pb2.Runtime(language=r.language, aliases=list(r.aliases), version=r.version, backend=r.backend)
            for r in self._sandbox.runtimes()
        ])
