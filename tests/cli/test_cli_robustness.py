"""The CLI's edges: unreadable files, `run --session` alone, `run --resume` and the pause hint, the
terminal view's stream, and (in subprocesses) SIGTERM and a service that dies while `up` starts."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.cli import render
from services.cli.files import load_document
from services.cli.main import build_parser, main
from services.common.errors import InvalidArgumentError

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello.json"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    for name in ("CANVAS_STORE_ADDR", "ORCHESTRATOR_ADDR", "LLM_GATEWAY_ADDR", "SANDBOX_ADDR", "AGENT_CANVAS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "data"


def form_dsl() -> dict:
    """Begin -> ask (a form that waits for `instructions`) -> msg."""
    def node(name, params, down=(), up=()):
        return {"obj": {"component_name": name, "params": params}, "downstream": list(down), "upstream": list(up)}
    return {"components": {
        "begin": node("Begin", {}, ["ask"]),
        "ask": node("UserFillUp", {"inputs": {"instructions": {"name": "Instructions", "type": "paragraph",
                                                               "optional": False}}}, ["msg"], ["begin"]),
        "msg": node("Message", {"content": ["got {ask@instructions}"]}, [], ["ask"]),
    }}


# -- 7. unreadable files ------------------------------------------------------------------------------

def bad_files(tmp_path: Path) -> dict[str, Path]:
    latin = tmp_path / "latin1.json"
    latin.write_bytes('{"components": {}, "title": "caf\xe9"}'.encode("latin-1"))
    folder = tmp_path / "folder.json"
    folder.mkdir()
    return {"missing": tmp_path / "missing.json", "directory": folder, "not utf-8": latin}


@pytest.mark.parametrize("kind", ["missing", "directory", "not utf-8"])
def test_load_document_names_the_file_in_one_line(tmp_path, kind):
    path = bad_files(tmp_path)[kind]
    with pytest.raises(InvalidArgumentError) as caught:
        load_document(path)
    assert str(path) in caught.value.message and "\n" not in caught.value.message


def test_batch_import_reports_each_bad_file_and_imports_the_others(tmp_path, data_dir, capsys):
    bad = bad_files(tmp_path)
    form = tmp_path / "form.json"
    form.write_text(json.dumps(form_dsl()))
    files = [str(bad["missing"]), str(HELLO), str(bad["directory"]), str(bad["not utf-8"]), str(form)]
    assert main(["canvas", "import", *files, "--embedded"]) == 2
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 2  # both good files were imported
    errors = err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("error: INVALID_ARGUMENT: ") for line in errors), err
    for path in (bad["missing"], bad["directory"], bad["not utf-8"]):
        assert sum(str(path) in line for line in errors) == 1
    assert "Traceback" not in err
    assert main(["canvas", "list", "--embedded"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


@pytest.mark.parametrize("kind", ["missing", "directory", "not utf-8"])
def test_run_and_exec_with_an_unreadable_file_print_one_line(tmp_path, data_dir, capsys, kind):
    path = str(bad_files(tmp_path)[kind])
    for argv in (["run", path, "--embedded"], ["exec", path, "--embedded"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: INVALID_ARGUMENT: ") and path in err, err


# -- 5. run --session alone ---------------------------------------------------------------------------

def test_run_with_only_a_session_is_sent_without_a_source():
    from services.cli.commands import _run_request

    request = _run_request(build_parser().parse_args(["run", "--session", "s1"]))
    assert request.session_id == "s1" and request.WhichOneof("source") is None


def test_run_with_an_unknown_session_is_a_one_line_error(data_dir, capsys):
    assert main(["run", "--session", "0" * 32, "--embedded"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: NOT_FOUND: ") and err.count("\n") == 1 and "Traceback" not in err


def test_run_with_nothing_to_run_is_a_usage_error(data_dir, capsys):
    assert main(["run", "--embedded"]) == 2
    assert capsys.readouterr().err.startswith("error: INVALID_ARGUMENT: ")


# -- 6. run --resume and the pause hint -----------------------------------------------------------------

def own_process(*argv: str) -> tuple[int, str, str]:
    """The CLI in a process of its own, as a user runs it (exit code, stdout, stderr). Booted inside the test
    process, the embedded stack of these runs hung now and then, idle, in a full suite; alone it never did."""
    done = subprocess.run([sys.executable, "-m", "services.cli.main", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=240)
    return done.returncode, done.stdout, done.stderr


def test_a_paused_run_prints_how_to_continue_it_and_resume_continues_it(tmp_path, data_dir):
    canvas = tmp_path / "form.json"
    canvas.write_text(json.dumps(form_dsl()))
    code, _, err = own_process("run", str(canvas), "--query", "trip", "--embedded")
    assert code == 0, err  # paused: exit 0
    hint = [line for line in err.splitlines() if "agent-canvas run --resume" in line]
    assert len(hint) == 1, err
    command = hint[0][hint[0].index("agent-canvas run --resume"):]
    words = command.split()
    run_id = words[words.index("--resume") + 1]
    assert "--inputs" in words and "instructions" in command

    code, out, err = own_process("run", "--resume", run_id, "--inputs", '{"instructions": "go east"}', "--embedded")
    assert code == 0 and "got go east" in out and "SUCCEEDED" in err and "--resume" not in err, err
    # A run that is not paused any more cannot be resumed again.
    code, _, err = own_process("run", "--resume", run_id, "--inputs", '{"instructions": "x"}', "--embedded")
    assert code == 2 and "error: ABORTED" in err, err


def test_resume_with_a_canvas_source_is_a_usage_error(data_dir, capsys):
    assert main(["run", str(HELLO), "--resume", "abc", "--embedded"]) == 2
    assert capsys.readouterr().err.startswith("error: INVALID_ARGUMENT: ")


def test_the_pause_hint_in_json_mode_goes_to_stderr(tmp_path, data_dir):
    canvas = tmp_path / "form.json"
    canvas.write_text(json.dumps(form_dsl()))
    code, out, err = own_process("run", str(canvas), "--json", "--embedded")
    assert code == 0, err
    assert all(json.loads(line) for line in out.splitlines())  # stdout stays one JSON object per line
    assert "agent-canvas run --resume" in err


# -- 8. the terminal view resolves its streams when constructed ------------------------------------------

def test_terminal_view_writes_to_the_stdout_of_its_construction_time(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    view = render.TerminalView()
    view.show(orchestrator_pb2.RunEvent(message_delta=orchestrator_pb2.MessageDelta(content="hello")))
    view.show(orchestrator_pb2.RunEvent(workflow_finished=orchestrator_pb2.WorkflowFinished(
        status=common_pb2.RUN_STATUS_SUCCEEDED)))
    assert out.getvalue() == "hello\n" and "SUCCEEDED" in err.getvalue()


# -- 3 and 4. `up` in a subprocess ------------------------------------------------------------------------

def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def write_config(tmp_path: Path, **store) -> Path:
    ports = free_ports(5)
    config = tmp_path / "config.yaml"
    lines = [f"data_dir: {tmp_path / 'data'}", "addresses:"]
    lines += [f"  {name}: 127.0.0.1:{port}"
              for name, port in zip(("canvas_store", "orchestrator", "llm_gateway", "sandbox", "http_api"), ports)]
    if store:
        lines += ["store:"] + [f"  {k}: {v}" for k, v in store.items()]
    config.write_text("\n".join(lines) + "\n")
    return config


def cli(config: Path, *argv: str, stderr) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_ADDR") and not k.startswith("AGENT_CANVAS")}
    return subprocess.Popen([sys.executable, "-m", "services.cli.main", *argv, "--config", str(config)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_line(log: Path, text: str, process: subprocess.Popen, limit_s: float) -> None:
    """Until `text` appears in the log (or the process exits); the limit is a safety net for a hang."""
    deadline = time.monotonic() + limit_s
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} within {limit_s} s"
        time.sleep(0.1)


def started_with(config: Path) -> set[int]:
    """Live processes whose command line names `config` (the services `up` spawned with it)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if str(config).encode() in Path(f"/proc/{entry}/cmdline").read_bytes() and alive(int(entry)):
                    found.add(int(entry))
            except OSError:
                continue
    return found


