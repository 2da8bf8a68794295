"""Capped concurrency with a bounded queue over a real server: the request past the queue gets
RESOURCE_EXHAUSTED at once; queued requests run when a slot frees up."""

from __future__ import annotations

import asyncio
import secrets

import grpc
import pytest
from agentcanvas.v1 import sandbox_pb2

from services.common import errors, status
from tests.sandbox.conftest import sandbox_section
from tests.sandbox.harness import BLOCKING_PYTHON, METADATA, base_config, release, start_sandbox, stop_sandbox


@pytest.fixture(params=["local", "docker"])
async def tiny_sandbox(request, work_root, tmp_path):
    url = request.getfixturevalue("podman_url") if request.param == "docker" else None
    section = sandbox_section(request.param, work_root, url, max_concurrent=1, max_queue=1, pool={"python": 1, "nodejs": 0})
    under_test = await start_sandbox(request.param, base_config(tmp_path, section))
    yield under_test
    await stop_sandbox(under_test)


async def _read_until_first_line(call) -> str:
    printed = b""
    while not printed.endswith(b"\n"):
        event = await call.read()
        if event.WhichOneof("event") == "stdout":
            printed += event.stdout.data
    return printed.decode()


async def test_full_queue_answers_resource_exhausted(tiny_sandbox):
    token = secrets.token_hex(4)
    blocking = sandbox_pb2.ExecuteRequest(language="python", code=BLOCKING_PYTHON.format(token=token),
                                          limits=sandbox_pb2.ResourceLimits(wall_time_ms=60_000))
    running = tiny_sandbox.stub.Execute(blocking, metadata=METADATA)
    hostname = (await _read_until_first_line(running)).split()[1]

    queued = tiny_sandbox.stub.Execute(sandbox_pb2.ExecuteRequest(language="python", code="print('queued ran')"),
                                       metadata=METADATA)
    queued_task = asyncio.create_task(_collect(queued))
    admission = tiny_sandbox.sandbox.admission
    deadline = asyncio.get_running_loop().time() + 30
    while admission.waiting < 1:  # poll until the second request waits in the queue
        assert asyncio.get_running_loop().time() < deadline, "the second request never queued"
        await asyncio.sleep(0.01)

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in tiny_sandbox.stub.Execute(sandbox_pb2.ExecuteRequest(language="python", code="print(1)"),
                                                 metadata=METADATA):
            pass
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert isinstance(status.from_rpc_error(caught.value), errors.ResourceExhaustedError)
    assert not queued_task.done()

    await release(tiny_sandbox, token, hostname)
    rest = await _collect(running)
    assert rest[-1].exit.reason == sandbox_pb2.EXIT_REASON_OK
    queued_events = await queued_task
    assert queued_events[-1].exit.reason == sandbox_pb2.EXIT_REASON_OK
    assert b"queued ran" in b"".join(e.stdout.data for e in queued_events if e.WhichOneof("event") == "stdout")
    await tiny_sandbox.no_leftovers()


async def _collect(call) -> list[sandbox_pb2.ExecEvent]:
    events = []
    while (event := await call.read()) != grpc.aio.EOF:
        events.append(event)
    return events


async def test_static_checks_warn_only_adds_advisory_notes(work_root, tmp_path):
    section = sandbox_section("local", work_root, None, static_checks="warn", pool={"python": 1, "nodejs": 0})
    under_test = await start_sandbox("local", base_config(tmp_path, section))
    try:
        outcome = await under_test.run("import subprocess\nprint(subprocess.check_output(['id', '-u']).decode().strip())")
        assert outcome.reason == "EXIT_REASON_OK" and outcome.stdout == "65534\n"  # advisory, never a gate
        assert "[sandbox advisory] imports subprocess" in outcome.stderr
    finally:
        await stop_sandbox(under_test)
