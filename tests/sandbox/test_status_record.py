"""The runner's status record ({"ok", "result", "error"}): one parser for every backend, and what a
missing, oversized, unreadable or malformed record does to a job's exit, on both backends. Also the
request fields the gRPC adapter must refuse with INVALID_ARGUMENT."""

from __future__ import annotations

import json

import grpc
import pytest
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc
from google.protobuf import struct_pb2

from services.common import status as rpc_status
from services.common.clients import CHANNEL_OPTIONS
from services.sandbox.core.models import Collected, ExecMode, ExitReason, JobSpec, RawExit, Result
from services.sandbox.core.settings import DEFAULT_LIMITS
from services.sandbox.core.status import MAX_RESULT_DEPTH, MAX_STATUS_BYTES, RunnerStatus, StatusProblem, parse_status
from services.sandbox.core.supervisor import _JobState, classify
from services.sandbox.server import to_proto
from tests.sandbox.harness import METADATA, Outcome

MiB = 1 << 20


# ---- the parser ------------------------------------------------------------------------------------

def test_parse_status_accepts_the_runner_contract():
    parsed = parse_status(json.dumps({"ok": True, "result": json.dumps({"a": [1, 2.5]})}).encode())
    assert parsed == RunnerStatus(ok=True, result='{"a": [1, 2.5]}', error=None)
    parsed = parse_status(b'{"ok": false, "error": {"type": "ValueError", "message": "x"}}')
    assert isinstance(parsed, RunnerStatus) and not parsed.ok and parsed.error == {"type": "ValueError", "message": "x"}
    assert parse_status(b'{"ok": true}') == RunnerStatus(ok=True, result=None, error=None)


@pytest.mark.parametrize("raw", [None, b"", b" " * 1024])
def test_parse_status_missing_record(raw):
    parsed = parse_status(raw)
    assert isinstance(parsed, StatusProblem) and parsed.kind == "missing"
    assert parsed.reason is ExitReason.ERROR and "no status" in parsed.message


def test_parse_status_over_the_limit_is_an_output_limit():
    raw = b'{"ok": true, "result": "' + b"x" * MAX_STATUS_BYTES  # a reader stops after MAX + 1 bytes
    parsed = parse_status(raw[: MAX_STATUS_BYTES + 1])
    assert isinstance(parsed, StatusProblem) and parsed.reason is ExitReason.OUTPUT_LIMIT
    assert str(MAX_STATUS_BYTES) in parsed.message and "status record" in parsed.message
    # A reader that knows the real size (a tar header) passes it along.
    parsed = parse_status(raw[:16], size=20_000_000)
    assert isinstance(parsed, StatusProblem) and parsed.reason is ExitReason.OUTPUT_LIMIT and "20000000" in parsed.message
    # Exactly at the limit is fine.
    text = json.dumps("x" * (MAX_STATUS_BYTES - 40))
    record = json.dumps({"ok": True, "result": text}).encode()
    record += b" " * (MAX_STATUS_BYTES - len(record))
    assert len(record) == MAX_STATUS_BYTES and isinstance(parse_status(record), RunnerStatus)


def test_parse_status_runner_size_marker_is_an_output_limit():
    marker = {"ok": False, "error": {"type": "StatusTooLarge", "message": "whatever the job says", "size": 20_000_000,
                                     "limit": MAX_STATUS_BYTES}}
    parsed = parse_status(json.dumps(marker).encode())
    assert isinstance(parsed, StatusProblem) and parsed.reason is ExitReason.OUTPUT_LIMIT
    assert "20000000" in parsed.message and str(MAX_STATUS_BYTES) in parsed.message
    assert "whatever the job says" not in parsed.message


