"""Runs INSIDE the ragflow-sdk venv (tests/http_api/sdk_venv.py), not under pytest: drives the unmodified
SDK against the facade and prints what it saw as one JSON object.

    python sdk_driver.py SCENARIO '{"base_url": ..., "api_key": ..., ...}'
"""

from __future__ import annotations

import json
import sys

from ragflow_sdk import RAGFlow


def _messages(generator) -> list[dict]:
    return [{"id": m.id, "content": m.content, "role": m.role, "reference": m.reference} for m in generator]


def crud(rag: RAGFlow, args: dict) -> dict:
    seen: dict = {}
    title = args["title"]
    seen["create"] = rag.create_agent(title=title, dsl=args["dsl"], description="made by the SDK")
    listed = rag.list_agents(page=1, page_size=30, orderby="update_time", desc=True)
    mine = [agent for agent in listed if agent.title == title]
    seen["listed_titles"] = [agent.title for agent in listed]
    agent_id = mine[0].id
    seen["agent_id"] = agent_id
    got = rag.get_agent(agent_id)
    seen["get"] = {"id": got.id, "title": got.title, "description": got.description,
                   "components": sorted(got.dsl.components.__dict__) if hasattr(got.dsl, "components") else None}
    rag.update_agent(agent_id, title=title + " (renamed)", description="updated by the SDK")
    renamed = rag.get_agent(agent_id)
    seen["updated"] = {"title": renamed.title, "description": renamed.description}
    agent = rag.get_agent(agent_id)
    first = agent.create_session(name="first")
    second = agent.create_session(name="second")
    seen["session"] = {"id": first.id, "agent_id": first.agent_id, "name": first.name,
                       "message": [vars(m) if not isinstance(m, dict) else m for m in first.message]}
    seen["listed_sessions"] = sorted(s.id for s in agent.list_sessions())
    seen["listed_by_id"] = [s.id for s in agent.list_sessions(id=first.id)]
    seen["created_sessions"] = sorted([first.id, second.id])
    agent.delete_sessions(ids=[first.id])
    seen["after_delete"] = [s.id for s in agent.list_sessions()]
    agent.delete_sessions(delete_all=True)
    seen["after_delete_all"] = [s.id for s in agent.list_sessions()]
    try:
        rag.get_agent("0" * 32)
        seen["missing_agent"] = "no error"
    except Exception as exc:  # the SDK raises Exception(message) on a non-zero code
        seen["missing_agent"] = str(exc)
    try:
        rag.create_agent(title=title + " (renamed)", dsl=args["dsl"])
        seen["duplicate"] = "no error"
    except Exception as exc:
        seen["duplicate"] = str(exc)
    rag.delete_agent(agent_id)
    seen["after_agent_delete"] = [agent.id for agent in rag.list_agents()]
    return seen


def ask(rag: RAGFlow, args: dict) -> dict:
    agent = rag.get_agent(args["agent_id"])
    session = agent.create_session()
    blocking = _messages(session.ask(args["question"], stream=False))
    streamed = _messages(session.ask(args["question"], stream=True))
    return {"session_id": session.id, "blocking": blocking, "streamed": streamed}


def create_for_ask(rag: RAGFlow, args: dict) -> dict:
    rag.create_agent(title=args["title"], dsl=args["dsl"])
    return {"agent_id": next(agent.id for agent in rag.list_agents() if agent.title == args["title"])}


def bad_key(rag: RAGFlow, args: dict) -> dict:
    try:
        rag.list_agents()
        return {"error": None}
    except Exception as exc:
        return {"error": str(exc)}


def main() -> None:
    scenario, raw = sys.argv[1], sys.argv[2]
    args = json.loads(raw)
    rag = RAGFlow(api_key=args["api_key"], base_url=args["base_url"])
    print(json.dumps({"crud": crud, "ask": ask, "bad_key": bad_key, "create_for_ask": create_for_ask}[scenario](rag, args), ensure_ascii=False))


if __name__ == "__main__":
    main()
