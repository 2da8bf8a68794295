"""Agent with tools, Categorize and streaming through the real llm_gateway (in process, real gRPC) and
a scripted OpenAI-compatible server; tools against the local web-API servers. Store: in memory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct, to_struct
from tests.orchestrator.support.harness import dsl
from tests.orchestrator_tools.support.sandbox_servicer import start_sandbox
from tests.support import openai_server
from tests.support.llm_stack import llm_stack
from tests.support.generic_llm import THINK_PREFIX, generic_reply
from tests.support.web_apis import start_web_apis

AUTH = [("authorization", "Bearer t1")]
MCP_SCRIPT = str(Path(__file__).parents[1] / "orchestrator_tools" / "support" / "mcp_server.py")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("models")
    sandbox_server, sandbox_address, _ = await start_sandbox()
    tools_extra = {"code_exec": {"address": sandbox_address, "timeout_s": 30},
                   "mcp": {"connect_timeout_s": 5,
                           "servers": {"local": {"command": sys.executable, "args": [MCP_SCRIPT],
                                                 "env": {"PYTHONPATH": ":".join(sys.path)}},
                                       "down": {"url": f"http://127.0.0.1:{closed_port()}/mcp"}}}}
    with start_web_apis() as apis:
        async with llm_stack(tmp, provider=openai_server.ScriptedOpenAIServer(default=generic_reply),
                             gateway={"retry": {"max_attempts": 1}},
                             extra={"tools": {**apis.tools_config(), **tools_extra}}) as (stub, provider):
            yield stub, provider, apis
    await sandbox_server.stop(0)


async def run(stub, canvas: dict[str, Any], query: str = "solar power") -> list[Any]:
    request = orchestrator_pb2.RunCanvasRequest(dsl=to_struct(canvas), query=query)
    return [e async for e in stub.RunCanvas(request, metadata=AUTH, timeout=60)]


def of(events, kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("event") == kind]


def web_tools(order: list[str]) -> list[dict[str, Any]]:
    entries = {"tavily": {"component_name": "TavilySearch", "name": "TavilySearch", "params": {}},
               "wiki": {"component_name": "Wikipedia", "name": "Wikipedia", "params": {}},
               "ddg": {"component_name": "DuckDuckGo", "name": "DuckDuckGo", "params": {}}}
    return [entries[name] for name in order]


def agent_canvas(tools: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
    return dsl({
        "begin": {"type": "Begin", "down": ["agent"]},
        "agent": {"type": "Agent", "params": {"llm_id": "", "sys_prompt": "Research.", "tools": tools,
                                              "prompts": [{"role": "user", "content": "{sys.query}"}], **params},
                  "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{agent@content}"]}},
    })


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def offered_names(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or [])


async def test_agent_calls_tools_in_parallel_and_cites_them(stack):
    stub, provider, apis = stack
    before = len(provider.chat_bodies)
    events = await run(stub, agent_canvas(web_tools(["tavily", "wiki", "ddg"])))
    end = of(events, "workflow_finished")[0]
    assert end.status == common_pb2.RUN_STATUS_SUCCEEDED, end.error
    bodies = provider.chat_bodies[before:]
    assert len(bodies) == 2  # one round of three parallel calls, then the answer
    assert offered_names(bodies[0]) == ["duckduckgo_search", "tavily_search", "wikipedia_search"]
    assert "[ID:<n>]" in bodies[0]["messages"][0]["content"]  # citation instructions from the first call on
    tool_turns = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert len(tool_turns) == 3 and all("ID:" in m["content"] for m in tool_turns)
    assert apis.of("tavily") and apis.of("wikipedia") and apis.of("duckduckgo")
    # Citations: sequential, unique ids over every tool's chunks, carried by MessageEnd.
    reference = from_struct(of(events, "message_end")[0].reference)
    ids = [c["citation_id"] for c in reference["chunks"]]
    assert ids == list(range(len(ids))) and len(ids) >= 3
    # Reasoning only as think events; the answer text has none of it.
    deltas = "".join(d.content for d in of(events, "message_delta"))
    assert THINK_PREFIX not in deltas and deltas == of(events, "message_end")[0].content
    assert THINK_PREFIX in "".join(t.content for t in of(events, "think_delta"))
    assert end.usage.calls == 2


async def test_tool_names_do_not_depend_on_order(stack):
    stub, provider, _ = stack
    names = []
    for order in (["tavily", "wiki", "ddg"], ["ddg", "tavily", "wiki"]):
        before = len(provider.chat_bodies)
        await run(stub, agent_canvas(web_tools(order)))
        names.append(offered_names(provider.chat_bodies[before]))
    assert names[0] == names[1]
    # Two tools of one class get names from their display names, again independent of order.
    twins = [{"component_name": "TavilySearch", "name": "News", "params": {"topic": "news"}},
             {"component_name": "TavilySearch", "name": "General", "params": {}}]
    seen = []
    for entries in (twins, list(reversed(twins))):
        before = len(provider.chat_bodies)
        await run(stub, agent_canvas(entries))
        seen.append(offered_names(provider.chat_bodies[before]))
    assert seen[0] == seen[1] == ["tavily_search_General", "tavily_search_News"]


async def test_max_rounds_then_a_final_call_without_tools(stack):
    stub, provider, _ = stack
    always = [openai_server.Reply(tool_calls=[{"id": f"c{i}", "name": "wikipedia_search",
                                               "arguments": json.dumps({"query": "wind"})}], finish_reason="tool_calls")
              for i in range(2)]
    provider.queue(*always)
    before = len(provider.chat_bodies)
    events = await run(stub, agent_canvas(web_tools(["wiki"]), max_rounds=2))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    bodies = provider.chat_bodies[before:]
    assert len(bodies) == 3
    assert "tools" not in bodies[-1] and bodies[-1]["messages"][-1]["content"] == "Exceed max rounds: 2"


async def test_an_agent_with_tools_streams_each_rounds_text_as_it_arrives(stack):
    """The answer after a tool round reaches the Message as one MessageDelta per model chunk, in
    order; the text that came with the tool call is shown once, set off by a blank line, and is not
    part of the Agent's content."""
    stub, provider, apis = stack
    call = {"index": 0, "id": "c1", "type": "function",
            "function": {"name": "wikipedia_search", "arguments": json.dumps({"query": "wind"})}}
    provider.queue(
        openai_server.Stream(chunks=[{"content": "Let me "}, {"content": "look."}, {"tool_calls": [call]}],
                             finish_reason="tool_calls"),
        openai_server.Stream(chunks=[{"reasoning_content": "Weighing sources"}, {"content": "Wind "},
                                     {"content": "power "}, {"content": "is "}, {"content": "clean."}]),
    )
    before = len(apis.of("wikipedia"))
    events = await run(stub, agent_canvas(web_tools(["wiki"])))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    assert len(apis.of("wikipedia")) == before + 1
    stream = [(e.WhichOneof("event"), getattr(e, e.WhichOneof("event")).content if e.WhichOneof("event") in
               ("message_delta", "think_delta") else "") for e in events
              if e.WhichOneof("event") in ("message_delta", "think_start", "think_delta", "think_end", "message_end")]
    deltas = [text for kind, text in stream if kind == "message_delta"]
    assert "".join(deltas) == "Let me look.\n\nWind power is clean."
    answer = deltas[deltas.index("\n\n") + 1:]
    assert len(answer) >= 3 and "".join(answer) == "Wind power is clean."  # several deltas, none lost or repeated
    # The round's reasoning comes before its text, and MessageEnd after the last delta.
    kinds_only = [kind for kind, _ in stream]
    assert kinds_only.index("think_delta") < len(kinds_only) - 1 - kinds_only[::-1].index("message_delta")
    assert kinds_only[-1] == "message_end" and of(events, "message_end")[0].content == "".join(deltas)
    assert "Weighing sources" not in "".join(deltas)
    agent = next(n for n in of(events, "node_finished") if n.component_id == "agent")
    assert from_struct(agent.outputs)["content"] == "Wind power is clean."