@pytest.mark.parametrize("raw,fragment", [
    (b"not json", "not JSON"),
    (b"\xff\xfe{}", "not JSON"),
    (b'{"ok": true, "resu', "not JSON"),
    (b"[1, 2]", "object"),
    (b'"ok"', "object"),
    (b'{"result": "1"}', "ok"),
    (b'{"ok": "yes"}', "ok"),
    (b'{"ok": true, "result": 5}', "result"),
    (b'{"ok": true, "result": "{not json"}', "result"),
    (b'{"ok": true, "result": "[1, NaN]"}', "result"),
    (b'{"ok": true, "result": "-Infinity"}', "result"),
    (b'{"ok": false, "error": "boom"}', "error"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
])
def test_parse_status_unreadable_or_wrong_shape_is_an_error(raw, fragment):
    parsed = parse_status(raw)
    assert isinstance(parsed, StatusProblem) and parsed.kind == "invalid" and parsed.reason is ExitReason.ERROR
    assert "status record" in parsed.message and fragment in parsed.message


def _nested(depth: int, kind: str) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"k": value} if kind == "object" else [value]
    return value


@pytest.mark.parametrize("result,fragment", [
    (json.dumps(_nested(MAX_RESULT_DEPTH + 1, "object")), f"deeper than {MAX_RESULT_DEPTH} levels"),
    (json.dumps(_nested(MAX_RESULT_DEPTH + 1, "list")), f"deeper than {MAX_RESULT_DEPTH} levels"),
    (json.dumps({"a": [1, 10 ** 400]}), "range of a double"),
    ("[1e400]", "range of a double"),  # json.loads reads it as inf
], ids=["object-too-deep", "list-too-deep", "huge-int", "overflowing-float"])
def test_parse_status_refuses_a_result_a_proto_value_cannot_carry(result, fragment):
    """Such results made the gRPC adapter fail the whole call with INTERNAL (OverflowError, or protobuf's
    recursion limit); the job's output had already been streamed."""
    parsed = parse_status(json.dumps({"ok": True, "result": result}).encode())
    assert isinstance(parsed, StatusProblem) and parsed.kind == "invalid" and parsed.reason is ExitReason.ERROR
    assert "return value cannot be sent" in parsed.message and fragment in parsed.message
    for kind in ("object", "list"):  # the deepest allowed result still becomes an event a client can decode
        text = json.dumps({"x": _nested(MAX_RESULT_DEPTH - 1, kind), "big": 2 ** 1000})
        status = parse_status(json.dumps({"ok": True, "result": text}).encode())
        assert isinstance(status, RunnerStatus)
        event = to_proto(Result(status.result))
        assert sandbox_pb2.ExecEvent.FromString(event.SerializeToString()).result.json == text


# ---- classification ----------------------------------------------------------------------------------

def _job() -> JobSpec:
    return JobSpec("j", "python", "x", {}, ExecMode.AUTO, DEFAULT_LIMITS)


def _classify(raw: RawExit, status: RunnerStatus | StatusProblem, state: _JobState | None = None, oom: bool = False):
    return classify(raw, state or _JobState(), oom, Collected(status=status), _job())


def test_exit_zero_without_a_status_record_is_an_error():
    reason, message = _classify(RawExit(0), parse_status(None))
    assert reason is ExitReason.ERROR and "no status" in message
    assert _classify(RawExit(0), parse_status(b'{"ok": true}'))[0] is ExitReason.OK


def test_status_problems_rank_below_the_supervisors_own_facts():
    too_large = parse_status(b"x" * (MAX_STATUS_BYTES + 1))
    assert _classify(RawExit(0), too_large)[0] is ExitReason.OUTPUT_LIMIT
    assert _classify(RawExit(1), too_large)[0] is ExitReason.OUTPUT_LIMIT
    assert _classify(RawExit(-9, 9), too_large, _JobState(timed_out=True))[0] is ExitReason.TIMEOUT
    assert _classify(RawExit(137, 9), too_large)[0] is ExitReason.KILLED
    invalid = parse_status(b"garbage")
    reason, message = _classify(RawExit(0), invalid)
    assert reason is ExitReason.ERROR and "not JSON" in message
    reason, message = _classify(RawExit(3), invalid)
    assert reason is ExitReason.ERROR and "code 3" in message
    reason, message = _classify(RawExit(3), parse_status(None))
    assert reason is ExitReason.ERROR and message == "exited with code 3"


