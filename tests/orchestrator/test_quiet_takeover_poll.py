"""The takeover scan (ListRunRecords every 2 s on every orchestrator replica) leaves no span and no INFO line at
the store when it succeeds; any other call, and a failing poll, are still logged and traced."""

from __future__ import annotations

import logging

import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.common.errors import UnauthenticatedError
from services.orchestrator.adapters.store_grpc import GrpcRunStore
from tests.orchestrator.support.store_server import running_store

TOKENS = [{"token": "t-svc-poll", "tenant": "ops", "user": "orchestrator", "role": "service"}]
METHOD = "/agentcanvas.v1.CanvasStore/ListRunRecords"


@pytest.fixture
async def store(tmp_path):
    async with running_store(str(tmp_path), f"sqlite:///{tmp_path / 'store.db'}", TOKENS) as found:
        yield found


def access_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "services.common.interceptors" and getattr(r, "rpc_method", "") == METHOD]


async def test_an_idle_takeover_poll_has_no_span_and_no_info_line(store, caplog, finished_spans):
    address, stub = store
    runs = GrpcRunStore(address, own_token="t-svc-poll")
    try:
        with caplog.at_level(logging.DEBUG, logger="services.common.interceptors"):
            for _ in range(3):
                assert await runs.list_orphaned_runs() == []
            polls = access_lines(caplog)
            assert [r.levelno for r in polls] == [logging.DEBUG] * 3  # still there when debugging
            assert not [s for s in finished_spans.get_finished_spans() if s.name == METHOD]

            caplog.clear()
            # The same method called as anything but a poll is logged and traced as before.
            await stub.ListRunRecords(pb.ListRunRecordsRequest(), metadata=[("authorization", "Bearer t-svc-poll")])
            assert [r.levelno for r in access_lines(caplog)] == [logging.INFO]
            assert [s for s in finished_spans.get_finished_spans() if s.name == METHOD]

        caplog.clear()
        refused = GrpcRunStore(address, own_token="not-a-token")
        try:
            with caplog.at_level(logging.DEBUG, logger="services.common.interceptors"), \
                    pytest.raises(UnauthenticatedError):
                await refused.list_orphaned_runs()
            assert [r.levelno for r in access_lines(caplog)] == [logging.INFO]  # a failing poll is not hidden
        finally:
            await refused.close()
    finally:
        await runs.close()