async def test_sub_agents_report_nested_events(stack):
    stub, _, apis = stack
    sub = {"component_name": "Agent", "name": "Web Researcher",
           "params": {"llm_id": "", "sys_prompt": "Search the web.", "description": "Searches the web",
                      "tools": web_tools(["tavily"])}}
    events = await run(stub, agent_canvas([sub]))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    started = [n for n in of(events, "node_started") if n.component_id == "agent-->Web_Researcher"]
    finished = [n for n in of(events, "node_finished") if n.component_id == "agent-->Web_Researcher"]
    assert len(started) == len(finished) == 1
    assert started[0].parent_id == finished[0].parent_id == "agent"
    assert "Searches the web" not in finished[0].outputs["content"]
    # The sub-agent's prompt came from the caller's user_prompt argument.
    assert from_struct(finished[0].inputs)["messages"][-1]["role"] == "user"
    assert apis.of("tavily")


async def test_tool_failure_is_text_for_the_model_not_a_failed_node(stack):
    stub, provider, _ = stack
    provider.queue(openai_server.Reply(tool_calls=[{"id": "c1", "name": "wikipedia_search",
                                                    "arguments": json.dumps({"query": "trigger-500"})}],
                                       finish_reason="tool_calls"))
    before = len(provider.chat_bodies)
    events = await run(stub, agent_canvas(web_tools(["wiki"])))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    tool_messages = [m for m in provider.chat_bodies[before + 1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"].startswith("ERROR:")


async def test_structured_output_of_an_agent(stack):
    stub, _, _ = stack
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "score": {"type": "integer"}},
              "required": ["title", "score"]}
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["agent"]},
        "agent": {"type": "Agent", "params": {"llm_id": "", "tools": web_tools(["wiki"]),
                                              "prompts": [{"role": "user", "content": "{sys.query}"}],
                                              "outputs": {"structured": schema}}, "down": ["msg"]},
        "msg": {"type": "Message", "params": {"content": ["{agent@structured}"]}},
    })
    events = await run(stub, canvas)
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    value = json.loads(of(events, "message_end")[0].content)
    assert isinstance(value["title"], str) and isinstance(value["score"], int)


