"""deploy/docker/Dockerfile and deploy/compose.yaml: lint clean, and the properties we promise."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import compose
import pytest
import yaml

from services.common.auth import TokenAuthenticator
from services.common.settings import Config
from tests.deploy.support import ROOT

DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
COMPOSE_FILE = ROOT / "deploy" / "compose.yaml"
ENV_EXAMPLE = ROOT / "deploy" / "secrets.env.example"
COMPOSE_BIN = Path(compose.__file__).parent / "docker-compose"
BIN = Path(sys.executable).parent

SERVICE_TARGETS = {
    "canvas-store": ("services.canvas_store", 50051),
    "orchestrator": ("services.orchestrator", 50052),
    "llm-gateway": ("services.llm_gateway", 50053),
    "sandbox": ("services.sandbox", 50054),
    "http-api": ("services.http_api", 9380),
}


def _stages() -> dict[str, dict]:
    """Dockerfile stages: name -> {from, lines} (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: dict[str, dict] = {}
    current: dict | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if match:
            current = {"from": match.group(1), "lines": []}
            stages[match.group(2) or f"stage{len(stages)}"] = current
        elif current is not None:
            current["lines"].append(line)
    return stages


def _chain(stages: dict[str, dict], name: str) -> list[str]:
    """Instructions of a stage and its parents, oldest first."""
    lines: list[str] = []
    while name in stages:
        lines = stages[name]["lines"] + lines
        name = stages[name]["from"]
    return lines


def _last(lines: list[str], instruction: str) -> str:
    matching = [line for line in lines if line.upper().startswith(instruction + " ")]
    assert matching, f"no {instruction}"
    return matching[-1]


@pytest.mark.parametrize("target", sorted(SERVICE_TARGETS))
def test_each_service_image_has_entrypoint_port_probe_and_a_non_root_user(target):
    module, port = SERVICE_TARGETS[target]
    lines = _chain(_stages(), target)
    assert _last(lines, "ENTRYPOINT") == f'ENTRYPOINT ["python", "-m", "{module}"]'
    assert _last(lines, "EXPOSE") == f"EXPOSE {port}"
    assert f"PORT={port}" in " ".join(line for line in lines if line.startswith("ENV"))
    assert _last(lines, "USER") == "USER 10001:10001"
    assert "agent-canvas-healthcheck" in _last(lines, "HEALTHCHECK")
    assert any("deploy/docker/healthcheck.py /usr/local/bin/agent-canvas-healthcheck" in line for line in lines)


def test_base_images_are_pinned_and_the_sandbox_carries_its_runtimes():
    text = DOCKERFILE.read_text()
    for image in re.findall(r"^ARG \w+_IMAGE=(\S+)$", text, re.MULTILINE):
        assert re.search(r":\d+\.\d+\.\d+(-[a-z0-9.-]+)?(@sha256:[0-9a-f]{64})?$", image), image
    sandbox = " ".join(_chain(_stages(), "sandbox"))
    assert "bubblewrap" in sandbox and "nodejs" in sandbox
    assert re.search(r"matplotlib==\d+\.\d+\.\d+", sandbox)
    # Compilers stay in the build stage.
    for target in SERVICE_TARGETS:
        assert "build-essential" not in " ".join(_chain(_stages(), target))
    engine = _stages()["sandbox-engine"]
    assert engine["from"] == "${DOCKER_ENGINE_IMAGE}"
    assert any("/opt/job-image/rootfs.tar" in line for line in engine["lines"])


def _tool(name: str) -> str:
    """A linter from the dev extras: next to this interpreter, else on PATH."""
    found = BIN / name if (BIN / name).exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return str(found)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False, cwd=ROOT, timeout=120)


def test_hadolint_yamllint_and_shellcheck_are_clean():
    for result in (
        _run(_tool("hadolint"), "--config", "deploy/docker/hadolint.yaml", "deploy/docker/Dockerfile"),
        _run(_tool("yamllint"), "--strict", "-c", "deploy/yamllint.yaml", "deploy"),
        _run(_tool("shellcheck"), "deploy/docker/engine-entrypoint.sh", "scripts/check_deploy.sh"),
    ):
        assert result.returncode == 0, result.args[0] + "\n" + result.stdout + result.stderr


def test_hadolint_fails_on_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN cd /tmp && pip install requests\n")
    result = _run(_tool("hadolint"), "--config", "deploy/docker/hadolint.yaml", str(bad))
    assert result.returncode != 0 and "DL3007" in result.stdout