def kill_tree(process: subprocess.Popen, known: set[int]) -> None:
    """Cleanup after a failed assertion: nothing this test started outlives it."""
    for pid in known | descendants(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if process.poll() is None:
        process.kill()
    process.wait()


def gone(pids: set[int], limit_s: float) -> set[int]:
    """The pids still alive once all have exited or `limit_s` passed."""
    deadline = time.monotonic() + limit_s
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}
"""127.0.0.1 as /proc/net/tcp shows it, and as an IPv4-mapped address of a dual-stack socket in tcp6."""


def listening_addresses(ports: set[int]) -> set[tuple[str, int]]:
    """(local address as /proc/net shows it, port) of every listening TCP socket on one of `ports`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.rsplit(":", 1)
            if state == "0A" and int(port, 16) in ports:  # 0A: LISTEN
                found.add((address, int(port, 16)))
    return found


@pytest.mark.slow
def test_up_listens_on_loopback_only_and_sigterm_stops_it_and_its_children(tmp_path):
    log = tmp_path / "stderr.log"
    config = write_config(tmp_path)
    with log.open("wb") as sink:
        process = cli(config, "up", stderr=sink)
    children: set[int] = set()
    try:
        wait_for_line(log, "press Ctrl-C to stop", process, 180)
        children = descendants(process.pid)
        assert len(children) >= 4  # the four services (and what they started)
        ports = {int(line.rsplit(":", 1)[1]) for line in config.read_text().splitlines() if "127.0.0.1:" in line}
        # Before, every service listened on all interfaces (00000000, or :: on a dual-stack socket).
        listening = listening_addresses(ports)
        assert {port for _, port in listening} == ports
        assert {address for address, _ in listening} <= LOOPBACK, listening
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=90)  # hung forever before
        assert code == 0, log.read_text(errors="replace")[-3000:]
        assert gone(children, 30) == set()
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        kill_tree(process, children)


@pytest.mark.slow
def test_sigterm_while_up_is_starting_stops_its_children(tmp_path):
    log = tmp_path / "stderr.log"
    with log.open("wb") as sink:
        process = cli(write_config(tmp_path), "up", stderr=sink)
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(children := descendants(process.pid)) < 4:  # the services were spawned
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=90)  # hung before
        assert gone(children, 30) == set()
        assert 'File "' + str(ROOT / "services" / "cli") not in log.read_text(errors="replace")
    finally:
        kill_tree(process, children)


@pytest.mark.slow
def test_up_fails_fast_naming_a_service_that_dies_while_starting(tmp_path):
    log = tmp_path / "stderr.log"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the store's database would be under a file: it cannot start
    config = write_config(tmp_path, database_url=f"sqlite:///{blocker}/store.db")
    with log.open("wb") as sink:
        process = cli(config, "up", stderr=sink)
    children: set[int] = set()
    try:
        code = process.wait(timeout=90)  # it waited 120 s for the dead store before
        text = log.read_text(errors="replace")
        assert code != 0
        last = [line for line in text.splitlines() if line.startswith("error:")]
        assert len(last) == 1 and "canvas_store" in last[0] and "exited" in last[0], text[-3000:]
        assert 'File "' + str(ROOT / "services" / "cli") not in text  # no CLI traceback
        children = started_with(config) - {process.pid}
        assert gone(children, 30) == set()  # the services that did start were stopped
    finally:
        kill_tree(process, children)