async def test_categorize_takes_one_named_branch_visible_in_node_finished(stack):
    stub, provider, _ = stack
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["cat"]},
        "cat": {"type": "Categorize", "params": {"llm_id": "", "query": "sys.query", "category_description": {
            "weather": {"description": "about weather", "examples": ["is it raining"], "to": ["a"]},
            "sports": {"description": "about sports", "to": ["b"]}}}, "down": ["a", "b"]},
        "a": {"type": "Message", "params": {"content": ["A"]}},
        "b": {"type": "Message", "params": {"content": ["B"]}},
    })
    before = len(provider.chat_bodies)
    events = await run(stub, canvas)
    body = provider.chat_bodies[before]
    assert sorted(body["response_format"]["json_schema"]["schema"]["properties"]["category"]["enum"]) == ["sports", "weather"]
    assert "is it raining" in body["messages"][0]["content"]  # the examples are in the prompt
    node = [n for n in of(events, "node_finished") if n.component_id == "cat"][0]
    assert node.branch in ("weather", "sports")
    assert list(node.next) == (["a"] if node.branch == "weather" else ["b"])
    skipped = [s.component_id for s in of(events, "node_skipped")]
    assert skipped == (["b"] if node.branch == "weather" else ["a"])


async def test_unknown_tool_class_and_unconfigured_mcp_are_per_node_validation_errors(stack):
    stub, _, _ = stack
    canvas = agent_canvas([{"component_name": "NoSuchTool", "name": "x", "params": {}}],
                          mcp=[{"mcp_id": "missing-server", "tools": {}}])
    response = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(canvas)), metadata=AUTH)
    problems = {(p.component_id, p.field) for p in response.problems}
    assert ("agent", "params.tools[0].component_name") in problems
    assert ("agent", "params.mcp[0].mcp_id") in problems
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await run(stub, canvas)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "NoSuchTool" in caught.value.details()


