"""`agent-canvas runs list|show|tail|cancel`, `validate`, `canvas revisions|publish|rollback` and `--version`,
driven against the four services that `agent-canvas up` started as child processes (--remote)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2, canvas_store_pb2_grpc, orchestrator_pb2
from google.protobuf import field_mask_pb2

from services.cli.main import main
from services.cli.render import event_json
from services.common.structs import to_struct
from tests.cli.test_cli_robustness import cli, descendants, kill_tree, wait_for_line, write_config

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello.json"
ID_LENGTH = 32


def node(name: str, params: dict, down=(), up=()) -> dict:
    return {"obj": {"component_name": name, "params": params}, "downstream": list(down), "upstream": list(up)}


def form_dsl(content: str = "got {ask@instructions}") -> dict:
    """Begin -> ask (a UserFillUp that waits for `instructions`) -> msg."""
    return {"components": {
        "begin": node("Begin", {}, ["ask"]),
        "ask": node("UserFillUp", {"inputs": {"instructions": {"name": "Instructions", "type": "paragraph",
                                                               "optional": False}}}, ["msg"], ["begin"]),
        "msg": node("Message", {"content": [content]}, [], ["ask"]),
    }}


def failing_document() -> dict:
    """examples/hello.json with a model nobody serves: the run ends FAILED at LLM:Answer."""
    document = json.loads(HELLO.read_text())
    document["dsl"]["components"]["LLM:Answer"]["obj"]["params"]["llm_id"] = "no-such-model@Nowhere"
    return document


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    """`agent-canvas up` in a subprocess; yields its config file."""
    workdir = tmp_path_factory.mktemp("up")
    config = write_config(workdir)
    log = workdir / "up.log"
    with log.open("wb") as sink:
        process = cli(config, "up", stderr=sink)
    children: set[int] = set()
    try:
        wait_for_line(log, "press Ctrl-C to stop", process, 180)
        children = descendants(process.pid)
        yield config
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=90)
    finally:
        kill_tree(process, children)


@pytest.fixture
def ac(up, monkeypatch, capsys):
    """Run the CLI in this process against the `up` services; returns (exit code, stdout, stderr)."""
    for name in list(os.environ):
        if name.endswith("_ADDR") or name.startswith("AGENT_CANVAS"):
            monkeypatch.delenv(name)

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*argv, "--remote", "--config", str(up)])
        out, err = capsys.readouterr()
        assert "Traceback" not in err, err
        return code, out, err
    return call


def subprocess_cli(up: Path, *argv: str, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_ADDR") and not k.startswith("AGENT_CANVAS")}
    return subprocess.run([sys.executable, "-m", "services.cli.main", *argv, "--remote", "--config", str(up)],
                          cwd=ROOT, env=env, capture_output=True, timeout=300, **kwargs)


def one_error(err: str, code: str) -> None:
    assert err.count("\n") == 1 and err.startswith(f"error: {code}: ") and "Traceback" not in err, err


def write(tmp_path: Path, name: str, document: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def run_json(ac, *argv: str) -> list[dict]:
    code, out, err = ac("run", *argv, "--json")
    assert code in (0, 1), err
    return [json.loads(line) for line in out.splitlines()]


def table(out: str) -> dict[str, list[str]]:
    """Rows of a `runs list` table by run id (after the header)."""
    lines = out.splitlines()
    assert lines[0].split() == ["RUN", "CANVAS", "STATUS", "STARTED", "DURATION", "TOKENS"]
    return {line.split()[0]: line.split() for line in lines[1:]}


# -- runs list / show / cancel ----------------------------------------------------------------------------

def test_a_paused_a_failed_and_a_cancelled_run_are_listed_and_shown(ac, tmp_path):
    code, out, _ = ac("canvas", "import", str(write(tmp_path, "form.json", form_dsl())))
    assert code == 0
    canvas_id = out.split("\t")[0]
    paused = run_json(ac, "--canvas", canvas_id, "--query", "trip")[0]["runId"]
    cancelled = run_json(ac, "--canvas", canvas_id)[0]["runId"]
    failed_events = run_json(ac, str(write(tmp_path, "failing.json", failing_document())), "--query", "hi")
    failed = failed_events[0]["runId"]
    assert failed_events[-1]["workflowFinished"]["status"] == "RUN_STATUS_FAILED"

    code, out, _ = ac("runs", "cancel", cancelled)
    assert code == 0 and out == f"{cancelled}\tCANCELLED\n"  # a paused run ends at once

    code, out, _ = ac("runs", "list")
    rows = table(out)
    assert rows[paused][1:3] == [canvas_id, "PAUSED"]
    assert rows[cancelled][1:3] == [canvas_id, "CANCELLED"]
    assert rows[failed][1:3] == ["-", "FAILED"]  # an inline DSL has no canvas
    ids = list(rows)
    assert ids.index(failed) < ids.index(cancelled) < ids.index(paused)  # newest first

    code, out, _ = ac("runs", "list", "--json")
    records = {record["id"]: record for record in map(json.loads, out.splitlines())}
    assert records[paused]["status"] == "RUN_STATUS_PAUSED" and records[paused]["canvasId"] == canvas_id
    assert records[failed]["error"]["componentId"] == "LLM:Answer" and "spec" not in records[failed]

    code, out, _ = ac("runs", "list", "--canvas", canvas_id)
    assert set(table(out)) == {paused, cancelled}
    code, out, _ = ac("runs", "list", "--status", "failed,CANCELLED")
    assert {paused, cancelled, failed} & set(table(out)) == {cancelled, failed}
    code, out, _ = ac("runs", "list", "--status", "paused", "--canvas", canvas_id, "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [paused]
    code, out, _ = ac("runs", "list", "--canvas", canvas_id, "--limit", "1")
    assert list(table(out)) == [cancelled]  # the newest one

    code, out, _ = ac("runs", "show", paused)
    assert code == 0
    fields = dict(line.split(None, 1) for line in out.split("nodes:")[0].splitlines())
    revision = json.loads(ac("canvas", "get", canvas_id)[1])["headRevisionId"]
    assert fields["status"] == "PAUSED" and fields["canvas"] == f"{canvas_id} (revision {revision})"
    nodes = {line.split()[0]: line.split() for line in out.split("nodes:\n")[1].splitlines()}
    assert nodes["begin"][1:3] == ["Begin", "finished"] and nodes["begin"][3].startswith("+")  # offset, then time
    assert nodes["ask"][1:3] == ["UserFillUp", "waiting"] and out.rstrip().endswith("for instructions")

    code, out, _ = ac("runs", "show", failed)
    fields = dict(line.split(None, 1) for line in out.split("nodes:")[0].splitlines())
    assert fields["status"] == "FAILED" and fields["canvas"] == "inline DSL"
    assert fields["error"].startswith(f"{failed_events[-1]['workflowFinished']['error']['reason']} at LLM:Answer: ")
    assert "no-such-model@Nowhere" in fields["error"]
    failed_node = [line for line in out.split("nodes:\n")[1].splitlines() if line.split()[0] == "LLM:Answer"]
    assert len(failed_node) == 1 and " failed " in failed_node[0] and "no-such-model@Nowhere" in failed_node[0]

    code, out, _ = ac("runs", "show", cancelled, "--json")
    shown = json.loads(out)
    assert shown["run"]["status"] == "RUN_STATUS_CANCELLED" and shown["run"]["error"]["reason"] == "CANCELLED"
    states = {item["componentId"]: item["state"] for item in shown["nodes"]}
    assert states == {"begin": "finished", "ask": "cancelled"}  # it was waiting when it was cancelled

    code, _, err = ac("runs", "cancel", failed)  # already over: printed as if it had been cancelled before
    assert code == 2 and "already ended (FAILED)" in err
    one_error(err, "FAILED_PRECONDITION")
    assert ac("runs", "cancel", cancelled)[:2] == (0, f"{cancelled}\tCANCELLED\n")  # cancelling twice is fine


# -- runs tail -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("document", [form_dsl(), failing_document()], ids=["paused", "failed"])
def test_runs_tail_json_replays_a_finished_run_exactly_as_run_json_printed_it(up, tmp_path, document):
    canvas = write(tmp_path, "canvas.json", document)
    ran = subprocess_cli(up, "run", str(canvas), "--query", "hi", "--json")
    assert ran.returncode in (0, 1) and ran.stdout, ran.stderr.decode()[-3000:]
    run_id = json.loads(ran.stdout.splitlines()[0])["runId"]
    tailed = subprocess_cli(up, "runs", "tail", run_id, "--json")
    assert tailed.stdout == ran.stdout  # byte for byte (map entries printed in a different order before)
    assert tailed.returncode == ran.returncode and tailed.stderr == ran.stderr  # the pause hint included
    later = subprocess_cli(up, "runs", "tail", run_id, "--json", "--after-seq", "2")
    assert later.stdout.splitlines() == ran.stdout.splitlines()[2:]


def test_an_event_prints_the_same_line_however_its_maps_were_filled():
    """The store hands back a parsed copy of what the orchestrator built: its Struct and map entries come out of
    MessageToDict in another order, which made `runs tail --json` differ from `run --json`."""
    keys = ["name", "type", "optional", "value", "zeta", "alpha"]

    def events(order: list[str]) -> list[orchestrator_pb2.RunEvent]:
        form = orchestrator_pb2.RunEvent(run_id="r", seq=1)
        failed = orchestrator_pb2.RunEvent(run_id="r", seq=2)
        for key in order:
            form.user_inputs_required.inputs.get_or_create_struct(key).update({inner: 1 for inner in order})
            failed.node_finished.error.metadata[key] = "x"
            failed.node_finished.outputs[key] = {inner: [inner] for inner in order}
        return [form, failed]

    built, parsed = events(keys), events(list(reversed(keys)))
    assert [event_json(event) for event in built] == [event_json(event) for event in parsed]
    shown = json.loads(event_json(built[0]))["userInputsRequired"]["inputs"]
    assert list(shown) == sorted(keys) and list(shown["zeta"]) == sorted(keys)


def test_runs_tail_renders_the_live_view(ac, tmp_path):
    run_id = run_json(ac, str(write(tmp_path, "failing.json", failing_document())), "--query", "hi")[0]["runId"]
    code, out, err = ac("runs", "tail", run_id)
    assert code == 1  # a failed run, as `run` exits
    assert f"▶ run {run_id}" in err and "■ FAILED in" in err and "error at LLM:Answer:" in err


# -- validate --------------------------------------------------------------------------------------------

def test_validate_reports_a_dangling_reference_by_node_and_field(ac, tmp_path):
    broken = write(tmp_path, "broken.json", form_dsl("got {ghost@answer}"))
    code, out, _ = ac("validate", str(broken))
    assert code == 1
    problems = [line.split("\t") for line in out.splitlines()]
    assert ["msg", "params.content", "DANGLING_REFERENCE"] in [problem[:3] for problem in problems]
    assert all(len(problem) == 4 and problem[3] for problem in problems)

    code, out, _ = ac("validate", str(broken), "--json")
    shown = json.loads(out)
    assert code == 1 and shown["valid"] is False and out.count("\n") == 1
    assert {"componentId": "msg", "field": "params.content", "code": "DANGLING_REFERENCE"}.items() <= shown["problems"][0].items()

    assert ac("validate", str(HELLO)) == (0, "valid\n", "")
    code, out, _ = ac("canvas", "import", str(HELLO), "--title", "validated")
    assert ac("validate", "--canvas", out.split("\t")[0], "--json")[:2] == (0, '{"valid":true,"problems":[]}\n')


def test_validate_bad_input_is_one_error_line(ac, tmp_path):
    code, _, err = ac("validate", "--canvas", "0" * ID_LENGTH)
    assert code == 2
    one_error(err, "NOT_FOUND")
    code, _, err = ac("validate", str(tmp_path / "missing.json"))
    assert code == 2
    one_error(err, "INVALID_ARGUMENT")
    code, _, err = ac("validate")
    assert code == 2
    one_error(err, "INVALID_ARGUMENT")


# -- canvas revisions / publish / rollback ------------------------------------------------------------------

def revisions(ac, canvas_id: str) -> list[list[str]]:
    code, out, _ = ac("canvas", "revisions", canvas_id)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["REVISION", "CREATED", "CONTENT", "HASH"]
    return [line.split() for line in lines[1:]]


def test_revisions_publish_and_rollback_round_trip(up, ac):
    code, out, _ = ac("canvas", "import", str(HELLO), "--title", "revised")
    canvas_id = out.split("\t")[0]
    [[first, _, first_hash, marks]] = revisions(ac, canvas_id)
    assert marks == "head"

    # A DSL change makes a second revision (through the API: the CLI has no edit command).
    canvas = json.loads(ac("canvas", "get", canvas_id, "--dsl")[1])
    dsl = canvas["dsl"]
    dsl["components"]["LLM:Answer"]["obj"]["params"]["temperature"] = 0.5
    token = (Path(str(up)).parent / "data" / "token").read_text().strip()
    address = next(line.split()[-1] for line in Path(up).read_text().splitlines() if "canvas_store:" in line)
    with grpc.insecure_channel(address) as channel:
        canvas_store_pb2_grpc.CanvasStoreStub(channel).UpdateCanvas(canvas_store_pb2.UpdateCanvasRequest(
            canvas=canvas_store_pb2.Canvas(id=canvas_id, dsl=to_struct(dsl), etag=canvas["etag"]),
            update_mask=field_mask_pb2.FieldMask(paths=["dsl"])), metadata=[("authorization", f"Bearer {token}")])
    rows = revisions(ac, canvas_id)
    assert [row[0] for row in rows] == [rows[0][0], first] and rows[0][0] != first  # newest first
    second = rows[0][0]
    assert rows[0][3] == "head" and len(rows[1]) == 3 and rows[0][2] != first_hash

    assert ac("canvas", "publish", canvas_id, first) == (0, f"{canvas_id}\tpublished\t{first}\n", "")
    assert [row[3:] for row in revisions(ac, canvas_id)] == [["head"], ["published"]]
    assert ac("canvas", "publish", canvas_id)[1] == f"{canvas_id}\tpublished\t{second}\n"  # the head by default
    assert [row[3:] for row in revisions(ac, canvas_id)] == [["head,published"], []]

    stale = json.loads(ac("canvas", "get", canvas_id)[1])["etag"]
    code, out, _ = ac("canvas", "rollback", canvas_id, first)
    assert code == 0
    assert out.startswith(f"{canvas_id}\trolled back to {first}\thead ")
    head = out.strip().split("\t")[2].removeprefix("head ")
    rows = {row[0]: row for row in revisions(ac, canvas_id)}
    assert rows[head][2] == first_hash and "head" in rows[head][3].split(",")  # the old DSL is the head again
    assert json.loads(ac("canvas", "get", canvas_id)[1])["headRevisionId"] == head

    for argv in (["rollback", canvas_id, second, "--etag", stale], ["publish", canvas_id, first, "--etag", stale]):
        code, _, err = ac("canvas", *argv)
        assert code == 2
        one_error(err, "ABORTED")
    code, out, _ = ac("canvas", "revisions", canvas_id, "--json")
    shown = [json.loads(line) for line in out.splitlines()]
    assert [item["id"] for item in shown if item["head"]] == [head] and all("dsl" not in item for item in shown)


def test_bad_ids_are_one_error_line_and_exit_2(ac):
    missing = "0" * ID_LENGTH
    cases = [
        (["runs", "show", "not-a-run"], "INVALID_ARGUMENT"), (["runs", "show", missing], "NOT_FOUND"),
        (["runs", "tail", "not-a-run"], "INVALID_ARGUMENT"), (["runs", "tail", missing], "NOT_FOUND"),
        (["runs", "cancel", "not-a-run"], "INVALID_ARGUMENT"), (["runs", "cancel", missing], "NOT_FOUND"),
        (["runs", "list", "--canvas", "nope"], "INVALID_ARGUMENT"), (["runs", "list", "--session", "nope"], "INVALID_ARGUMENT"),
        (["runs", "list", "--status", "sleeping"], "INVALID_ARGUMENT"),
        (["canvas", "revisions", "nope"], "INVALID_ARGUMENT"), (["canvas", "revisions", missing], "NOT_FOUND"),
        (["canvas", "publish", missing], "NOT_FOUND"), (["canvas", "rollback", missing, missing], "NOT_FOUND"),
    ]
    for argv, status in cases:
        code, out, err = ac(*argv)
        assert code == 2 and out == "", argv
        one_error(err, status)


def test_remote_refuses_to_boot_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    config = write_config(tmp_path)  # ports nobody listens on
    for argv in (["runs", "list"], ["runs", "tail", "0" * ID_LENGTH], ["validate", str(HELLO)],
                 ["canvas", "revisions", "0" * ID_LENGTH]):
        assert main([*argv, "--remote", "--config", str(config)]) == 2
        one_error(capsys.readouterr().err, "UNAVAILABLE")


# -- output rules, --version ----------------------------------------------------------------------------------

def test_runs_tail_into_a_reader_that_stops_early_ends_quietly(up, ac, tmp_path):
    big = form_dsl()
    big["components"]["begin"]["downstream"] = ["msg"]
    big["components"]["msg"] = node("Message", {"content": ["x" * 300_000]}, [], ["begin"])
    del big["components"]["ask"]
    run_id = run_json(ac, str(write(tmp_path, "big.json", big)))[0]["runId"]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_ADDR") and not k.startswith("AGENT_CANVAS")}
    process = subprocess.Popen([sys.executable, "-m", "services.cli.main", "runs", "tail", run_id, "--json", "--remote",
                                "--config", str(up)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert json.loads(process.stdout.readline())["runId"] == run_id
        process.stdout.close()  # like `| head -1`
        err = process.stderr.read().decode()
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert process.returncode == 141


def test_version_names_the_package_and_the_protocol(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"agent-canvas {metadata.version('agent-canvas')} (protocol agentcanvas.v1)\n"


# -- a live run: tail follows it, SIGTERM stops a tail like Ctrl-C, cancel ends it --------------------------

def slow_dsl() -> dict:
    """Begin -> code (sleeps 40 s in the sandbox, below CodeExec's 60 s wall limit, tools.code_exec.timeout_s) -> msg:
    a run that stays RUNNING while the test follows, shows and cancels it, however busy the machine."""
    script = "import time\ndef main():\n    time.sleep(40)\n    return 'done'\n"
    return {"components": {
        "begin": node("Begin", {}, ["code"]),
        "code": node("CodeExec", {"lang": "python3", "script": script, "arguments": {},
                                  "outputs": {"result": {"type": "String", "value": ""}}}, ["msg"], ["begin"]),
        "msg": node("Message", {"content": ["{code@result}"]}, [], ["code"]),
    }}


def test_runs_tail_follows_a_live_run_sigterm_stops_it_and_cancel_ends_it(up, ac, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_ADDR") and not k.startswith("AGENT_CANVAS")}

    def start(*argv: str, **streams) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "services.cli.main", *argv, "--remote", "--config", str(up)],
                                cwd=ROOT, env=env, **streams)

    started: list[subprocess.Popen] = []
    try:
        runner = start("run", str(write(tmp_path, "slow.json", slow_dsl())), "--json",
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        started.append(runner)
        run_id = json.loads(runner.stdout.readline())["runId"]
        follower = start("runs", "tail", run_id, "--json", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        viewer = start("runs", "tail", run_id, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started += [follower, viewer]
        assert json.loads(follower.stdout.readline())["workflowStarted"] is not None
        assert viewer.stderr.readline().decode().startswith(f"▶ run {run_id}")

        viewer.send_signal(signal.SIGTERM)  # stops following, like Ctrl-C; the run goes on
        assert viewer.wait(timeout=60) == 130
        assert "Traceback" not in viewer.stderr.read().decode()

        assert ac("runs", "show", run_id)[1].splitlines()[1].split() == ["status", "RUNNING"]
        code, out, _ = ac("runs", "cancel", run_id)
        assert code == 0 and out.split("\t")[0] == run_id

        rest = follower.communicate(timeout=120)[0].decode().splitlines()
        assert json.loads(rest[-1])["workflowFinished"]["status"] == "RUN_STATUS_CANCELLED"
        assert follower.returncode == 1  # as `run` exits for a cancelled run
        runner.communicate(timeout=120)
        assert runner.returncode == 1
        assert json.loads(ac("runs", "show", run_id, "--json")[1])["run"]["status"] == "RUN_STATUS_CANCELLED"
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
