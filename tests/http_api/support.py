"""Helpers of the HTTP facade's tests: canvases, an authenticated httpx client, the SDK subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.http_api.sdk_venv import SdkUnavailable, sdk_python
from tests.http_api.stack import TOKEN

ROOT = Path(__file__).resolve().parents[2]
HELLO = json.loads((ROOT / "examples" / "hello.json").read_text())["dsl"]
RETRIEVAL = json.loads((ROOT / "tests" / "fixtures" / "ragflow_dsl" / "examples" / "retrieval_and_generate.json").read_text())
RETRIEVAL = RETRIEVAL.get("dsl", RETRIEVAL)
# RAGFlow 0.20+ names the Retrieval's query in its params (this older example relied on the question)
RETRIEVAL["components"]["retrieval:0"]["obj"]["params"]["query"] = "sys.query"
DRIVER = Path(__file__).with_name("sdk_driver.py")
LOCAL_ENV = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def client(cluster, token: str = TOKEN, **kwargs: Any) -> httpx.Client:
    return httpx.Client(base_url=cluster.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=120,
                        trust_env=False, **kwargs)


def create_agent(cluster, title: str, dsl: dict[str, Any] = HELLO) -> str:
    with client(cluster) as http:
        created = http.post("/api/v1/agents", json={"title": title, "dsl": dsl}).json()
    assert created["code"] == 0, created
    return created["data"]["id"]


def create_session(cluster, agent_id: str) -> str:
    with client(cluster) as http:
        created = http.post(f"/api/v1/agents/{agent_id}/sessions", json={}).json()
    assert created["code"] == 0, created
    return created["data"]["id"]


def run_sdk(cluster, scenario: str, **args: Any) -> dict[str, Any]:
    """One scenario of sdk_driver.py in the SDK's venv against `cluster` (or `base_url=`); its JSON report."""
    try:
        python = sdk_python()
    except SdkUnavailable as exc:
        pytest.fail(str(exc))
    payload = {"base_url": cluster.base_url if cluster is not None else args.pop("base_url"), "api_key": TOKEN, **args}
    env = {**os.environ, **LOCAL_ENV, "PYTHONPATH": "", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([str(python), str(DRIVER), scenario, json.dumps(payload)], capture_output=True, text=True,
                          encoding="utf-8", env=env, timeout=300)
    assert done.returncode == 0, f"the SDK failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)
