"""Canvas files: template wrappers and bare DSLs in, an importable wrapper out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.cli.files import export_document, load_document, parse_document
from services.cli.render import TerminalView, event_json
from services.common.errors import InvalidArgumentError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ragflow_dsl"
ALL_FILES = sorted(FIXTURES.rglob("*.json"))


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.stem)
def test_every_corpus_file_loads_and_round_trips(path):
    document = load_document(path)
    raw = json.loads(path.read_text())
    assert document.dsl == (raw["dsl"] if "dsl" in raw else raw)
    declared = raw.get("canvas_category", "") if "dsl" in raw else ""
    assert document.category == ("DATAFLOW" if declared == "dataflow_canvas" else "")
    assert document.title
    again = parse_document(json.loads(json.dumps(export_document(document))))
    assert again == document


def test_localised_title_prefers_english():
    document = parse_document({"title": {"zh": "你好", "en": "Hello"}, "dsl": {"components": {}}})
    assert document.title == "Hello"


@pytest.mark.parametrize(
    "raw, message",
    [
        ([1, 2], "must hold a JSON object"),
        ({"graph": {}}, "neither a template wrapper"),
        ({"dsl": "nope"}, "neither a template wrapper"),
    ],
)
def test_bad_documents_name_the_problem(raw, message):
    with pytest.raises(InvalidArgumentError, match=message):
        parse_document(raw)


def test_a_bare_dsl_with_a_dsl_key_is_not_taken_for_a_wrapper():
    raw = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}}}, "dsl": {"components": {}}}
    assert parse_document(raw).dsl is raw
    wrapped = {"title": "T", "dsl": {"components": {}}}
    assert parse_document(wrapped).dsl is wrapped["dsl"]


def test_unreadable_files_are_invalid_arguments(tmp_path):
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        load_document(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InvalidArgumentError, match="not valid JSON"):
        load_document(broken)


@pytest.mark.parametrize("text, message", [
    ('{"components": {"a": {"obj": {"params": {"id": 9007199254740993}}}}}',
     r"\.components\.a\.obj\.params\.id: 9007199254740993 is an integer beyond"),
    ('{"components": {}, "seeds": [1, -18446744073709551616]}', r"\.seeds\[1\]: -18446744073709551616 is an integer"),
    ("[" * 100_000, "nests arrays or objects too deeply"),
    ('{"components": {}, "n": ' + "7" * 5000 + "}", "more than 4300 digits"),
])
def test_numbers_a_canvas_cannot_hold_are_refused_by_path(tmp_path, text, message):
    # Canvas DSLs travel as protobuf Structs, whose numbers are doubles: 2^53 + 1 would be stored as 2^53.
    path = tmp_path / "canvas.json"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match=message):
        load_document(path)
    path.write_text('{"components": {}, "limit": 9007199254740992, "big": 1e300}')
    assert load_document(path).dsl["limit"] == 2**53  # the largest exact magnitude still loads


def _event(**payload) -> orchestrator_pb2.RunEvent:
    return orchestrator_pb2.RunEvent(run_id="r1", seq=1, **payload)


def test_terminal_view_streams_answer_to_stdout_and_progress_to_stderr():
    out, err = io.StringIO(), io.StringIO()
    view = TerminalView(out, err, color=False)
    view.show(_event(workflow_started=orchestrator_pb2.WorkflowStarted()))
    view.show(_event(node_started=orchestrator_pb2.NodeStarted(component_id="LLM:0", component_name="Answer", component_type="LLM")))
    view.show(_event(think_start=orchestrator_pb2.ThinkStart()))
    view.show(_event(think_delta=orchestrator_pb2.ThinkDelta(content="hmm")))
    view.show(_event(think_end=orchestrator_pb2.ThinkEnd()))
    view.show(_event(message_delta=orchestrator_pb2.MessageDelta(content="Paris")))
    view.show(_event(message_delta=orchestrator_pb2.MessageDelta(content=".")))
    view.show(_event(message_end=orchestrator_pb2.MessageEnd(content="Paris.")))
    view.show(_event(workflow_finished=orchestrator_pb2.WorkflowFinished(status=common_pb2.RUN_STATUS_SUCCEEDED, elapsed_ms=12)))
    assert out.getvalue() == "thinking: hmm\nParis.\n"
    assert "● Answer (LLM)" in err.getvalue()
    assert "SUCCEEDED in 12 ms" in err.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_takeover_restart_is_marked_on_a_terminal_and_piped_output_asks_for_confirmed_text():
    from services.cli.commands import text_delivery

    out, err = _Terminal(), io.StringIO()
    view = TerminalView(out, err, color=False)
    view.show(_event(message_delta=orchestrator_pb2.MessageDelta(component_id="msg", content="Par")))
    view.show(_event(message_reset=orchestrator_pb2.MessageReset(component_id="msg", attempt=2)))
    view.show(_event(node_started=orchestrator_pb2.NodeStarted(component_id="msg", component_type="Message", attempt=2)))
    view.show(_event(message_delta=orchestrator_pb2.MessageDelta(component_id="msg", content="Paris.")))
    view.show(_event(message_end=orchestrator_pb2.MessageEnd(content="Paris.")))
    lines = out.getvalue().splitlines()
    assert lines == ["Par", "↺ msg restarted (attempt 2); the text above is superseded", "Paris."]
    assert text_delivery(False, view) == orchestrator_pb2.TEXT_DELIVERY_LIVE
    # A pipe or a file cannot take text back: the CLI asks for each answer once, whole.
    assert text_delivery(False, TerminalView(io.StringIO(), err)) == orchestrator_pb2.TEXT_DELIVERY_CONFIRMED
    assert text_delivery(True, TerminalView(io.StringIO(), err)) == orchestrator_pb2.TEXT_DELIVERY_LIVE
    view.show(_event(event_unreadable=orchestrator_pb2.EventUnreadable(
        error=common_pb2.ErrorDetail(reason="DATA_LOSS", message="event 1 of run r1 cannot be decoded"))))
    assert "event 1 of run r1 cannot be decoded" in err.getvalue()


def test_json_lines_use_the_proto_json_mapping():
    line = event_json(_event(message_delta=orchestrator_pb2.MessageDelta(component_id="Message:0", content="hi")))
    assert json.loads(line) == {"runId": "r1", "seq": "1", "messageDelta": {"componentId": "Message:0", "content": "hi"}}


def _nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


def test_dsl_nested_deeper_than_the_store_keeps_is_refused_by_path(tmp_path):
    # Past 30 levels the store refuses a DSL, and a little further protobuf cannot even encode it (that was a
    # traceback from `canvas import`): refused here by path, for both file shapes.
    path = tmp_path / "canvas.json"
    path.write_text(json.dumps({"components": {}, "deep": _nested(30)}))
    with pytest.raises(InvalidArgumentError, match=r"canvas\.json\.deep(\.k){29}: nests objects and arrays more "
                                                   "than 30 levels"):
        load_document(path)
    path.write_text(json.dumps({"title": "t", "dsl": {"components": {}, "deep": [[[_nested(40)]]]}}))
    with pytest.raises(InvalidArgumentError, match=r"canvas\.json\.dsl\.deep\[0\]\[0\]\[0\](\.k){26}: nests"):
        load_document(path)
    path.write_text(json.dumps({"components": {}, "deep": _nested(29)}))
    assert load_document(path).dsl["deep"] == _nested(29)  # 30 levels with the DSL itself: what the store keeps


@pytest.mark.parametrize("text, where", [
    ('{"title": "bad \\ud800", "dsl": {"components": {}}}', r"\.title"),
    ('{"tags": ["ok", "\\uDC00"], "dsl": {"components": {}}}', r"\.tags\[1\]"),
    ('{"components": {"a": {"x\\udfff": 1}}}', r"\.components\.a"),
    ('{"components": {}, "prompt": ["\\ud83d"]}', r"\.prompt\[0\]"),
])
def test_lone_surrogate_escapes_are_refused_by_path(tmp_path, text, where):
    # JSON allows "\ud800" alone, UTF-8 (and so protobuf) cannot carry it: `canvas import` ended in a traceback.
    path = tmp_path / "canvas.json"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match=rf"canvas\.json{where}: holds a lone surrogate"):
        load_document(path)
    path.write_text('{"components": {}, "emoji": "\\ud83d\\ude00"}')  # a pair is one character
    assert load_document(path).dsl["emoji"] == "\U0001F600"
