"""Properties of the rendered Kubernetes manifests (dev and prod overlays), plus schema validation."""

from __future__ import annotations

import base64
import math
import re
from collections import Counter
from typing import Any

import kubernetes_validate
import pytest
import yaml

from services.common.auth import TokenAuthenticator
from services.common.errors import UnauthenticatedError
from services.common.settings import SECTION_BY_SERVICE, Config
from tests.deploy.support import KUBERNETES_VERSION, OVERLAYS, find, one

SERVICES = {
    "canvas-store": (50051, "agentcanvas.v1.CanvasStore"),
    "orchestrator": (50052, "agentcanvas.v1.Orchestrator"),
    "llm-gateway": (50053, "agentcanvas.v1.LlmGateway"),
    "sandbox": (50054, "agentcanvas.v1.Sandbox"),
}
HTTP_SERVICES = {"http-api": 9380}
"""Services that answer HTTP (RAGFlow's API), probed on /healthz instead of grpc.health.v1."""
SHUTDOWN_GRACE_S = 20


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def _container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    containers = [c for c in _pod_spec(deployment)["containers"] if c["name"] == name]
    assert len(containers) == 1
    return containers[0]


def _pods_of(objects: list[dict[str, Any]], selector: dict[str, Any]) -> set[str]:
    """Names (app.kubernetes.io/name) of workloads whose pod labels match a podSelector."""
    names = set()
    for workload in find(objects, "Deployment") + find(objects, "StatefulSet") + find(objects, "Job"):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        if all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
            _expression_matches(expr, labels) for expr in selector.get("matchExpressions") or []
        ):
            names.add(labels["app.kubernetes.io/name"])
    return names


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    value = labels.get(expr["key"])
    if expr["operator"] == "In":
        return value in expr["values"]
    if expr["operator"] == "NotIn":
        return value not in expr["values"]
    if expr["operator"] == "Exists":
        return value is not None
    if expr["operator"] == "DoesNotExist":
        return value is None
    raise AssertionError(f"unknown operator {expr['operator']}")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_passes_kubernetes_validate(rendered, overlay):
    for obj in rendered[overlay]:
        # Raises ValidationError (or SchemaNotFoundError) on failure; returns the version used.
        assert kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True) == "1.34"