# ---- over a real server, both backends ---------------------------------------------------------------

# Writes straight to the runner's status channel (an fd on `local`, a file on `docker`), bypassing it.
_WRITE_STATUS = """
import os, sys
spec = sys.argv[sys.argv.index('--status') + 1]
kind, _, where = spec.partition(':')
fd = int(where) if kind == 'fd' else os.open(where, os.O_WRONLY | os.O_TRUNC)
data = {payload}
while data:
    data = data[os.write(fd, data):]
os._exit(0)
"""


async def test_huge_result_is_an_output_limit(sandbox):
    code = "def main():\n    return 'x' * 20_000_000\n"
    outcome = await sandbox.run(code, memory_bytes=512 * MiB, file_size_bytes=64 * MiB)
    assert outcome.reason == "EXIT_REASON_OUTPUT_LIMIT", (outcome.exit, outcome.stderr[-2000:])
    assert "status record" in outcome.exit.message and str(MAX_STATUS_BYTES) in outcome.exit.message
    assert outcome.of("result") == []
    await sandbox.no_leftovers()


async def test_huge_node_result_is_an_output_limit(sandbox):
    code = "function main() { return 'x'.repeat(20000000); }"
    outcome = await sandbox.run(code, "nodejs", memory_bytes=512 * MiB, file_size_bytes=64 * MiB)
    assert outcome.reason == "EXIT_REASON_OUTPUT_LIMIT", (outcome.exit, outcome.stderr[-2000:])
    assert "status record" in outcome.exit.message and outcome.of("result") == []
    await sandbox.no_leftovers()


async def _run_large(sandbox, language: str, code: str, **limits: int) -> Outcome:
    """Like sandbox.run, over a channel that accepts the server's largest messages (64 MiB)."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{sandbox.running.port}", options=CHANNEL_OPTIONS)
    try:
        stub = sandbox_pb2_grpc.SandboxStub(channel)
        request = sandbox_pb2.ExecuteRequest(language=language, code=code, limits=sandbox_pb2.ResourceLimits(**limits))
        outcome = Outcome()
        async for event in stub.Execute(request, metadata=METADATA, timeout=120):
            outcome.events.append(event)
        return outcome
    finally:
        await channel.close()


@pytest.mark.parametrize("language", ["python", "nodejs"])
async def test_result_over_the_file_size_limit_is_an_output_limit(sandbox, language):
    """On docker the record is a file, so the job's file-size limit bounds it too; on local it is a pipe."""
    code = {"python": "def main():\n    return 'x' * (6 << 20)\n",
            "nodejs": "function main() { return 'x'.repeat(6 << 20); }"}[language]
    outcome = await _run_large(sandbox, language, code, memory_bytes=512 * MiB, file_size_bytes=4 * MiB)
    if sandbox.name == "docker":
        assert outcome.reason == "EXIT_REASON_OUTPUT_LIMIT", (outcome.exit, outcome.stderr[-2000:])
        assert str(4 * MiB) in outcome.exit.message
    else:
        assert outcome.reason == "EXIT_REASON_OK", (outcome.exit, outcome.stderr[-2000:])
        assert len(outcome.of("result")[0].json) == (6 << 20) + 2


async def test_oversized_record_written_around_the_runner_is_an_output_limit(sandbox):
    code = _WRITE_STATUS.format(payload="b'x' * (17 << 20)")
    outcome = await sandbox.run(code, memory_bytes=256 * MiB, file_size_bytes=32 * MiB)
    assert outcome.reason == "EXIT_REASON_OUTPUT_LIMIT", (outcome.exit, outcome.stderr[-2000:])
    assert "status record" in outcome.exit.message and outcome.of("result") == []
    await sandbox.no_leftovers()


