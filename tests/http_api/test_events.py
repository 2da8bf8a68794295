"""RunEvents as RAGFlow events (core/events.py, core/openai_compat.py), event by event."""

from __future__ import annotations

from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import to_struct
from services.http_api.core.events import Answer, EventMapper, ragflow_reference
from services.http_api.core.openai_compat import ChunkMapper


def event(seq: int, **payload) -> orchestrator_pb2.RunEvent:
    return orchestrator_pb2.RunEvent(run_id="r1", session_id="s1", seq=seq, created_at_ms=1_700_000_000_500, **payload)


END = event(5, message_end=orchestrator_pb2.MessageEnd(
    component_id="Message:m", content="done", status="ok",
    reference=to_struct({"chunks": [{"id": "c9", "content": "text", "citation_id": 3}],
                         "doc_aggs": [{"doc_id": "d1", "doc_name": "a.md", "count": 1}]}),
    downloads=[orchestrator_pb2.Download(doc_id="d2", filename="out.csv", mime_type="text/csv", size=3, base64="YSxi")],
    attachment=to_struct({"doc_id": "d3", "format": "pdf", "file_name": "report.pdf"})))


def test_message_end_carries_reference_downloads_attachment_and_status():
    mapped = EventMapper("s1").map(END)
    assert mapped["event"] == "message_end" and mapped["message_id"] == "r1" and mapped["task_id"] == "s1"
    assert mapped["created_at"] == 1_700_000_000
    data = mapped["data"]
    assert data["reference"] == {"chunks": {"3": {"id": "c9", "content": "text", "citation_id": 3}},
                                 "doc_aggs": {"a.md": {"doc_id": "d1", "doc_name": "a.md", "count": 1}}}
    assert data["downloads"] == [{"doc_id": "d2", "filename": "out.csv", "mime_type": "text/csv", "size": 3, "base64": "YSxi"}]
    assert data["attachment"] == {"doc_id": "d3", "format": "pdf", "file_name": "report.pdf"}
    assert data["status"] == "ok"
    assert ragflow_reference({}) == {"chunks": {}, "doc_aggs": {}}


def test_think_events_become_ragflows_think_markers():
    mapper = EventMapper("s1")
    start = mapper.map(event(1, think_start=orchestrator_pb2.ThinkStart(component_id="m")))
    delta = mapper.map(event(2, think_delta=orchestrator_pb2.ThinkDelta(component_id="m", content="hmm")))
    end = mapper.map(event(3, think_end=orchestrator_pb2.ThinkEnd(component_id="m")))
    assert [start["data"], delta["data"], end["data"]] == [
        {"content": "", "start_to_think": True}, {"content": "hmm"}, {"content": "", "end_to_think": True}]


def test_the_session_path_drops_what_ragflow_drops():
    session, workflow = EventMapper("s1"), EventMapper("s1", forward_all=True)
    started = event(1, workflow_started=orchestrator_pb2.WorkflowStarted(query="q"))
    node = event(2, node_started=orchestrator_pb2.NodeStarted(component_id="begin", component_type="Begin"))
    skipped = event(3, node_skipped=orchestrator_pb2.NodeSkipped(component_id="x"))
    beat = event(3, heartbeat=orchestrator_pb2.Heartbeat())
    paused = event(9, workflow_finished=orchestrator_pb2.WorkflowFinished(status=common_pb2.RUN_STATUS_PAUSED))
    assert [session.map(e) for e in (started, node, skipped, beat, paused)] == [None] * 5
    assert [workflow.map(e)["event"] for e in (started, node)] == ["workflow_started", "node_started"]
    assert workflow.map(skipped) is None and workflow.map(beat) is None and workflow.map(paused) is None


def test_a_failed_run_names_its_reason_and_node():
    failed = event(9, workflow_finished=orchestrator_pb2.WorkflowFinished(
        status=common_pb2.RUN_STATUS_FAILED, usage=common_pb2.TokenUsage(total_tokens=7),
        error=common_pb2.ErrorDetail(reason="MODEL_ERROR", message="boom", component_id="LLM:a")))
    mapped = EventMapper("s1").map(failed)
    assert mapped["data"] == {"usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 7, "calls": 0},
                              "status": "failed", "error": "MODEL_ERROR at LLM:a: boom"}
    chunk = ChunkMapper("agent", "s1").map(failed)
    assert chunk["choices"][0]["finish_reason"] == "stop"
    assert chunk["choices"][0]["delta"]["content"] == "**ERROR**: MODEL_ERROR at LLM:a: boom"


def test_the_answer_folds_text_reference_and_usage_into_the_last_message_end():
    answer = Answer(EventMapper("s1"))
    for item in (event(1, message_delta=orchestrator_pb2.MessageDelta(component_id="m", content="Hel")),
                 event(2, think_delta=orchestrator_pb2.ThinkDelta(component_id="m", content="why")),
                 event(3, message_delta=orchestrator_pb2.MessageDelta(component_id="m", content="lo")), END,
                 event(6, workflow_finished=orchestrator_pb2.WorkflowFinished(
                     status=common_pb2.RUN_STATUS_SUCCEEDED, usage=common_pb2.TokenUsage(total_tokens=3)))):
        answer.add(item)
    result = answer.result()
    assert result["event"] == "message_end" and result["data"]["content"] == "Hello"
    assert result["data"]["reasoning"] == "why" and result["data"]["reference"]["chunks"]["3"]["id"] == "c9"
    assert result["data"]["usage"]["total_tokens"] == 3
