"""Gemini through Vertex AI (cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/projects.locations.
publishers.models/streamGenerateContent): the same GenerateContentResponse JSON as AI Studio (gemini_wire) at
/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse, with
an OAuth2 bearer token. The token comes from Application Default Credentials: a `service_account` key file
whose token_uri is this module's server, answering the signed JWT grant as Google's token endpoint does
(developers.google.com/identity/protocols/oauth2/service-account#httprest: access_token, expires_in,
token_type). The key is made for the test run; nothing leaves the machine."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from services.llm_gateway.core.types import ChatRequest, FinishReason, Message
from tests.llm_gateway.providers.gemini_wire import GeminiProfile
from tests.llm_gateway.providers.harness import Turn, conformance
from tests.support.openai_server import Raw

TOKEN = Raw(headers={"Content-Type": "application/json"},
            body=json.dumps({"access_token": "ya29.local-test-token", "expires_in": 3599, "token_type": "Bearer",
                             "scope": "https://www.googleapis.com/auth/cloud-platform"}).encode())


@functools.cache
def private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class GeminiVertex(GeminiProfile):
    name = "Gemini (Vertex AI)"

    def models(self, server):
        base = {"api_base": server.root_url}
        return {"m": {"model": "vertex_ai/gemini-2.5-flash", "family": "gemini", **base},
                "think": {"model": "vertex_ai/gemini-2.5-flash", "family": "gemini", **base}}

    def setup(self, server, monkeypatch):
        server.fixed["/token"] = TOKEN
        credentials = Path(tempfile.gettempdir()) / f"adc-{server.port}.json"
        credentials.write_text(json.dumps({
            "type": "service_account", "project_id": "demo-project", "private_key_id": "local-key",
            "private_key": private_key_pem(), "client_email": "gateway-test@demo-project.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": f"{server.root_url}/token"}))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
        monkeypatch.setenv("VERTEXAI_PROJECT", "demo-project")
        monkeypatch.setenv("VERTEXAI_LOCATION", "europe-west4")


PROFILE = GeminiVertex()
test_conformance = conformance(PROFILE)


async def test_requests_go_to_the_vertex_path_with_the_bearer_token(wire, make_gateway, monkeypatch):
    PROFILE.setup(wire, monkeypatch)
    wire.queue(PROFILE.stream(Turn(text="ok")))
    gw = make_gateway(PROFILE.models(wire))
    assert [e async for e in await gw.chat_stream(ChatRequest(model="m", messages=[Message("user", "hi")]))][-1].reason \
        == FinishReason.STOP
    (request,) = wire.requests
    assert request.path == ("/v1/projects/demo-project/locations/europe-west4/publishers/google/models/"
                            "gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == "Bearer ya29.local-test-token"