async def test_mcp_tools_inside_an_agent_over_stdio(stack):
    stub, provider, _ = stack
    before = len(provider.chat_bodies)
    events = await run(stub, agent_canvas([], mcp=[{"mcp_id": "local", "tools": {}}]))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    bodies = provider.chat_bodies[before:]
    assert offered_names(bodies[0]) == ["add", "refuse", "shout"]
    results = {m["name"]: m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"}
    assert results["add"].strip() == "2"
    assert "RENEWABLE ENERGY" in results["shout"]
    assert results["refuse"].startswith("ERROR:")  # the server's tool error goes back to the model


async def test_code_exec_artifacts_reach_message_end_downloads(stack):
    stub, provider, _ = stack
    script = ("def main():\n"
              "    open('artifacts/report.csv', 'w').write('a,b\\n1,2\\n')\n"
              "    return {'result': 'written'}\n")
    provider.queue(openai_server.Reply(tool_calls=[{"id": "c1", "name": "execute_code",
                                                    "arguments": json.dumps({"lang": "python", "script": script})}],
                                       finish_reason="tool_calls"))
    events = await run(stub, agent_canvas([{"component_name": "CodeExec", "name": "CodeExec", "params": {}}]))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    end = of(events, "message_end")[0]
    assert [d.filename for d in end.downloads] == ["report.csv"]
    assert "attachment://" in end.content  # a link to the artifact is appended to the answer


async def test_agent_model_failure_follows_the_exception_policy(stack):
    stub, provider, _ = stack
    provider.queue(openai_server.Fail(400))
    events = await run(stub, agent_canvas(web_tools(["wiki"]), exception_method="comment",
                                          exception_default_value="Sorry, no answer."))
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    agent = [n for n in of(events, "node_finished") if n.component_id == "agent"][0]
    assert agent.HasField("error")
    assert of(events, "message_end")[0].content == "Sorry, no answer."


async def test_an_unreachable_mcp_server_is_a_validation_problem_not_a_crash(stack):
    stub, _, _ = stack
    canvas = agent_canvas([], mcp=[{"mcp_id": "down", "tools": {}}])
    response = await stub.ValidateCanvas(orchestrator_pb2.ValidateCanvasRequest(dsl=to_struct(canvas)), metadata=AUTH)
    problem = [p for p in response.problems if p.component_id == "agent"][0]
    assert problem.field == "params.mcp[0].mcp_id" and "down" in problem.message
    # At run time the node fails (the run does not crash) and the run reports it.
    events = await run(stub, canvas)
    end = of(events, "workflow_finished")[0]
    assert end.status == common_pb2.RUN_STATUS_FAILED and end.error.component_id == "agent"


async def test_each_message_end_carries_only_new_references(stack):
    stub, _, _ = stack
    canvas = dsl({
        "begin": {"type": "Begin", "down": ["first"]},
        "first": {"type": "Agent", "params": {"llm_id": "", "tools": web_tools(["wiki"]),
                                              "prompts": [{"role": "user", "content": "{sys.query}"}]}, "down": ["m1"]},
        "m1": {"type": "Message", "params": {"content": ["{first@content}"]}, "down": ["second"]},
        "second": {"type": "Agent", "params": {"llm_id": "", "tools": web_tools(["tavily"]),
                                               "prompts": [{"role": "user", "content": "more on {sys.query}"}]}, "down": ["m2"]},
        "m2": {"type": "Message", "params": {"content": ["{second@content}"]}},
    })
    events = await run(stub, canvas)
    assert of(events, "workflow_finished")[0].status == common_pb2.RUN_STATUS_SUCCEEDED
    first, second = [from_struct(end.reference)["chunks"] for end in of(events, "message_end")]
    ids_first = [c["citation_id"] for c in first]
    ids_second = [c["citation_id"] for c in second]
    assert ids_first and ids_second
    assert ids_first + ids_second == list(range(len(ids_first) + len(ids_second)))
