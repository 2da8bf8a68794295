"""Issue 2's acceptance, through the real CLI entry point with nothing else running: the four
services boot in-process on embedded defaults (SQLite, local sandbox, the embedded SmolLM2 model
reached through litellm) and the answer streams back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello.json"


def _cli(*args: str, data_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, AGENT_CANVAS_DATA_DIR=str(data_dir), PYTHONPATH=f"{ROOT}:{ROOT / 'gen' / 'python'}")
    for name in ("CANVAS_STORE_ADDR", "ORCHESTRATOR_ADDR", "LLM_GATEWAY_ADDR", "SANDBOX_ADDR", "AGENT_CANVAS_CONFIG", "AGENT_CANVAS_TOKEN"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("embedded")


@pytest.mark.slow
def test_run_json_streams_typed_events_from_the_local_model(data_dir):
    result = _cli("run", str(HELLO), "--query", "What is the capital of France?", "--json", "--embedded", data_dir=data_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [next(k for k in e if k not in {"runId", "sessionId", "seq", "createdAtMs", "traceId"}) for e in events]
    assert kinds[0] == "workflowStarted" and kinds[-1] == "workflowFinished"
    assert "messageDelta" in kinds and kinds.index("messageDelta") < kinds.index("messageEnd")
    seqs = [int(e["seq"]) for e in events]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    assert len({e["runId"] for e in events}) == 1 and all(len(e["traceId"]) == 32 for e in events)
    finished = events[-1]["workflowFinished"]
    assert finished["status"] == "RUN_STATUS_SUCCEEDED"
    answer = "".join(e["messageDelta"]["content"] for e in events if "messageDelta" in e)
    assert "Paris" in answer  # SmolLM2 answers with greedy decoding: "... Paris is the capital of France."
    assert int(finished["usage"]["calls"]) >= 1 and int(finished["usage"]["completionTokens"]) > 0


@pytest.mark.slow
def test_terminal_view_streams_the_answer_to_stdout(data_dir):
    result = _cli("run", str(HELLO), "--query", "What is the capital of France?", "--embedded", data_dir=data_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Paris" in result.stdout
    assert "SUCCEEDED" in result.stderr and "Answer (LLM)" in result.stderr


def test_canvas_import_list_get_export_round_trip(data_dir, tmp_path):
    imported = _cli("canvas", "import", str(HELLO), "--embedded", data_dir=data_dir)
    assert imported.returncode == 0, imported.stderr[-3000:]
    canvas_id, title = imported.stdout.strip().split("\t")
    assert title == "Hello, local model"
    listed = _cli("canvas", "list", "--embedded", data_dir=data_dir)
    assert f"{canvas_id}\tAGENT\t{title}" in listed.stdout
    shown = json.loads(_cli("canvas", "get", canvas_id, "--embedded", data_dir=data_dir).stdout)
    assert shown["id"] == canvas_id and "dsl" not in shown
    exported = tmp_path / "exported.json"
    assert _cli("canvas", "export", canvas_id, "-o", str(exported), "--embedded", data_dir=data_dir).returncode == 0
    assert json.loads(exported.read_text())["dsl"] == json.loads(HELLO.read_text())["dsl"]
    again = _cli("canvas", "import", str(exported), "--title", "copy", "--embedded", data_dir=data_dir)
    assert again.returncode == 0 and again.stdout.strip().endswith("\tcopy")


def test_bad_input_gets_clear_errors_not_tracebacks(data_dir, tmp_path):
    missing = _cli("run", "--canvas", "0" * 32, "--query", "hi", "--embedded", data_dir=data_dir)
    assert missing.returncode == 2 and "error: NOT_FOUND" in missing.stderr

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Nope:1"], "upstream": []},
        "Nope:1": {"obj": {"component_name": "NoSuchComponent", "params": {}}, "downstream": [], "upstream": ["begin"]},
    }}))
    invalid = _cli("run", str(broken), "--query", "hi", "--embedded", data_dir=data_dir)
    assert invalid.returncode == 2 and "error: INVALID_ARGUMENT" in invalid.stderr and "Nope:1" in invalid.stderr

    for result in (missing, invalid):
        assert "Traceback" not in result.stderr


def test_unknown_model_ends_the_run_with_a_clear_failure(data_dir, tmp_path):
    canvas = json.loads(HELLO.read_text())
    canvas["dsl"]["components"]["LLM:Answer"]["obj"]["params"]["llm_id"] = "no-such-model@Nowhere"
    path = tmp_path / "unknown_model.json"
    path.write_text(json.dumps(canvas))
    result = _cli("run", str(path), "--query", "hi", "--json", "--embedded", data_dir=data_dir)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    finished = json.loads(result.stdout.splitlines()[-1])["workflowFinished"]
    assert finished["status"] == "RUN_STATUS_FAILED"
    assert finished["error"]["componentId"] == "LLM:Answer"
    assert "no-such-model@Nowhere" in finished["error"]["message"]
