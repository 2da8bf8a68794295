"""scripts/kustomize_render.py: the kustomize subset that deploy/k8s relies on, on small trees."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.deploy.support import ROOT, one, renderer

KustomizeError = renderer.KustomizeError

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: example/web:1.0
          args: ["--a", "--b"]
          ports:
            - containerPort: 8080
          env:
            - name: KEEP
              value: "1"
            - name: CHANGE
              value: old
            - name: DROP
              value: x
          securityContext:
            privileged: true
            runAsUser: 0
          volumeMounts:
            - name: config
              mountPath: /etc/web
        - name: helper
          image: example/helper@sha256:0000000000000000000000000000000000000000000000000000000000000000
      volumes:
        - name: config
          configMap:
            name: web-config
        - name: creds
          secret:
            secretName: web-secret
"""


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(textwrap.dedent(text).lstrip())
    return directory


def base_tree(root: Path, kustomization: str = "") -> Path:
    return write(
        root / "base",
        {
            "kustomization.yaml": kustomization
            or """
            resources:
              - web.yaml
            """,
            "web.yaml": DEPLOYMENT,
        },
    )


def web(objects: list[dict]) -> dict:
    return one(objects, "Deployment", "web")


def container(objects: list[dict], name: str = "web") -> dict:
    return next(c for c in web(objects)["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def test_strategic_merge_merges_named_lists_and_replaces_others(tmp_path):
    base_tree(tmp_path)
    overlay = write(
        tmp_path / "overlay",
        {
            "kustomization.yaml": """
            resources: [../base]
            patches:
              - path: patch.yaml
            """,
            "patch.yaml": """
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: web
            spec:
              template:
                spec:
                  runtimeClassName: gvisor
                  containers:
                    - name: web
                      args: ["--c"]
                      env:
                        - name: CHANGE
                          value: new
                        - name: DROP
                          $patch: delete
                        - name: ADDED
                          value: "2"
                      securityContext:
                        $patch: replace
                        runAsNonRoot: true
                    - name: sidecar
                      image: example/sidecar:2
            """,
        },
    )
    objects = renderer.render(overlay)
    spec = web(objects)["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "gvisor"
    assert [c["name"] for c in spec["containers"]] == ["web", "helper", "sidecar"]
    main = container(objects)
    assert main["args"] == ["--c"]  # primitive lists are replaced
    assert main["env"] == [{"name": "KEEP", "value": "1"}, {"name": "CHANGE", "value": "new"}, {"name": "ADDED", "value": "2"}]
    assert main["securityContext"] == {"runAsNonRoot": True}  # $patch: replace drops privileged/runAsUser
    assert main["image"] == "example/web:1.0" and main["volumeMounts"][0]["mountPath"] == "/etc/web"


def test_null_in_a_patch_deletes_the_key(tmp_path):
    base_tree(tmp_path)
    overlay = write(
        tmp_path / "overlay",
        {
            "kustomization.yaml": """
            resources: [../base]
            patches:
              - patch: |
                  apiVersion: apps/v1
                  kind: Deployment
                  metadata: {name: web}
                  spec:
                    template:
                      spec:
                        containers:
                          - name: web
                            securityContext:
                              privileged: null
            """,
        },
    )
    assert container(renderer.render(overlay))["securityContext"] == {"runAsUser": 0}


def test_namespace_labels_images_and_replicas(tmp_path):
    base_tree(tmp_path)
    overlay = write(
        tmp_path / "overlay",
        {
            "kustomization.yaml": """
            namespace: team
            resources: [../base, cluster.yaml]
            labels:
              - pairs: {env: prod}
                includeTemplates: true
            images:
              - name: example/web
                newName: registry.local/web
                newTag: "2.0"
              - name: example/helper
                digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
            replicas:
              - name: web
                count: 3
            """,
            "cluster.yaml": """
            apiVersion: node.k8s.io/v1
            kind: RuntimeClass
            metadata: {name: gvisor}
            handler: runsc
            """,
        },
    )
    objects = renderer.render(overlay)
    deployment = web(objects)
    assert deployment["metadata"]["namespace"] == "team"
    assert "namespace" not in one(objects, "RuntimeClass", "gvisor")["metadata"]
    assert deployment["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert deployment["spec"]["template"]["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}  # selectors untouched
    assert container(objects)["image"] == "registry.local/web:2.0"
    assert container(objects, "helper")["image"] == "example/helper@sha256:" + "1" * 64
    assert deployment["spec"]["replicas"] == 3


def test_generators_hash_names_and_rewrite_references(tmp_path):
    base = base_tree(
        tmp_path,
        """
        resources: [web.yaml]
        configMapGenerator:
          - name: web-config
            files: [settings.yaml]
            literals: [MODE=fast]
        secretGenerator:
          - name: web-secret
            literals: [TOKEN=change-me]
        """,
    )
    (base / "settings.yaml").write_text("a: 1\n")
    objects = renderer.render(base)
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert config_map["metadata"]["name"].startswith("web-config-") and len(config_map["metadata"]["name"]) == len("web-config-") + 10
    assert config_map["data"] == {"settings.yaml": "a: 1\n", "MODE": "fast"}
    assert base64.b64decode(secret["data"]["TOKEN"]) == b"change-me"
    assert "annotations" not in config_map["metadata"]
    volumes = {v["name"]: v for v in web(objects)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert volumes["creds"]["secret"]["secretName"] == secret["metadata"]["name"]

    # Changing the content changes the name (so Deployments roll), and references follow.
    (base / "settings.yaml").write_text("a: 2\n")
    changed = renderer.render(base)
    new_name = next(o for o in changed if o["kind"] == "ConfigMap")["metadata"]["name"]
    assert new_name != config_map["metadata"]["name"]
    assert {v["name"]: v for v in web(changed)["spec"]["template"]["spec"]["volumes"]}["config"]["configMap"]["name"] == new_name


def test_overlay_generator_merge_rehashes_and_rewrites(tmp_path):
    base = base_tree(
        tmp_path,
        """
        resources: [web.yaml]
        configMapGenerator:
          - name: web-config
            literals: [MODE=fast]
        """,
    )
    base_name = next(o for o in renderer.render(base) if o["kind"] == "ConfigMap")["metadata"]["name"]
    overlay = write(
        tmp_path / "overlay",
        {
            "kustomization.yaml": """
            resources: [../base]
            configMapGenerator:
              - name: web-config
                behavior: merge
                literals: [EXTRA=1]
            """,
        },
    )
    objects = renderer.render(overlay)
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    assert config_map["data"] == {"MODE": "fast", "EXTRA": "1"}
    assert config_map["metadata"]["name"] != base_name
    volumes = {v["name"]: v for v in web(objects)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]


@pytest.mark.parametrize(
    ("kustomization", "extra", "message"),
    [
        ("resources: [web.yaml]\nhelmCharts: []\n", {}, "unsupported keys ['helmCharts']"),
        ("resources: [missing.yaml]\n", {}, "does not exist"),
        ("resources: [web.yaml, web.yaml]\n", {}, "defined twice"),
        ("resources: [web.yaml]\nlabels:\n  - pairs: {a: b}\n    includeSelectors: true\n", {}, "includeSelectors"),
        (
            "resources: [web.yaml]\npatches:\n  - path: p.yaml\n",
            {"p.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nope}\n"},
            "patch target Deployment/nope not found",
        ),
        (
            "resources: [web.yaml]\npatches:\n  - path: p.yaml\n    target: {kind: Deployment, name: web}\n",
            {"p.yaml": "- op: replace\n  path: /spec/replicas\n  value: 2\n"},
            "only strategic-merge patches",
        ),
        (
            "resources: [web.yaml]\npatches:\n  - path: p.yaml\n",
            {"p.yaml": "kind: Deployment\nmetadata: {name: web}\n---\nkind: Deployment\nmetadata: {name: web}\n"},
            "exactly one patch, found 2",
        ),
        (
            "resources: [web.yaml]\npatches:\n  - path: p.yaml\n    target: {kind: Deployment, labelSelector: a=b}\n",
            {"p.yaml": "kind: Deployment\nmetadata: {name: x}\n"},
            "target keys ['labelSelector']",
        ),
        ("resources: [web.yaml]\nreplicas:\n  - name: other\n    count: 2\n", {}, "replicas target 'other' not found"),
        ("resources: [web.yaml]\nconfigMapGenerator:\n  - literals: [A=1]\n", {}, "needs a name"),
        ("resources: [web.yaml]\nconfigMapGenerator:\n  - name: x\n    literals: [NOEQUALS]\n", {}, "must be KEY=VALUE"),
    ],
)
def test_unsupported_or_broken_kustomizations_are_errors(tmp_path, kustomization, extra, message):
    directory = write(tmp_path / "k", {"kustomization.yaml": kustomization, "web.yaml": DEPLOYMENT, **extra})
    with pytest.raises(KustomizeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        renderer.render(directory)


def test_resource_cycles_are_detected(tmp_path):
    write(tmp_path / "a", {"kustomization.yaml": "resources: [../b]\n"})
    write(tmp_path / "b", {"kustomization.yaml": "resources: [../a]\n"})
    with pytest.raises(KustomizeError, match="cycle"):
        renderer.render(tmp_path / "a")


def test_cli_writes_yaml_and_reports_errors_with_exit_code_1(tmp_path):
    base = base_tree(tmp_path)
    out = tmp_path / "out.yaml"
    script = ROOT / "scripts" / "kustomize_render.py"
    ok = subprocess.run([sys.executable, str(script), str(base), "-o", str(out)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert [d["kind"] for d in yaml.safe_load_all(out.read_text())] == ["Deployment"]
    bad = subprocess.run([sys.executable, str(script), str(tmp_path / "nowhere")], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "no kustomization.yaml" in bad.stderr and "Traceback" not in bad.stderr


def test_output_order_puts_dependencies_first(rendered):
    kinds = [o["kind"] for o in rendered["prod"]]
    assert kinds[0] == "Namespace"
    assert kinds.index("ServiceAccount") < kinds.index("ConfigMap") < kinds.index("Secret") < kinds.index("Service") < kinds.index("Deployment")


def test_a_patch_with_a_kind_target_applies_to_every_object_of_that_kind(tmp_path):
    second = DEPLOYMENT.replace("name: web\n  labels", "name: api\n  labels")
    directory = write(
        tmp_path / "k",
        {
            "kustomization.yaml": """
            resources: [web.yaml, api.yaml]
            patches:
              - path: p.yaml
                target:
                  kind: Deployment
            """,
            "web.yaml": DEPLOYMENT,
            "api.yaml": second,
            "p.yaml": """
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: not-important
            spec:
              revisionHistoryLimit: 2
            """,
        },
    )
    objects = renderer.render(directory)
    assert {o["metadata"]["name"]: o["spec"]["revisionHistoryLimit"] for o in objects} == {"web": 2, "api": 2}
