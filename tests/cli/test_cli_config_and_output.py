"""Bad configuration, bad flag values and awkward output streams: each is one `error:` line naming what is
wrong (file, key, variable or flag) and exit 2, or for a reader that went away a quiet stop, never a
traceback, a hang or a silent wrong value."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from services.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello.json"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    for name in ("CANVAS_STORE_ADDR", "ORCHESTRATOR_ADDR", "LLM_GATEWAY_ADDR", "SANDBOX_ADDR", "AGENT_CANVAS_CONFIG",
                 "AGENT_CANVAS_TOKEN", "PORT", "METRICS_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("AGENT_CANVAS__"):
            monkeypatch.delenv(name)
    return tmp_path / "data"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: INVALID_ARGUMENT: ") and "Traceback" not in err, err
    return err


def cli(*argv: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "services.cli.main", *argv], cwd=ROOT,
                            env=dict(os.environ, **(env or {})), **kwargs)


# -- the config file -------------------------------------------------------------------------------------

def unreadable_configs(tmp_path: Path) -> dict[str, Path]:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x00\x01\xff\xfe")
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes("caf\xe9: 1\n".encode("latin-1"))
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    broken = tmp_path / "broken.yaml"
    broken.write_text("store:\n  port: [1\n")
    huge = tmp_path / "huge.yaml"  # a stray big file (or /dev/zero, which was read until memory ran out)
    huge.write_text("note: " + "x" * (5 << 20) + "\n")
    return {"binary": binary, "not utf-8": latin, "directory": folder, "not yaml": broken, "huge": huge}


@pytest.mark.parametrize("kind", ["binary", "not utf-8", "directory", "not yaml", "huge"])
def test_an_unreadable_config_file_is_one_line_naming_it(tmp_path, data_dir, capsys, kind):
    path = unreadable_configs(tmp_path)[kind]
    # A traceback (exit 1) before; for YAML, PyYAML's five-line message with a caret.
    assert main(["canvas", "list", "--config", str(path), "--remote"]) == 2
    assert str(path) in one_error_line(capsys)


def test_a_data_dir_that_is_not_a_path_is_named(tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.delenv("AGENT_CANVAS_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text("data_dir: [1]\n")
    assert main(["canvas", "list", "--config", str(config), "--embedded"]) == 2  # a directory named "[1]" before
    assert "error: INVALID_ARGUMENT: data_dir: " in one_error_line(capsys)
    assert not (tmp_path / "[1]").exists()


@pytest.mark.parametrize("text, key", [
    ("addresses: [127.0.0.1:1]\n", "addresses"),
    ("addresses:\n", "addresses"),
    ("addresses: {canvas_store: ''}\n", "addresses.canvas_store"),
    ("store: {port: abc}\n", "store.port"),
    ("orchestrator: {port: 70000}\n", "orchestrator.port"),
    ("gateway: {metrics_port: -1}\n", "gateway.metrics_port"),
    ("sandbox: {shutdown_grace_s: soon}\n", "sandbox.shutdown_grace_s"),
    ("log: {level: LOUD}\n", "log.level"),
    ("log: {format: xml}\n", "log.format"),
])
def test_a_config_key_of_the_wrong_type_is_one_line_naming_the_key(tmp_path, data_dir, capsys, text, key):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    assert main(["canvas", "list", "--config", str(config), "--remote"]) == 2
    assert f"error: INVALID_ARGUMENT: {key}: " in one_error_line(capsys)


def test_numbers_written_as_strings_and_null_sections_are_still_accepted(tmp_path, data_dir, capsys):
    config = tmp_path / "config.yaml"
    config.write_text("store: {port: '50051', shutdown_grace_s: '5'}\nsandbox:\nlog: {level: warning}\n")
    assert main(["canvas", "list", "--config", str(config), "--embedded"]) == 0
    assert capsys.readouterr().err == ""


def test_a_generic_env_override_that_is_not_yaml_names_the_variable(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_CANVAS__STORE__POOL_SIZE", "[4")
    assert main(["canvas", "list", "--remote"]) == 2
    assert "AGENT_CANVAS__STORE__POOL_SIZE: is not a valid YAML value" in one_error_line(capsys)


def test_an_env_override_of_the_wrong_type_names_the_key(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_CANVAS__ADDRESSES", "5")
    assert main(["canvas", "list", "--remote"]) == 2
    assert "error: INVALID_ARGUMENT: addresses: " in one_error_line(capsys)


# -- ports: a bad one was a traceback, or was silently wrapped (-1 served on 65535) -----------------------

@pytest.mark.parametrize("env, argv, named", [
    ({"PORT": "abc"}, [], "PORT: "),
    ({"PORT": "-1"}, [], "PORT: "),
    ({"METRICS_PORT": "x"}, [], "METRICS_PORT: "),
    ({}, ["--port", "-1"], "argument --port: "),
    ({}, ["--port", "70000"], "argument --port: "),
])
def test_serve_with_a_bad_port_exits_2_naming_it(data_dir, env, argv, named):
    process = cli("serve", "store", *argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = process.communicate(timeout=60)  # it served (on the wrong port) until killed before
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = err.decode()
    assert process.returncode == 2 and named in text and "Traceback" not in text, text


def test_serve_on_a_port_in_use_exits_2_naming_it(data_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "services.cli.main", "serve", "store", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=ROOT, capture_output=True, timeout=60)
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err, err  # grpc's RuntimeError traceback, exit 1 before
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0] and "canvas_store" in errors[0], err


async def test_serve_on_a_port_another_server_listens_on_exits_2(data_dir, tmp_path):
    """grpc turns SO_REUSEPORT on by default: a second server bound the same port and the kernel split the
    connections between the two. A port held by one of our own servers is refused like any other."""
    from services.canvas_store.app import build_definition as store_definition
    from services.common.bootstrap import start_server
    from services.common.settings import Config

    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"store": {"database_url": f"sqlite:///{tmp_path}/store.db"}})
    first = await start_server(store_definition(config), config, host="127.0.0.1", port=0)
    try:
        with pytest.raises(RuntimeError, match="Failed to bind"):  # a second server in this process
            await start_server(store_definition(config), config, host="127.0.0.1", port=first.port)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.cli.main", "serve", "store", "--host", "127.0.0.1", "--port",
            str(first.port), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, err = await asyncio.wait_for(process.communicate(), 60)  # it served alongside before
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    finally:
        await first.stop(0)
    text = err.decode()
    assert process.returncode == 2 and "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: FAILED_PRECONDITION: ") and str(first.port) in errors[0]


# -- --inputs, --args and canvas files: numbers JSON has not got --------------------------------------------

@pytest.mark.parametrize("inputs, named", [
    ('{"a": NaN}', "--inputs: is not valid JSON: NaN"),
    ('{"a": [1, -Infinity]}', "--inputs: is not valid JSON: -Infinity"),
    ('{"a": [1, 1e999]}', "--inputs.a[1]: "),
    ('{"a": 123456789012345678901234567890}', "--inputs.a: 123456789012345678901234567890 is an integer beyond"),
])
def test_run_refuses_inputs_a_struct_cannot_carry(data_dir, capsys, inputs, named):
    # Before: INTERNAL from the orchestrator (with its traceback), or the integer silently rounded.
    assert main(["run", str(HELLO), "--inputs", inputs, "--embedded"]) == 2
    assert named in one_error_line(capsys)


def test_exec_refuses_nan_in_args(data_dir, capsys):
    assert main(["exec", "-c", "def main(a): return a", "--args", '{"a": NaN}', "--embedded"]) == 2
    assert "--args: is not valid JSON: NaN" in one_error_line(capsys)


def test_run_refuses_a_canvas_file_holding_nan(tmp_path, data_dir, capsys):
    canvas = tmp_path / "nan.json"
    canvas.write_text(HELLO.read_text().replace('"components"', '"x": NaN, "components"', 1))
    assert main(["run", str(canvas), "--embedded"]) == 2  # INTERNAL from the orchestrator before
    assert f"{canvas}: is not valid JSON: NaN" in one_error_line(capsys)


# -- the token ----------------------------------------------------------------------------------------------

def test_a_token_no_header_can_carry_is_named_by_its_source_and_not_printed(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_CANVAS_TOKEN", "sekrit-value\nsecond-line")
    assert main(["canvas", "list", "--embedded"]) == 2  # an ExecuteBatchError traceback before
    err = one_error_line(capsys)
    assert "AGENT_CANVAS_TOKEN" in err and "sekrit" not in err


# -- output: a reader that goes away, a terminal that is not UTF-8 --------------------------------------------

def big_canvas(tmp_path: Path) -> Path:
    """A bare DSL whose `canvas get --dsl` output is far larger than a pipe's buffer."""
    dsl = json.loads(HELLO.read_text())["dsl"]
    dsl["notes"] = ["line %d %s" % (index, "x" * 100) for index in range(3000)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(dsl))
    return path


