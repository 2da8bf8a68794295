"""Fixtures: every test runs against SQLite, PostgreSQL and MariaDB through a real gRPC server on port 0.

Each backend gets a uniquely named database for the test session, dropped at the end. Server URLs
default to the local servers and can be overridden with STORE_TEST_POSTGRES_URL / STORE_TEST_MYSQL_URL
(URLs of the server, e.g. postgresql+psycopg://postgres@127.0.0.1:5432/postgres; the database part is
replaced by the generated name).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import canvas_store_pb2_grpc

from services.canvas_store.app import StoreApp, build_service
from services.common.auth import TokenAuthenticator
from services.common.bootstrap import RunningServer, start_server
from services.common.clients import create_channel
from services.common.settings import Config
from services.common.structs import to_struct
from tests.support.databases import temporary_database

BACKENDS = ("sqlite", "postgresql", "mariadb")

TOKENS = [
    {"token": "t-alice", "tenant": "acme", "user": "alice"},  # first user seen for acme: its owner
    {"token": "t-bob", "tenant": "acme", "user": "bob"},  # added as a member by alice
    {"token": "t-carol", "tenant": "acme", "user": "carol"},  # in acme's token list, never added as a member
    {"token": "t-mallory", "tenant": "evil", "user": "mallory"},  # another tenant
    {"token": "t-svc", "tenant": "ops", "user": "orchestrator", "role": "service"},
]

# Small limits so the tests exercise pruning, history bounds and the DSL size limit quickly.
STORE_LIMITS = {"keep_draft_revisions": 3, "session_history_max": 6, "session_history_max_bytes": 64 * 1024,
                "session_turn_max_bytes": 96 * 1024,
                "max_dsl_bytes": 256 * 1024, "watch_poll_interval_ms": 50}


def store_config(tmp_dir: str, database_url: str, **store: Any) -> Config:
    return Config.load(env={"AGENT_CANVAS_DATA_DIR": tmp_dir}).with_overrides(
        {"auth": {"embedded": False, "tokens": TOKENS},
         "store": {"database_url": database_url, **STORE_LIMITS, **store}})


class Client:
    """A CanvasStore stub that sends one user's bearer token on every call."""

    def __init__(self, stub: canvas_store_pb2_grpc.CanvasStoreStub, token: str):
        self._stub = stub
        self._metadata = (("authorization", f"Bearer {token}"),)

    def __getattr__(self, name: str):
        method = getattr(self._stub, name)

        def call(request, **kwargs):
            return method(request, metadata=self._metadata, timeout=kwargs.pop("timeout", 30), **kwargs)

        return call


@dataclass
class Store:
    backend: str
    url: str
    running: RunningServer
    app: StoreApp
    channel: grpc.aio.Channel
    alice: Client
    bob: Client
    carol: Client
    mallory: Client
    service: Client


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def database_url(backend, tmp_path_factory) -> Iterator[str]:
    with temporary_database(backend, str(tmp_path_factory.mktemp(backend)), prefix="ac_store_test") as url:
        yield url


@pytest.fixture(scope="session")
async def store(backend, database_url, tmp_path_factory) -> Any:
    config = store_config(str(tmp_path_factory.mktemp(f"data-{backend}")), database_url)
    definition, app = build_service(config)
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    channel = create_channel(f"127.0.0.1:{running.port}")
    stub = canvas_store_pb2_grpc.CanvasStoreStub(channel)
    clients = {name: Client(stub, f"t-{name}") for name in ("alice", "bob", "carol", "mallory")}
    # alice is seen first, so she owns tenant acme; she adds bob. carol stays a non-member.
    await clients["alice"].ListTenantMembers(pb.ListTenantMembersRequest())
    await clients["alice"].AddTenantMember(pb.AddTenantMemberRequest(user_id="bob"))
    yield Store(backend, database_url, running, app, channel, service=Client(stub, "t-svc"), **clients)
    await channel.close()
    await running.stop(0)


async def expect_code(awaitable, code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    """Await a call that must fail with `code`; returns the error for further checks."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await awaitable
    assert caught.value.code() == code, f"expected {code}, got {caught.value.code()}: {caught.value.details()}"
    return caught.value


def unique_title(prefix: str = "canvas") -> str:
    return f"{prefix} {uuid.uuid4().hex[:10]}"


MINIMAL_DSL = {
    "components": {
        "begin": {"obj": {"component_name": "Begin", "params": {"prologue": "Hi"}}, "downstream": ["answer"],
                  "upstream": []},
        "answer": {"obj": {"component_name": "Message", "params": {"content": ["{begin@query}"]}},
                   "downstream": [], "upstream": ["begin"]},
    },
    "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": []},
    "history": [],
    "path": [],
    "retrieval": [],
}


def run_record(*, spec: dict[str, Any] | None = None, **fields: Any) -> pb.RunRecord:
    """A run record the store accepts: its spec holds a DSL (MINIMAL_DSL unless `spec` brings its own)."""
    run = pb.RunRecord(**fields)
    run.spec.CopyFrom(to_struct({"dsl": MINIMAL_DSL, **(spec or {})}))
    return run


def event_payload(kind: str = "") -> bytes:
    """A payload the store accepts: a serialized RunEvent (a MessageDelta whose text names `kind`)."""
    from agentcanvas.v1 import orchestrator_pb2

    return orchestrator_pb2.RunEvent(message_delta=orchestrator_pb2.MessageDelta(content=kind)).SerializeToString()


def spec_of(run: pb.RunRecord) -> dict[str, Any]:
    """A run's spec without the DSL that run_record puts in."""
    from services.common.structs import from_struct

    return {k: v for k, v in from_struct(run.spec).items() if k != "dsl"}


def dsl_variant(n: int) -> dict[str, Any]:
    """A valid DSL that differs from MINIMAL_DSL (and from other n) in one value."""
    dsl = {**MINIMAL_DSL, "components": {**MINIMAL_DSL["components"]}}
    dsl["components"]["begin"] = {"obj": {"component_name": "Begin", "params": {"prologue": f"Hi #{n}"}},
                                  "downstream": ["answer"], "upstream": []}
    return dsl


async def create_canvas(client: Client, *, title: str | None = None, dsl: dict | None = None,
                        permission: int = pb.CANVAS_PERMISSION_ME, tags: list[str] | None = None) -> pb.Canvas:
    from services.common.structs import to_struct

    canvas = pb.Canvas(title=title or unique_title(), permission=permission, tags=tags or [])
    canvas.dsl.CopyFrom(to_struct(dsl or MINIMAL_DSL))
    return await client.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas))
