"""`<section>.event_loop`: which asyncio loop a service process runs on (uvloop for the store by default,
asyncio for the rest; never uvloop for the sandbox)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from services.common import event_loops
from services.common.errors import InvalidArgumentError
from tests.support.cluster import free_port

ROOT = Path(__file__).resolve().parents[2]


def _name_of(factory) -> str:
    loop = factory() if factory else asyncio.new_event_loop()
    try:
        return event_loops.loop_name(loop)
    finally:
        loop.close()


def test_auto_and_uvloop_give_uvloop_and_asyncio_gives_the_standard_loop():
    assert _name_of(event_loops.loop_factory("auto", "store.event_loop")) == "uvloop"
    assert _name_of(event_loops.loop_factory("uvloop", "store.event_loop")) == "uvloop"
    assert event_loops.loop_factory("asyncio", "store.event_loop") is None
    assert _name_of(None) == "asyncio"


@pytest.mark.parametrize("bad", ["tokio", "", None, 1])
def test_an_unknown_choice_is_invalid_naming_the_key(bad):
    with pytest.raises(InvalidArgumentError) as raised:
        event_loops.loop_factory(bad, "gateway.event_loop")
    assert [v.field for v in raised.value.violations] == ["gateway.event_loop"]
    assert "auto, uvloop, asyncio" in raised.value.message


def test_without_uvloop_auto_falls_back_and_an_explicit_uvloop_is_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what `import uvloop` sees where it is not installed
    assert event_loops.loop_factory("auto", "store.event_loop") is None
    with pytest.raises(InvalidArgumentError, match="uvloop is not installed"):
        event_loops.loop_factory("uvloop", "store.event_loop")


def test_where_uvloop_is_not_allowed_auto_means_asyncio_and_uvloop_is_an_error():
    assert event_loops.loop_factory("auto", "sandbox.event_loop", uvloop_allowed=False) is None
    with pytest.raises(InvalidArgumentError) as raised:
        event_loops.loop_factory("uvloop", "sandbox.event_loop", uvloop_allowed=False)
    assert [v.field for v in raised.value.violations] == ["sandbox.event_loop"]
    assert "inherit" in raised.value.message


def test_children_started_on_uvloop_inherit_descriptors_that_asyncio_closes():
    """Why the sandbox refuses uvloop and the other services default to asyncio."""
    async def descriptors_a_child_sees() -> list[int]:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))",
            stdout=asyncio.subprocess.PIPE)
        out, _ = await child.communicate()
        return json.loads(out)

    left, right = socket.socketpair()
    with left, right:
        os.set_inheritable(left.fileno(), True)  # no close-on-exec, as some libraries leave their sockets
        assert left.fileno() not in asyncio.run(descriptors_a_child_sees())
        with asyncio.Runner(loop_factory=event_loops.loop_factory("uvloop", "test")) as runner:
            assert left.fileno() in runner.run(descriptors_a_child_sees())


def _service(tmp_path: Path, module: str, section: str, settings: dict) -> subprocess.Popen[str]:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "log": {"level": "INFO", "format": "json"},
                                      section: {"port": free_port(), **settings}}))
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "PATH": "/usr/bin:/bin"}
    return subprocess.Popen([sys.executable, "-m", f"services.{module}", "--config", str(config)], env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def _serving_line(process: subprocess.Popen[str]) -> str:
    """The start-up log line that names the loop; stops the process afterwards."""
    try:
        for line in process.stderr:
            if line.startswith("{") and "serving on" in (message := json.loads(line).get("message", "")):
                return message
        raise AssertionError(f"the service exited ({process.wait()}) without serving")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("module", "section", "settings", "expected"), [
    ("canvas_store", "store", {}, "uvloop"),
    ("canvas_store", "store", {"event_loop": "asyncio"}, "asyncio"),
    ("orchestrator", "orchestrator", {}, "asyncio"),
    ("orchestrator", "orchestrator", {"event_loop": "auto"}, "uvloop"),
])
def test_a_service_process_runs_on_its_default_or_the_configured_loop(tmp_path, module, section, settings, expected):
    message = _serving_line(_service(tmp_path, module, section, settings))
    assert message.endswith(f"({expected} event loop)"), message


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("module", "section", "choice", "complaint"), [
    ("canvas_store", "store", "fast", "store.event_loop: must be one of auto, uvloop, asyncio"),
    ("sandbox", "sandbox", "uvloop", "sandbox.event_loop: cannot be uvloop here"),
])
def test_a_bad_choice_stops_the_process_with_one_line_naming_the_key(tmp_path, module, section, choice, complaint):
    process = _service(tmp_path, module, section, {"event_loop": choice})
    _, stderr = process.communicate(timeout=100)
    assert process.returncode == 2
    assert complaint in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("given", "expected"), [(None, "0"), ("1", "1")])
def test_grpc_fork_handlers_are_off_in_our_processes_unless_the_environment_says_otherwise(given, expected):
    # uvloop starts children with fork(), which runs gRPC's atfork handlers; they broke children before exec.
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **({"GRPC_ENABLE_FORK_SUPPORT": given} if given else {})}
    shown = subprocess.run([sys.executable, "-c", "import services, os; print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])"],
                           env=env, capture_output=True, text=True, timeout=60, check=True)
    assert shown.stdout.strip() == expected