def test_output_piped_to_a_reader_that_stops_early_ends_quietly(tmp_path, data_dir, capsys):
    assert main(["canvas", "import", str(big_canvas(tmp_path)), "--embedded"]) == 0
    canvas_id = capsys.readouterr().out.split("\t")[0]
    process = cli("canvas", "get", canvas_id, "--dsl", "--embedded", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout.readline() == b"{\n"
        process.stdout.close()  # like `| head -1`: the rest cannot be written
        err = process.stderr.read().decode()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Traceback" not in err and "BrokenPipe" not in err, err  # a BrokenPipeError traceback before
    assert process.returncode == 141  # as if SIGPIPE had ended it, like any filter


def test_a_terminal_that_is_not_utf8_gets_escapes_and_valid_json(tmp_path, data_dir, capsys):
    canvas = tmp_path / "cafe.json"
    document = json.loads(HELLO.read_text())
    document["title"] = "Café ☕"
    canvas.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    assert main(["canvas", "import", str(canvas), "--embedded"]) == 0
    canvas_id = capsys.readouterr().out.split("\t")[0]
    ascii_env = {"PYTHONIOENCODING": "ascii"}  # what LANG=C gives where Python's UTF-8 mode is off

    listed = subprocess.run([sys.executable, "-m", "services.cli.main", "canvas", "list", "--embedded"], cwd=ROOT,
                            env=dict(os.environ, **ascii_env), capture_output=True, timeout=120)
    assert listed.returncode == 0, listed.stderr.decode()  # a UnicodeEncodeError traceback before
    assert listed.stdout.decode("ascii").strip() == f"{canvas_id}\tAGENT\tCaf\\xe9 \\u2615"

    exported = subprocess.run([sys.executable, "-m", "services.cli.main", "canvas", "export", canvas_id, "--embedded"],
                              cwd=ROOT, env=dict(os.environ, **ascii_env), capture_output=True, timeout=120)
    assert exported.returncode == 0, exported.stderr.decode()
    assert json.loads(exported.stdout.decode("ascii"))["title"] == "Café ☕"  # \u escapes: still the same JSON