@pytest.fixture(scope="module")
def compose_config() -> dict:
    result = _run(str(COMPOSE_BIN), "--env-file", str(ENV_EXAMPLE), "-f", str(COMPOSE_FILE), "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_requires_the_secrets_file():
    result = subprocess.run(
        [str(COMPOSE_BIN), "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
        timeout=120,
    )
    assert result.returncode != 0 and "deploy/secrets.env" in result.stderr


def test_compose_runs_everything_with_healthchecks_and_migrations_first(compose_config):
    services = compose_config["services"]
    assert set(services) == {"postgres", "redis", "migrate", "canvas-store", "orchestrator", "llm-gateway", "sandbox", "http-api"}
    for name, service in services.items():
        if name != "migrate":
            assert service["healthcheck"]["test"], name
    for name, (module, port) in SERVICE_TARGETS.items():
        service = services[name]
        assert service["build"]["target"] == name
        assert service["environment"]["PORT"] == str(port)
        if name == "http-api":  # HTTP: its /healthz, not grpc.health.v1
            assert "--http" in service["healthcheck"]["test"]
        else:
            assert module.split(".")[1] in service["healthcheck"]["test"][-1].lower().replace("canvasstore", "canvas_store").replace(
                "llmgateway", "llm_gateway"
            )
        assert int(service["stop_grace_period"].rstrip("s")) > 20
    assert services["migrate"]["command"] == ["migrate"]
    assert services["canvas-store"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert {d for d, c in services["orchestrator"]["depends_on"].items() if c["condition"] == "service_healthy"} == {
        "redis",
        "canvas-store",
        "llm-gateway",
        "sandbox",
    }


def test_compose_isolates_the_sandbox_and_limits_secrets(compose_config):
    services, networks = compose_config["services"], compose_config["networks"]
    assert set(services["sandbox"]["networks"]) == {"sandbox"}
    assert networks["sandbox"]["internal"] is True and networks["backend"]["internal"] is True
    assert [name for name, s in services.items() if "providers" in s["networks"]] == ["llm-gateway"]
    sandbox_env = services["sandbox"]["environment"]
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "STORE_DATABASE_URL", "AGENT_CANVAS__ORCHESTRATOR__REDIS_URL"} & set(sandbox_env)
    assert "STORE_DATABASE_URL" not in services["llm-gateway"]["environment"]
    for name in ("canvas-store", "orchestrator", "llm-gateway", "migrate", "http-api"):
        service = services[name]
        assert service["user"] == "10001:10001" and service["read_only"] is True and service["cap_drop"] == ["ALL"], name
    for service in services.values():
        for port in service.get("ports", []):
            assert port["host_ip"] == "127.0.0.1"


def test_compose_file_holds_no_literal_secrets():
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    for name, service in raw["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if re.search(r"TOKEN|KEY|PASSWORD|DATABASE_URL|REDIS_URL", key):
                assert "${" in str(value), f"{name}.{key} must come from the env file"
    for line in ENV_EXAMPLE.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            value = line.split("=", 1)[1]
            assert value == "" or "change-me" in value, line


def test_each_compose_service_loads_its_config_and_auth(compose_config, tmp_path):
    services = compose_config["services"]
    (mount,) = [v for v in services["canvas-store"]["volumes"] if v["target"] == "/etc/agent-canvas/config.yaml"]
    assert Path(mount["source"]) == ROOT / "deploy" / "k8s" / "base" / "config.yaml" and mount["read_only"] is True
    service_token = [("authorization", "Bearer change-me-service-token")]
    admin_token = [("authorization", "Bearer change-me-admin-token")]
    for name, (module, port) in SERVICE_TARGETS.items():
        env = {k: str(v) for k, v in services[name]["environment"].items()}
        env["AGENT_CANVAS_DATA_DIR"] = str(tmp_path / name)
        config = Config.load(mount["source"], env=env)
        assert config.port(module.split(".")[1], env=env) == port
        authenticator = TokenAuthenticator.from_config(config, env=env)
        assert authenticator.authenticate(service_token)[0].role == "service"
        # The orchestrator forwards the caller's own token inside an RPC: every peer knows it.
        assert authenticator.authenticate(admin_token)[0].user_id == "admin"
    orchestrator = Config.load(mount["source"], env={k: str(v) for k, v in services["orchestrator"]["environment"].items()})
    assert orchestrator.address("sandbox") == "sandbox:50054"
    migrate = Config.load(mount["source"], env={k: str(v) for k, v in services["migrate"]["environment"].items()})
    assert migrate.section("store")["database_url"].startswith("postgresql+psycopg://agent_canvas:")
