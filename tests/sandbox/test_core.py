"""Unit tests of the sandbox core: plain Python, no sandbox, no gRPC."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.common.errors import InvalidArgumentError, ResourceExhaustedError
from services.sandbox.core.admission import Admission
from services.sandbox.core.artifacts import acceptable_name, mime_type
from services.sandbox.core.models import Collected, ExitReason, JobSpec, ExecMode, Limits, RawExit, canonical_language
from services.sandbox.core.settings import CAP_LIMITS, DEFAULT_LIMITS, FLOOR_LIMITS, SandboxSettings
from services.sandbox.core.static_checks import findings
from services.sandbox.core.status import parse_status
from services.sandbox.core.supervisor import _JobState, classify


def test_language_aliases():
    assert canonical_language("Python3") == "python" and canonical_language("javascript") == "nodejs"
    with pytest.raises(InvalidArgumentError) as caught:
        canonical_language("cobol")
    assert caught.value.violations[0].field == "language"


def test_limits_take_defaults_are_capped_and_floored():
    resolved = Limits(wall_time_ms=0, memory_bytes=CAP_LIMITS.memory_bytes * 10, pids=1).resolve(DEFAULT_LIMITS, CAP_LIMITS, FLOOR_LIMITS)
    assert resolved.wall_time_ms == DEFAULT_LIMITS.wall_time_ms
    assert resolved.memory_bytes == CAP_LIMITS.memory_bytes
    assert resolved.pids == FLOOR_LIMITS.pids
    with pytest.raises(InvalidArgumentError) as caught:
        Limits(cpu_time_ms=-5).resolve(DEFAULT_LIMITS, CAP_LIMITS, FLOOR_LIMITS)
    assert caught.value.violations[0].field == "limits.cpu_time_ms"


@pytest.mark.parametrize("name,ok", [
    ("chart.png", True), ("data.CSV", True), ("../x.png", False), (".hidden.png", False), ("a/b.png", False),
    ("evil.exe", False), ("noext", False), ("bad\nname.txt", False), ("x" * 300 + ".png", False),
    ("\udcff\udcfe.txt", False),  # bytes that are not UTF-8, as os.listdir / tarfile decode them
])
def test_artifact_names(name, ok):
    assert acceptable_name(name) is ok


def test_mime_types_trust_magic_bytes_for_binary_formats():
    assert mime_type("a.png", b"\x89PNG\r\n\x1a\n....") == "image/png"
    assert mime_type("a.png", b"<svg") == "application/octet-stream"
    assert mime_type("a.pdf", b"%PDF-1.7") == "application/pdf"
    assert mime_type("a.csv", b"a,b") == "text/csv"


def _job() -> JobSpec:
    return JobSpec("j", "python", "x", {}, ExecMode.AUTO, DEFAULT_LIMITS)


@pytest.mark.parametrize("raw,state,oom,status,reason", [
    (RawExit(0), _JobState(), False, {"ok": True}, ExitReason.OK),
    (RawExit(0), _JobState(), False, None, ExitReason.ERROR),  # exit 0 but the runner left no status record
    (RawExit(1), _JobState(), False, {"ok": False, "error": {"type": "ValueError", "message": "x"}}, ExitReason.ERROR),
    (RawExit(-9, 9), _JobState(timed_out=True), False, None, ExitReason.TIMEOUT),
    (RawExit(-9, 9), _JobState(output_limited=True, timed_out=True), False, None, ExitReason.OUTPUT_LIMIT),
    (RawExit(137, 9), _JobState(), True, None, ExitReason.MEMORY),
    (RawExit(152, 24), _JobState(), False, None, ExitReason.TIMEOUT),
    (RawExit(1), _JobState(), False, {"ok": False, "error": {"type": "_ArrayMemoryError", "memory": True}}, ExitReason.MEMORY),
    (RawExit(137, 9), _JobState(), False, None, ExitReason.KILLED),
])
def test_classification_uses_facts_in_priority_order(raw, state, oom, status, reason):
    parsed = parse_status(json.dumps(status).encode() if status is not None else None)
    assert classify(raw, state, oom, Collected(status=parsed), _job())[0] is reason


def test_settings_parse_and_reject_unknown_keys():
    settings = SandboxSettings.from_section({"backend": "docker", "pool": {"python": 3}, "caps": {"pids": 99},
                                             "docker": {"runtime": "runsc"}})
    assert settings.pool == {"python": 3} and settings.caps.pids == 99 and settings.docker.runtime == "runsc"
    for bad in ({"backend": "vm"}, {"nope": 1}, {"caps": {"bogus": 1}}, {"docker": {"bogus": 1}}, {"static_checks": "gate"}):
        with pytest.raises(InvalidArgumentError):
            SandboxSettings.from_section(bad)
    # The keys the shared bootstrap reads belong to the section too.
    SandboxSettings.from_section({"port": 1, "metrics_port": 9464, "shutdown_grace_s": 5, "event_loop": "asyncio"})


async def test_admission_refuses_beyond_concurrency_plus_queue():
    admission = Admission(max_concurrent=1, max_queue=1)
    release = asyncio.Event()
    entered = asyncio.Event()

    async def hold():
        async with admission.slot():
            entered.set()
            await release.wait()

    first = asyncio.create_task(hold())
    await entered.wait()
    second = asyncio.create_task(hold())
    while admission.waiting == 0:
        await asyncio.sleep(0)
    with pytest.raises(ResourceExhaustedError):
        async with admission.slot():
            pass
    release.set()
    await asyncio.gather(first, second)
    assert admission.running == 0 and admission.waiting == 0


def test_static_findings_are_advisory_notes():
    assert findings("python", "import subprocess, os\n") == [
        "imports os (it runs without network or host files)", "imports subprocess (it runs without network or host files)"]
    assert findings("nodejs", "require('child_process')")[0].startswith("uses child_process")
    assert findings("python", "def broken(:") == []