def test_kubernetes_validate_rejects_a_broken_manifest(rendered):
    # The validation step is only worth something if it can fail.
    broken = dict(one(rendered["prod"], "Deployment", "orchestrator"))
    broken["spec"] = {**broken["spec"], "replicas": "three"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_namespaced_object_is_in_the_overlay_namespace(rendered, overlay):
    namespace = {"dev": "agent-canvas-dev", "prod": "agent-canvas"}[overlay]
    assert [o["metadata"]["name"] for o in find(rendered[overlay], "Namespace")] == [namespace]
    for obj in rendered[overlay]:
        if obj["kind"] in ("Namespace", "RuntimeClass"):
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] == namespace, obj["metadata"]["name"]
    kinds = Counter(o["kind"] for o in rendered[overlay])
    assert kinds["Deployment"] == 5 and kinds["Job"] == 1
    # dev brings its own throwaway PostgreSQL and Redis; prod uses managed ones.
    datastores = {"dev": {"postgres", "redis"}, "prod": set()}[overlay]
    assert {o["metadata"]["name"] for o in find(rendered[overlay], "StatefulSet")} == datastores
    assert {o["metadata"]["name"] for o in find(rendered[overlay], "Service")} == set(SERVICES) | set(HTTP_SERVICES) | datastores


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("service", sorted(SERVICES))
def test_deployments_have_grpc_probes_limits_and_a_long_enough_grace(rendered, overlay, service):
    port, proto_service = SERVICES[service]
    deployment = one(rendered[overlay], "Deployment", service)
    container = _container(deployment, service)
    assert container["readinessProbe"]["grpc"] == {"port": port, "service": proto_service}
    assert container["livenessProbe"]["grpc"]["port"] == port
    assert container["startupProbe"]["grpc"]["port"] == port
    assert container["ports"][0]["containerPort"] == port
    assert {"name": "PORT", "value": str(port)} in container["env"]
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert {"cpu", "memory"} <= set(limits) and {"cpu", "memory"} <= set(requests)
    assert _pod_spec(deployment)["terminationGracePeriodSeconds"] > SHUTDOWN_GRACE_S
    # Every container (sidecars included) is bounded.
    for other in _pod_spec(deployment)["containers"] + _pod_spec(deployment).get("initContainers", []):
        assert {"cpu", "memory"} <= set(other["resources"]["limits"]), other["name"]
    assert deployment["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": service}
    assert _pod_spec(deployment)["automountServiceAccountToken"] is False
    assert one(rendered[overlay], "ServiceAccount", service)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_http_api_deployment_has_http_probes_limits_and_a_long_enough_grace(rendered, overlay):
    deployment = one(rendered[overlay], "Deployment", "http-api")
    container = _container(deployment, "http-api")
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9380}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": 9380}
    # /healthz is 503 while a peer is away: that must take the pod out of the Service, not restart it
    assert container["livenessProbe"]["tcpSocket"] == {"port": 9380}
    assert container["ports"][0]["containerPort"] == 9380 and {"name": "PORT", "value": "9380"} in container["env"]
    assert {"cpu", "memory"} <= set(container["resources"]["limits"]) and {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert _pod_spec(deployment)["terminationGracePeriodSeconds"] > SHUTDOWN_GRACE_S
    assert _pod_spec(deployment)["automountServiceAccountToken"] is False
    assert one(rendered[overlay], "ServiceAccount", "http-api")
    service = one(rendered[overlay], "Service", "http-api")
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "http-api"}
    assert service["spec"]["ports"][0]["port"] == 9380 and service["spec"]["ports"][0]["appProtocol"] == "http"
    env = {e["name"]: e for e in container["env"]}
    assert env["CANVAS_STORE_ADDR"]["value"] == "dns:///canvas-store.$(POD_NAMESPACE).svc.cluster.local:50051"
    assert env["ORCHESTRATOR_ADDR"]["value"] == "dns:///orchestrator.$(POD_NAMESPACE).svc.cluster.local:50052"
    # it forwards each caller's own key: no service token of its own
    assert "AGENT_CANVAS_TOKEN" not in env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_http_api_reaches_only_the_store_and_the_orchestrator(rendered, overlay):
    objects = rendered[overlay]
    allowed = {(peer_name, port["port"])
               for policy in _policies_selecting(objects, "http-api", "Egress")
               for rule in policy["spec"].get("egress") or []
               for port in rule.get("ports") or []
               for peer_name in ([_pods_of(objects, peer["podSelector"]) for peer in rule.get("to") or [] if "podSelector" in peer
                                  and "namespaceSelector" not in peer] or [{"<dns>"}])[0]}
    assert allowed == {("canvas-store", 50051), ("orchestrator", 50052), ("<dns>", 53)}


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("service", ["canvas-store", "orchestrator", "llm-gateway", "http-api"])
def test_non_sandbox_services_are_unprivileged(rendered, overlay, service):
    pod = _pod_spec(one(rendered[overlay], "Deployment", service))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    context = _container(one(rendered[overlay], "Deployment", service), service)["securityContext"]
    assert context == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def test_prod_sandbox_runs_in_gvisor_without_privileges(rendered):
    objects = rendered["prod"]
    runtime_class = one(objects, "RuntimeClass", "gvisor")
    assert runtime_class["handler"] == "runsc"
    deployment = one(objects, "Deployment", "sandbox")
    pod = _pod_spec(deployment)
    assert pod["runtimeClassName"] == "gvisor"
    service = _container(deployment, "sandbox")
    assert service["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    env = {e["name"]: e.get("value") for e in service["env"]}
    assert env["AGENT_CANVAS__SANDBOX__BACKEND"] == "docker"
    # The docker backend's socket is the one the engine sidecar creates on the shared emptyDir.
    (config_map,) = find(objects, "ConfigMap")
    docker = yaml.safe_load(config_map["data"]["config.yaml"])["sandbox"]["docker"]
    assert docker["base_url"] == "unix:///run/docker/docker.sock" and docker["bind_host_usr"] is False
    assert {"name": "docker-socket", "mountPath": "/run/docker"} in service["volumeMounts"]
    # The engine is a native sidecar in the same gVisor pod, sharing only the socket directory.
    engine = one([{"kind": "c", "metadata": {"name": c["name"]}, **c} for c in pod["initContainers"]], "c", "docker-engine")
    assert engine["restartPolicy"] == "Always"
    assert engine["image"] == "agent-canvas/sandbox-engine:0.1.0"
    assert not any(c.get("securityContext", {}).get("privileged") for c in pod["containers"] + pod["initContainers"])
    assert not any("hostPath" in v for v in pod["volumes"])


def test_dev_sandbox_uses_the_local_backend_and_no_gvisor(rendered):
    objects = rendered["dev"]
    assert not find(objects, "RuntimeClass")
    pod = _pod_spec(one(objects, "Deployment", "sandbox"))
    assert "runtimeClassName" not in pod
    assert _container(one(objects, "Deployment", "sandbox"), "sandbox")["securityContext"]["privileged"] is True
    assert not any("hostPath" in v for v in pod["volumes"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_hpas_exist_for_orchestrator_gateway_sandbox_and_http_api_only(rendered, overlay):
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in find(rendered[overlay], "HorizontalPodAutoscaler")}
    assert set(hpas) == {"orchestrator", "llm-gateway", "sandbox", "http-api"}
    for name, hpa in hpas.items():
        assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        # The HPA owns the count: a fixed spec.replicas would fight it on every apply.
        assert "replicas" not in one(rendered[overlay], "Deployment", name)["spec"]


def test_dev_is_small_and_prod_is_scaled(rendered):
    dev = {h["metadata"]["name"]: h["spec"]["minReplicas"] for h in find(rendered["dev"], "HorizontalPodAutoscaler")}
    prod = {h["metadata"]["name"]: h["spec"]["minReplicas"] for h in find(rendered["prod"], "HorizontalPodAutoscaler")}
    assert set(dev.values()) == {1}
    assert min(prod.values()) >= 3
    assert one(rendered["dev"], "Deployment", "canvas-store")["spec"]["replicas"] == 1
    assert one(rendered["prod"], "Deployment", "canvas-store")["spec"]["replicas"] >= 3
    for name in [*SERVICES, *HTTP_SERVICES]:
        dev_mem = _container(one(rendered["dev"], "Deployment", name), name)["resources"]["requests"]["memory"]
        prod_mem = _container(one(rendered["prod"], "Deployment", name), name)["resources"]["requests"]["memory"]
        assert _bytes(dev_mem) < _bytes(prod_mem), name


def _bytes(quantity: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pdbs_cover_every_service(rendered, overlay):
    pdbs = {p["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]: p["spec"] for p in find(rendered[overlay], "PodDisruptionBudget")}
    assert set(pdbs) == set(SERVICES) | set(HTTP_SERVICES)
    for spec in pdbs.values():
        assert ("minAvailable" in spec) != ("maxUnavailable" in spec)
    if overlay == "prod":
        assert all(spec.get("minAvailable") == 2 for spec in pdbs.values())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_are_headless_and_select_their_deployment(rendered, overlay):
    for name, (port, _) in SERVICES.items():
        service = one(rendered[overlay], "Service", name)
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == {"app.kubernetes.io/name": name}
        assert service["spec"]["ports"][0]["port"] == port
        assert service["spec"]["ports"][0]["appProtocol"] == "grpc"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_orchestrator_reaches_peers_through_headless_dns(rendered, overlay):
    env = {e["name"]: e for e in _container(one(rendered[overlay], "Deployment", "orchestrator"), "orchestrator")["env"]}
    for variable, (service, port) in {
        "CANVAS_STORE_ADDR": ("canvas-store", 50051),
        "LLM_GATEWAY_ADDR": ("llm-gateway", 50053),
        "SANDBOX_ADDR": ("sandbox", 50054),
    }.items():
        assert env[variable]["value"] == f"dns:///{service}.$(POD_NAMESPACE).svc.cluster.local:{port}"
    # $(POD_NAMESPACE) only expands if it is defined before its users.
    names = list(env)
    assert names.index("POD_NAMESPACE") < names.index("CANVAS_STORE_ADDR")
    assert env["AGENT_CANVAS_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "agent-canvas-tokens", "key": "AGENT_CANVAS_SERVICE_TOKEN"}


def _policies_selecting(objects: list[dict[str, Any]], pod: str, policy_type: str) -> list[dict[str, Any]]:
    return [
        p
        for p in find(objects, "NetworkPolicy")
        if policy_type in p["spec"]["policyTypes"] and pod in _pods_of(objects, p["spec"]["podSelector"])
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_default_deny_covers_every_pod(rendered, overlay):
    deny = one(rendered[overlay], "NetworkPolicy", "default-deny-all")
    assert deny["spec"]["podSelector"] == {}
    assert set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny["spec"] and "egress" not in deny["spec"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_sandbox_has_no_egress_at_all(rendered, overlay):
    objects = rendered[overlay]
    explicit = one(objects, "NetworkPolicy", "sandbox-deny-egress")
    assert explicit["spec"]["policyTypes"] == ["Egress"] and explicit["spec"]["egress"] == []
    # Policies are additive: no policy that selects the sandbox may allow any egress (not even DNS).
    for policy in _policies_selecting(objects, "sandbox", "Egress"):
        assert not policy["spec"].get("egress"), policy["metadata"]["name"]
    assert _pod_spec(one(objects, "Deployment", "sandbox"))["enableServiceLinks"] is False


def _ingress_sources(objects: list[dict[str, Any]], pod: str, port: int) -> set[str]:
    """Workloads that may open `port` on `pod`; "<namespace:...>" for any other-namespace peer."""
    sources: set[str] = set()
    for policy in _policies_selecting(objects, pod, "Ingress"):
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            assert ports, f"{policy['metadata']['name']} opens every port of {pod}"
            if port not in [p["port"] for p in ports]:
                continue
            peers = rule.get("from")
            assert peers, f"{policy['metadata']['name']} lets anyone reach {pod}:{port}"
            for peer in peers:
                if set(peer) == {"podSelector"}:
                    sources |= _pods_of(objects, peer["podSelector"])
                else:
                    sources.add(f"<namespace:{peer.get('namespaceSelector')}>")
    return sources


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_store_gateway_and_sandbox_are_reachable_only_from_the_orchestrator_and_the_store_from_http_api(rendered, overlay):
    for pod in ("llm-gateway", "sandbox"):
        assert _ingress_sources(rendered[overlay], pod, SERVICES[pod][0]) == {"orchestrator"}, pod
    assert _ingress_sources(rendered[overlay], "canvas-store", 50051) == {"orchestrator", "http-api"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_monitoring_namespace_scrapes_metrics(rendered, overlay):
    monitoring = "<namespace:{'matchLabels': {'kubernetes.io/metadata.name': 'monitoring'}}>"
    for name in [*SERVICES, *HTTP_SERVICES]:
        assert _ingress_sources(rendered[overlay], name, 9464) == {monitoring}, name
        deployment = one(rendered[overlay], "Deployment", name)
        container = _container(deployment, name)
        assert {"name": "METRICS_PORT", "value": "9464"} in container["env"]
        assert deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9464"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_gateway_reaches_the_internet_and_never_private_ranges(rendered, overlay):
    objects = rendered[overlay]
    for policy in find(objects, "NetworkPolicy"):
        for rule in policy["spec"].get("egress") or []:
            for peer in rule.get("to") or []:
                if "ipBlock" in peer:
                    assert _pods_of(objects, policy["spec"]["podSelector"]) == {"llm-gateway"}
                    assert peer["ipBlock"]["cidr"] == "0.0.0.0/0"
                    assert {"10.0.0.0/8", "169.254.0.0/16"} <= set(peer["ipBlock"]["except"])
                    assert [p["port"] for p in rule["ports"]] == [443]
    # The store's only egress is PostgreSQL (plus DNS).
    store_ports = {
        port["port"]
        for policy in _policies_selecting(objects, "canvas-store", "Egress")
        for rule in policy["spec"].get("egress") or []
        for port in rule.get("ports") or []
    }
    assert store_ports == {5432, 53}


_PLACEHOLDER = re.compile(r"change-me", re.IGNORECASE)
_KEY_SHAPES = [re.compile(p) for p in (r"sk-[A-Za-z0-9]{16,}", r"sk-ant-", r"AKIA[0-9A-Z]{16}", r"gh[pous]_[A-Za-z0-9]{20,}", r"ac_[A-Za-z0-9_-]{30,}")]


def _entropy_bits_per_char(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_hold_only_placeholders(rendered, overlay):
    secrets = find(rendered[overlay], "Secret")
    expected = {"agent-canvas-tokens", "llm-provider-keys", "shared-state"} | ({"dev-datastores"} if overlay == "dev" else set())
    assert {s["metadata"]["name"] for s in secrets} == expected
    for secret in secrets:
        values = dict(secret.get("stringData") or {})
        values.update({k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()})
        assert values, secret["metadata"]["name"]
        for key, value in values.items():
            where = f"{secret['metadata']['name']}.{key}"
            assert _PLACEHOLDER.search(value), f"{where} does not look like a placeholder"
            assert not any(shape.search(value) for shape in _KEY_SHAPES), f"{where} looks like a real key"
            for word in re.split(r"[^A-Za-z0-9]+", value):
                assert len(word) < 24 or _entropy_bits_per_char(word) < 4.0, f"{where} holds a random-looking string"


def test_secret_check_catches_a_real_looking_key():
    # Guard against a vacuous check: a realistic key fails each way the test above looks.
    fake = "sk-" + "Zq3vR8kLp2Xw9Tn4Ym7Bc1Hd6Jf5Gs0A"
    assert not _PLACEHOLDER.search(fake)
    assert any(shape.search(fake) for shape in _KEY_SHAPES)
    assert _entropy_bits_per_char(fake[3:]) >= 4.0


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_provider_keys_reach_only_the_gateway(rendered, overlay):
    for workload in find(rendered[overlay], "Deployment") + find(rendered[overlay], "Job"):
        pod = _pod_spec(workload)
        for container in pod["containers"] + pod.get("initContainers", []):
            refs = {e["secretRef"]["name"] for e in container.get("envFrom") or [] if "secretRef" in e}
            refs |= {e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env") or [] if "secretKeyRef" in e.get("valueFrom", {})}
            if "llm-provider-keys" in refs:
                assert workload["metadata"]["name"] == "llm-gateway"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_config_map_carries_the_model_registry_and_is_mounted_by_hash(rendered, overlay):
    (config_map,) = find(rendered[overlay], "ConfigMap")
    name = config_map["metadata"]["name"]
    assert re.fullmatch(r"agent-canvas-config-[a-z0-9]{10}", name)
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["auth"]["embedded"] is False
    assert {"", "*"} <= set(config["gateway"]["models"])
    for entry in config["gateway"]["models"].values():
        assert entry["model"] and entry["api_key_env"]
    for workload in find(rendered[overlay], "Deployment") + find(rendered[overlay], "Job"):
        mounted = [v["configMap"]["name"] for v in _pod_spec(workload)["volumes"] if "configMap" in v]
        assert mounted == [name], workload["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_migration_job_runs_the_store_migrate_command(rendered, overlay):
    job = one(rendered[overlay], "Job", "canvas-store-migrate")
    container = _pod_spec(job)["containers"][0]
    assert container["image"].startswith("agent-canvas/canvas-store:")
    assert container["args"] == ["migrate"]
    env = {e["name"]: e for e in container["env"]}
    assert env["STORE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "shared-state"
    assert _pod_spec(job)["restartPolicy"] in ("OnFailure", "Never")
    assert job["spec"]["backoffLimit"] >= 1


def test_dev_datastores_match_the_shared_state_urls_and_are_fenced(rendered):
    objects = rendered["dev"]
    state = one(objects, "Secret", "shared-state")["stringData"]
    passwords = one(objects, "Secret", "dev-datastores")["stringData"]
    assert state["STORE_DATABASE_URL"] == f"postgresql+psycopg://agent_canvas:{passwords['POSTGRES_PASSWORD']}@postgres:5432/agent_canvas"
    assert state["REDIS_URL"] == f"redis://:{passwords['REDIS_PASSWORD']}@redis:6379/0"
    assert _ingress_sources(objects, "postgres", 5432) == {"canvas-store", "canvas-store-migrate"}
    assert _ingress_sources(objects, "redis", 6379) == {"orchestrator"}
    for name in ("postgres", "redis"):
        for policy in _policies_selecting(objects, name, "Egress"):
            for rule in policy["spec"].get("egress") or []:
                assert [p["port"] for p in rule["ports"]] == [53, 53], policy["metadata"]["name"]  # DNS only
        pod = one(objects, "StatefulSet", name)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"cpu", "memory"} <= set(pod["containers"][0]["resources"]["limits"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_image_has_an_exact_tag(rendered, overlay):
    for workload in [o for o in rendered[overlay] if o["kind"] in ("Deployment", "StatefulSet", "Job")]:
        pod = _pod_spec(workload)
        for container in pod["containers"] + pod.get("initContainers", []):
            name, _, tag = container["image"].rpartition(":")
            assert name and tag and tag != "latest", container["image"]
            if "/" not in name:  # public images: an exact release (postgres numbers them x.y)
                assert re.fullmatch(r"\d+(\.\d+){1,2}(-[a-z0-9]+)?", tag), container["image"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_pinned_per_overlay(rendered, overlay):
    tag = {"dev": "dev", "prod": "0.1.0"}[overlay]
    for workload in find(rendered[overlay], "Deployment") + find(rendered[overlay], "Job"):
        pod = _pod_spec(workload)
        for container in pod["containers"] + pod.get("initContainers", []):
            assert container["image"].endswith(f":{tag}"), container["image"]
            assert not container["image"].endswith(":latest")


def _container_env(objects: list[dict[str, Any]], workload: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The environment Kubernetes would give `container`: secrets resolved, $(VAR) expanded."""
    secrets = {s["metadata"]["name"]: s.get("stringData") or {} for s in find(objects, "Secret")}
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(secrets[source["secretRef"]["name"]])
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), item["value"])
        elif "secretKeyRef" in item["valueFrom"]:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[ref["name"]][ref["key"]]
        elif item["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[item["name"]] = workload["metadata"]["namespace"]
    return env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_service_loads_its_config_and_auth_from_the_pod_environment(rendered, overlay, tmp_path):
    objects = rendered[overlay]
    (config_map,) = find(objects, "ConfigMap")
    config_file = tmp_path / "config.yaml"
    config_file.write_text(config_map["data"]["config.yaml"])
    tokens = one(objects, "Secret", "agent-canvas-tokens")["stringData"]
    service_token = [("authorization", f"Bearer {tokens['AGENT_CANVAS_SERVICE_TOKEN']}")]
    admin_token = [("authorization", f"Bearer {tokens['AGENT_CANVAS_ADMIN_TOKEN']}")]
    namespace = one(objects, "Deployment", "orchestrator")["metadata"]["namespace"]

    ports = {name: port for name, (port, _) in SERVICES.items()} | HTTP_SERVICES
    for name, module in (("canvas-store", "canvas_store"), ("orchestrator", "orchestrator"), ("llm-gateway", "llm_gateway"),
                         ("sandbox", "sandbox"), ("http-api", "http_api")):
        deployment = one(objects, "Deployment", name)
        container = _container(deployment, name)
        env = _container_env(objects, deployment, container)
        env["AGENT_CANVAS_DATA_DIR"] = str(tmp_path / name)  # the emptyDir
        config = Config.load(config_file, env=env)
        assert config.port(module, env=env) == ports[name]
        assert config.section(SECTION_BY_SERVICE[module])["shutdown_grace_s"] < _pod_spec(deployment)["terminationGracePeriodSeconds"]
        authenticator = TokenAuthenticator.from_config(config, env=env)  # every token_env must be set
        identity, _ = authenticator.authenticate(service_token)
        assert (identity.tenant_id, identity.role) == ("system", "service")
        # Inside an RPC the orchestrator forwards the caller's own token: every peer must know it.
        assert authenticator.authenticate(admin_token)[0].user_id == "admin"
        with pytest.raises(UnauthenticatedError, match="invalid bearer token"):
            authenticator.authenticate([("authorization", "Bearer not-a-configured-token")])
        if name == "orchestrator":
            assert env["AGENT_CANVAS_TOKEN"] == tokens["AGENT_CANVAS_SERVICE_TOKEN"]
            assert config.address("canvas_store") == f"dns:///canvas-store.{namespace}.svc.cluster.local:50051"
            assert config.address("sandbox") == f"dns:///sandbox.{namespace}.svc.cluster.local:50054"
        assert not (tmp_path / name / "token").exists()  # auth.embedded is off: no local token made
