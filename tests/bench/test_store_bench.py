"""bench.store's harness: both load clients drive a real store and report what the bench prints, and the native
client fails loudly on a failed call instead of counting it. (Speed itself is the bench's business, not a test's.)"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import pytest

from bench import store as bench_store
from bench.loadclient import NativeLoad, build_native_client
from services.canvas_store.adapters.sql import engine as sql_engine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def native_client() -> Path:
    return build_native_client()


@pytest.fixture(scope="module")
def store():
    """A seeded SQLite store process as bench.store runs it: yields (address, canvas ids)."""
    with tempfile.TemporaryDirectory(prefix="ac-test-bench-") as tmp_name, \
            bench_store.database("sqlite", Path(tmp_name)) as url:
        db = sql_engine.open_database(url, pool_size=2)
        ids = bench_store.seed(db, 100)
        db.dispose()
        with bench_store.store_process_pid(url, Path(tmp_name)) as (port, _pid):
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(channel).result(timeout=60)
            channel.close()
            yield f"127.0.0.1:{port}", ids


@pytest.mark.slow
@pytest.mark.parametrize("client", ["native", "python"])
def test_bench_store_prints_every_metric_with_either_client(client):
    result = subprocess.run(
        [sys.executable, "-m", "bench.store", "--db", "sqlite", "--canvases", "200", "--seconds", "0.3",
         "--rounds", "1", "--client", client],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    ratios = {line["op"]: line for line in lines if line["metric"] == "ops_ratio"}
    assert set(ratios) == {"get", "update"}
    for line in ratios.values():
        assert line["client"] == client
        assert line["ours_ops_s"] > 0 and line["raw_ops_s"] > 0 and line["client_cpu_us"] > 0
        assert line["value"] == pytest.approx(line["ours_ops_s"] / line["raw_ops_s"], abs=0.01)
    assert {line["metric"] for line in lines} == {"seed_s", "ops_ratio", "list_p50_ms", "commit_p50_ms"}


def test_native_client_counts_gets_and_carries_update_etags(native_client, store):
    address, ids = store
    load = NativeLoad(native_client, address, bench_store.TOKEN, "get", 4, ids)
    try:
        done, elapsed = load.run(0.2)
        assert done > 0 and elapsed >= 0.2
    finally:
        load.close()
    # Two slices of updates on the same canvases: the second succeeds only if each worker carried the etag
    # from its last reply (a stale one gets ABORTED, which fails the run).
    load = NativeLoad(native_client, address, bench_store.TOKEN, "update", 2, _id_etag_lines(address, ids[:2]))
    try:
        assert load.run(0.1)[0] > 0
        assert load.run(0.1)[0] > 0
    finally:
        load.close()


def test_native_client_reports_a_failed_call(native_client, store):
    address, ids = store
    with pytest.raises(RuntimeError, match=r"error 16 "):  # UNAUTHENTICATED, before any slice
        NativeLoad(native_client, address, "not-a-token", "get", 2, ids)
    stale = [f"{cid} 0000000000000000" for cid in ids[2:4]]
    with pytest.raises(RuntimeError, match=r"error 10 "):  # ABORTED: a stale etag
        NativeLoad(native_client, address, bench_store.TOKEN, "update", 2, stale)


def test_native_client_rejects_an_update_without_a_canvas_per_worker(native_client, store):
    address, ids = store
    result = subprocess.run([str(native_client), address, bench_store.TOKEN, "update", "3"],
                            input=f"{ids[0]} etag\n\n", capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "one \"id etag\" line per worker" in result.stderr


def _id_etag_lines(address: str, ids: list[str]) -> list[str]:
    from agentcanvas.v1 import canvas_store_pb2 as pb
    from agentcanvas.v1 import canvas_store_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = canvas_store_pb2_grpc.CanvasStoreStub(channel)
        metadata = (("authorization", f"Bearer {bench_store.TOKEN}"),)
        return [f"{cid} {stub.GetCanvas(pb.GetCanvasRequest(id=cid), metadata=metadata).etag}" for cid in ids]