@pytest.mark.parametrize("payload,fragment", [
    ("b'this is not json'", "not JSON"),
    ("b'[1, 2, 3]'", "object"),
    ("b'{\"ok\": true, \"result\": \"{broken\"}'", "result"),
])
async def test_unreadable_record_is_an_error(sandbox, payload, fragment):
    outcome = await sandbox.run(_WRITE_STATUS.format(payload=payload))
    assert outcome.reason == "EXIT_REASON_ERROR", (outcome.exit, outcome.stderr[-2000:])
    assert "status record" in outcome.exit.message and fragment in outcome.exit.message
    assert outcome.of("result") == []


@pytest.mark.parametrize("language,code", [
    ("python", "import os\nos._exit(0)\n"),
    ("python", "import os\ndef main():\n    os._exit(0)\n"),
    ("nodejs", "process.reallyExit(0);"),
])
async def test_exit_zero_without_status_is_an_error(sandbox, language, code):
    outcome = await sandbox.run(code, language)
    assert outcome.reason == "EXIT_REASON_ERROR", (outcome.exit, outcome.stderr[-2000:])
    assert "no status" in outcome.exit.message and outcome.exit.code == 0
    await sandbox.no_leftovers()


@pytest.mark.parametrize("language,code", [
    ("python", "print('plain script')\n"),
    ("python", "import sys\nsys.exit(0)\n"),
    ("nodejs", "console.log('plain script')"),
    ("nodejs", "process.exit(0)"),
])
async def test_code_without_main_still_exits_ok(sandbox, language, code):
    outcome = await sandbox.run(code, language)
    assert outcome.reason == "EXIT_REASON_OK", (outcome.exit, outcome.stderr[-2000:])
    assert outcome.result is None


@pytest.mark.parametrize("language", ["python", "nodejs"])
async def test_result_near_the_limit_comes_back_whole(sandbox, language):
    size = MAX_STATUS_BYTES - 64 * 1024  # the record (quoted twice) stays just under the limit
    code = {"python": f"def main():\n    return 'y' * {size}\n",
            "nodejs": f"function main() {{ return 'y'.repeat({size}); }}"}[language]
    outcome = await _run_large(sandbox, language, code, memory_bytes=768 * MiB, file_size_bytes=32 * MiB,
                               wall_time_ms=60_000, cpu_time_ms=60_000)
    assert outcome.reason == "EXIT_REASON_OK", (outcome.exit, outcome.stderr[-2000:])
    results = outcome.of("result")
    assert len(results) == 1 and len(results[0].json) == size + 2 and results[0].value.string_value == "y" * size
    await sandbox.no_leftovers()


@pytest.mark.parametrize("language,code,fragment", [
    ("python", "def main():\n    return {'n': 10 ** 400}\n", "range of a double"),
    ("python", "def main():\n    x = 1\n    for _ in range(150):\n        x = [x]\n    return x\n", "deeper than"),
    ("nodejs", "function main() { let x = 1; for (let i = 0; i < 150; i++) x = {k: x}; return x; }", "deeper than"),
], ids=["py-huge-int", "py-deep", "node-deep"])
async def test_result_a_proto_value_cannot_carry_is_an_error_not_internal(sandbox, language, code, fragment):
    prefix = "print('before')\n" if language == "python" else "console.log('before');\n"
    outcome = await sandbox.run(prefix + code, language)
    assert outcome.reason == "EXIT_REASON_ERROR", (outcome.exit, outcome.stderr[-2000:])
    assert "return value cannot be sent" in outcome.exit.message and fragment in outcome.exit.message
    assert outcome.stdout == "before\n" and outcome.of("result") == []
    await sandbox.no_leftovers()


# ---- request validation --------------------------------------------------------------------------------

async def _invalid_argument_field(sandbox, request: sandbox_pb2.ExecuteRequest) -> list[str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in sandbox.stub.Execute(request, metadata=METADATA):
            pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value
    return [v.field for v in rpc_status.field_violations(caught.value)]


async def test_unknown_exec_mode_is_invalid_argument(sandbox):
    request = sandbox_pb2.ExecuteRequest(language="python", code="print(1)", mode=99)
    fields = await _invalid_argument_field(sandbox, request)
    assert fields == ["mode"]


async def test_non_finite_argument_is_invalid_argument(sandbox):
    arguments = struct_pb2.Struct()
    arguments.fields["x"].number_value = float("nan")
    request = sandbox_pb2.ExecuteRequest(language="python", code="def main(x):\n    return x\n", arguments=arguments)
    fields = await _invalid_argument_field(sandbox, request)
    assert fields == ["arguments.x"]


# ---- the docker backend's archive reader ---------------------------------------------------------------

class _FakeApi:
    """get_archive() answering with a prepared tar, cut into uneven chunks like an HTTP stream."""

    def __init__(self, archive: bytes) -> None:
        self.archive = archive

    def get_archive(self, container_id, path, chunk_size=None):
        sizes = [1, 511, 7, 4096, 100_003]
        chunks, offset, index = [], 0, 0
        while offset < len(self.archive):
            size = sizes[index % len(sizes)]
            chunks.append(self.archive[offset: offset + size])
            offset += size
            index += 1
        return iter(chunks), {}


class _FakeClient:
    def __init__(self, archive: bytes) -> None:
        self.api = _FakeApi(archive)


def _tar_of(entries: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        link = tarfile.TarInfo("leak.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    return buffer.getvalue()


def test_docker_archive_reader_streams_and_stops_after_the_cap(tmp_path):
    from services.sandbox.adapters.docker_backend import DockerBackend
    from services.sandbox.core.settings import SandboxSettings

    near = json.dumps({"ok": True, "result": json.dumps("z" * (MAX_STATUS_BYTES - 100))}).encode()
    assert MAX_STATUS_BYTES - 200 < len(near) <= MAX_STATUS_BYTES
    over = b"x" * (MAX_STATUS_BYTES + 5000)
    settings = SandboxSettings.from_section({"backend": "docker", "work_root": str(tmp_path)})
    backend = DockerBackend(settings, client=_FakeClient(_tar_of({"status.json": near, "over.json": over})))
    try:
        files = backend._archive_files("c", "/work/.sbx/status.json", MAX_STATUS_BYTES)
    finally:
        backend.executor.shutdown()
    assert set(files) == {"status.json", "over.json"}  # the symlink is never returned
    assert files["status.json"] == (len(near), near)
    size, content = files["over.json"]
    assert size == len(over) and content == over[: MAX_STATUS_BYTES + 1]
    assert parse_status(files["status.json"][1], size=files["status.json"][0]) == RunnerStatus(
        ok=True, result=json.dumps("z" * (MAX_STATUS_BYTES - 100)))
    problem = parse_status(content, size=size)
    assert isinstance(problem, StatusProblem) and problem.reason is ExitReason.OUTPUT_LIMIT and str(len(over)) in problem.message


def test_parse_status_makes_lone_surrogates_utf8_safe():
    result = json.dumps({"\udcff": ["\ud800"]}, ensure_ascii=False)  # what the Python runner may write
    status = parse_status(json.dumps({"ok": True, "result": result}).encode())
    assert isinstance(status, RunnerStatus)
    status.result.encode("utf-8")
    assert json.loads(status.result) == {"\udcff": ["\ud800"]}
    failed = parse_status(json.dumps({"ok": False, "error": {"type": "E\udcff", "message": "m\ud800", "memory": False}}).encode())
    assert isinstance(failed, RunnerStatus) and failed.error == {"type": "E?", "message": "m?", "memory": False}

