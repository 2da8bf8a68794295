"""Render a kustomization directory offline: the small subset of kustomize that deploy/k8s uses.

No kustomize binary is installable here (only PyPI, npm and Debian are reachable; Debian's kubectl 1.20
bundles kustomize v2.0.3, PyPI's bindings need Python >= 3.14), so CI renders with this module and
validates the result with kubernetes-validate. The kustomization files are plain kustomize v5, so
`kubectl kustomize deploy/k8s/overlays/prod` works on a workstation; generated-name hashes and
ordering differ from this renderer's.

Supported kustomization.yaml keys (anything else is an error, never silently ignored):
  resources          files (multi-document YAML) or directories holding a kustomization.yaml
  namespace          set on every namespaced object (cluster-scoped kinds are left alone)
  labels             [{pairs, includeTemplates}] -> metadata.labels (+ pod template labels);
                     includeSelectors: true is rejected (selectors are immutable; keep them explicit)
  commonAnnotations  added to metadata.annotations
  images             [{name, newName, newTag, digest}] for containers and initContainers
  replicas           [{name, count}] for Deployments and StatefulSets
  patches            [{path | patch, target: {kind, name}}]: one strategic-merge patch per entry,
                     applied to its own kind/name, or to every object the target matches (a target
                     without name matches the whole kind). JSON 6902 and label selectors are rejected.
  configMapGenerator / secretGenerator
                     [{name, files, literals, envs, behavior: create|merge|replace, options}]
  generatorOptions   {disableNameSuffixHash, labels, annotations}

Strategic merge follows Kubernetes' patch strategies for the fields we patch: lists of containers,
initContainers, env, volumes, volumeMounts, ports, imagePullSecrets and envFrom-less named lists merge
by their key; other lists are replaced; `null` deletes a key; `$patch: delete` deletes a list element
and `$patch: replace` replaces a map. Generated ConfigMap/Secret names get a content hash suffix and
every reference in pod specs (volumes, env, envFrom, projected) is rewritten to it.

Usage: python scripts/kustomize_render.py DIR [-o FILE]
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

SUPPORTED_KEYS = {
    "apiVersion",
    "kind",
    "resources",
    "namespace",
    "labels",
    "commonAnnotations",
    "images",
    "replicas",
    "patches",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
}

CLUSTER_SCOPED = {
    "Namespace",
    "RuntimeClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "StorageClass",
    "CustomResourceDefinition",
    "PersistentVolume",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}

# Kinds that hold a pod template, and where it is.
POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}

# Strategic-merge keys of named lists (field name -> merge key), as in the Kubernetes API types.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
}

# Legacy kustomize output order: things others depend on first.
KIND_ORDER = [
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
]


# Remembers a generated object's unhashed name while layers are rendered; removed from the output.
BASE_NAME = "kustomize.render/base-name"


class KustomizeError(Exception):
    """A kustomization that this renderer cannot (or must not) render."""


def _load_documents(path: Path) -> list[Obj]:
    try:
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    except yaml.YAMLError as exc:
        raise KustomizeError(f"{path}: invalid YAML: {exc}") from None
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "metadata" not in doc:
            raise KustomizeError(f"{path}: every document needs kind and metadata")
    return docs


def _ports_key(item: Obj) -> Any:
    # containerPort for container ports, port for Service ports (both carry a protocol).
    return (item.get("containerPort", item.get("port")), item.get("protocol", "TCP"))


def _merge_list(field: str, base: list[Any], patch: list[Any]) -> list[Any]:
    if field == "ports" and all(isinstance(x, dict) for x in base + patch):
        key_of = _ports_key
    elif field in MERGE_KEYS and all(isinstance(x, dict) for x in base + patch):
        key = MERGE_KEYS[field]
        key_of = lambda item: item.get(key)  # noqa: E731 - tiny local accessor
    else:
        return copy.deepcopy(patch)
    result = copy.deepcopy(base)
    for item in patch:
        directive = item.get("$patch")
        match = next((i for i, existing in enumerate(result) if key_of(existing) == key_of(item)), None)
        if directive == "delete":
            if match is not None:
                result.pop(match)
            continue
        if match is None:
            result.append(copy.deepcopy(item))
        else:
            result[match] = strategic_merge(result[match], item, field)
    return result


def strategic_merge(base: Obj, patch: Obj, _field: str = "") -> Obj:
    """Merge `patch` into a copy of `base` with Kubernetes strategic-merge semantics (our subset)."""
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if "$patch" in patch and patch["$patch"] != "merge":
        raise KustomizeError(f"unsupported $patch directive {patch['$patch']!r} under {_field or 'the root'}")
    result = copy.deepcopy(base)
    for key, value in patch.items():
        if key == "$patch":
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = strategic_merge(result[key], value, key)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _identity(obj: Obj) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def _pod_specs(obj: Obj) -> list[Obj]:
    path = POD_TEMPLATE_PATHS.get(obj.get("kind", ""))
    if not path:
        return []
    node: Any = obj
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and isinstance(node.get("spec"), dict):
        return [node["spec"]]
    return []


def _pod_template(obj: Obj) -> Obj | None:
    path = POD_TEMPLATE_PATHS.get(obj.get("kind", ""))
    node: Any = obj
    for part in path or ():
        node = node.get(part) if isinstance(node, dict) else None
    return node if path and isinstance(node, dict) else None


def _containers(spec: Obj) -> Iterable[Obj]:
    for field in ("initContainers", "containers"):
        yield from spec.get(field) or []


def _hash_suffix(obj: Obj) -> str:
    # Content hash over kind, name and payload; like kustomize's, but not byte-identical to it.
    payload = {k: obj.get(k) for k in ("kind", "data", "binaryData", "stringData", "type")}
    payload["name"] = obj["metadata"]["name"]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    alphabet = "bcdfghkmt2456789"  # kustomize's unambiguous alphabet
    return "".join(alphabet[int(ch, 16)] for ch in digest[:10])


class Renderer:
    """Renders one kustomization directory; overlays recurse through `resources`."""

    def __init__(self) -> None:
        self._stack: list[Path] = []

    def render(self, directory: Path) -> list[Obj]:
        directory = directory.resolve()
        if directory in self._stack:
            raise KustomizeError(f"resource cycle through {directory}")
        self._stack.append(directory)
        try:
            return self._render(directory)
        finally:
            self._stack.pop()

    def _render(self, directory: Path) -> list[Obj]:
        kfile = directory / "kustomization.yaml"
        if not kfile.is_file():
            raise KustomizeError(f"{directory}: no kustomization.yaml")
        spec = yaml.safe_load(kfile.read_text()) or {}
        unknown = set(spec) - SUPPORTED_KEYS
        if unknown:
            raise KustomizeError(f"{kfile}: unsupported keys {sorted(unknown)} (see scripts/kustomize_render.py)")

        objects: list[Obj] = []
        for entry in spec.get("resources") or []:
            target = (directory / entry).resolve()
            if target.is_dir():
                objects.extend(self.render(target))
            elif target.is_file():
                objects.extend(_load_documents(target))
            else:
                raise KustomizeError(f"{kfile}: resource {entry!r} does not exist")
        self._check_unique(objects, kfile)

        generated_names: dict[tuple[str, str], str] = {}
        options = spec.get("generatorOptions") or {}
        for kind, key in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
            for gen in spec.get(key) or []:
                self._generate(directory, kind, gen, options, objects, generated_names)

        for entry in spec.get("patches") or []:
            self._apply_patch(directory, entry, objects)

        namespace = spec.get("namespace")
        for obj in objects:
            if namespace and obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = namespace
        for group in spec.get("labels") or []:
            self._apply_labels(group, objects, kfile)
        for obj in objects:
            if spec.get("commonAnnotations"):
                obj["metadata"].setdefault("annotations", {}).update(spec["commonAnnotations"])
        for image in spec.get("images") or []:
            self._apply_image(image, objects, kfile)
        for rep in spec.get("replicas") or []:
            self._apply_replicas(rep, objects, kfile)
        if generated_names:
            for obj in objects:
                self._rewrite_references(obj, generated_names)
        return objects

    @staticmethod
    def _check_unique(objects: list[Obj], kfile: Path) -> None:
        seen: set[tuple[str, str]] = set()
        for obj in objects:
            ident = _identity(obj)
            if ident in seen:
                raise KustomizeError(f"{kfile}: {ident[0]}/{ident[1]} is defined twice")
            seen.add(ident)

    def _generate(
        self,
        directory: Path,
        kind: str,
        gen: Obj,
        options: Obj,
        objects: list[Obj],
        generated_names: dict[tuple[str, str], str],
    ) -> None:
        name = gen.get("name")
        if not name:
            raise KustomizeError(f"{directory}: a {kind} generator needs a name")
        data: dict[str, str] = {}
        for item in gen.get("files") or []:
            key, _, rel = item.partition("=") if "=" in item else (Path(item).name, "", item)
            data[key] = (directory / rel).read_text()
        for item in gen.get("literals") or []:
            key, sep, value = item.partition("=")
            if not sep:
                raise KustomizeError(f"{directory}: literal {item!r} must be KEY=VALUE")
            data[key] = value
        for env_file in gen.get("envs") or []:
            for line in (directory / env_file).read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    key, _, value = line.partition("=")
                    data[key] = value
        behavior = gen.get("behavior", "create")
        existing = next(
            (
                o
                for o in objects
                if o["kind"] == kind
                and name in (o["metadata"]["name"], (o["metadata"].get("annotations") or {}).get(BASE_NAME))
            ),
            None,
        )
        if behavior == "create":
            if existing is not None:
                raise KustomizeError(f"{directory}: {kind}/{name} already exists; use behavior: merge or replace")
            obj: Obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}
            objects.append(obj)
        elif behavior in ("merge", "replace"):
            if existing is None:
                raise KustomizeError(f"{directory}: {kind}/{name} to {behavior} does not exist in the resources")
            obj = existing
            if behavior == "replace":
                obj.pop("data", None)
        else:
            raise KustomizeError(f"{directory}: unknown generator behavior {behavior!r}")
        field = "data"
        if kind == "Secret":
            data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
            obj["type"] = gen.get("type", obj.get("type", "Opaque"))
        obj.setdefault(field, {}).update(data)
        merged_options = {**options, **(gen.get("options") or {})}
        for meta_key in ("labels", "annotations"):
            if merged_options.get(meta_key):
                obj["metadata"].setdefault(meta_key, {}).update(merged_options[meta_key])
        old_name = obj["metadata"]["name"]
        if not merged_options.get("disableNameSuffixHash"):
            obj["metadata"].setdefault("annotations", {})[BASE_NAME] = name
            obj["metadata"]["name"] = name
            obj["metadata"]["name"] = f"{name}-{_hash_suffix(obj)}"
        # References to the base name, or to the name an earlier layer generated, follow the new name.
        generated_names[(kind, name)] = obj["metadata"]["name"]
        generated_names[(kind, old_name)] = obj["metadata"]["name"]

    @staticmethod
    def _apply_patch(directory: Path, entry: Obj, objects: list[Obj]) -> None:
        if "path" in entry:
            text = (directory / entry["path"]).read_text()
        elif "patch" in entry:
            text = entry["patch"]
        else:
            raise KustomizeError(f"{directory}: a patch needs path or patch")
        try:
            docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
        except yaml.YAMLError as exc:
            raise KustomizeError(f"{directory}: invalid patch YAML: {exc}") from None
        # kustomize's `patches` field holds one patch per entry (applied to one or many targets).
        if len(docs) != 1:
            raise KustomizeError(f"{directory}: a patch entry must hold exactly one patch, found {len(docs)}")
        (doc,) = docs
        if not isinstance(doc, dict) or "op" in doc or "kind" not in doc:
            raise KustomizeError(f"{directory}: only strategic-merge patches (with kind and metadata) are supported")
        target = entry.get("target")
        if target:
            unknown = set(target) - {"kind", "name"}
            if unknown:
                raise KustomizeError(f"{directory}: patch target keys {sorted(unknown)} are not supported")
            matches = [
                i
                for i, o in enumerate(objects)
                if o["kind"] == target.get("kind", o["kind"]) and o["metadata"]["name"] == target.get("name", o["metadata"]["name"])
            ]
            wanted = f"{target.get('kind', '*')}/{target.get('name', '*')}"
        else:
            name = (doc.get("metadata") or {}).get("name")
            matches = [i for i, o in enumerate(objects) if _identity(o) == (doc["kind"], name)]
            wanted = f"{doc['kind']}/{name}"
        if not matches:
            raise KustomizeError(f"{directory}: patch target {wanted} not found")
        for index in matches:
            patched = strategic_merge(objects[index], doc)
            # The patch's own name (e.g. "not-important" with a target) never renames the object.
            patched["metadata"]["name"] = objects[index]["metadata"]["name"]
            objects[index] = patched

    @staticmethod
    def _apply_labels(group: Obj, objects: list[Obj], kfile: Path) -> None:
        if group.get("includeSelectors"):
            raise KustomizeError(f"{kfile}: labels.includeSelectors is not supported: write selectors explicitly")
        pairs = group.get("pairs") or {}
        for obj in objects:
            obj["metadata"].setdefault("labels", {}).update(pairs)
            template = _pod_template(obj)
            if group.get("includeTemplates") and template is not None:
                template.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)

    @staticmethod
    def _apply_image(image: Obj, objects: list[Obj], kfile: Path) -> None:
        name = image.get("name")
        if not name:
            raise KustomizeError(f"{kfile}: images entries need a name")
        for obj in objects:
            for spec in _pod_specs(obj):
                for container in _containers(spec):
                    current = str(container.get("image", ""))
                    repo = current.split("@", 1)[0]
                    tag = ""
                    if ":" in repo.rsplit("/", 1)[-1]:
                        repo, tag = repo.rsplit(":", 1)
                    if repo != name:
                        continue
                    new_repo = image.get("newName", repo)
                    if image.get("digest"):
                        container["image"] = f"{new_repo}@{image['digest']}"
                    elif image.get("newTag"):
                        container["image"] = f"{new_repo}:{image['newTag']}"
                    else:
                        container["image"] = f"{new_repo}:{tag}" if tag else new_repo

    @staticmethod
    def _apply_replicas(rep: Obj, objects: list[Obj], kfile: Path) -> None:
        targets = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"]["name"] == rep.get("name")]
        if not targets:
            raise KustomizeError(f"{kfile}: replicas target {rep.get('name')!r} not found")
        for obj in targets:
            obj["spec"]["replicas"] = int(rep["count"])

    @staticmethod
    def _rewrite_references(obj: Obj, names: dict[tuple[str, str], str]) -> None:
        def rename(kind: str, ref: Obj | None, field: str = "name") -> None:
            if isinstance(ref, dict) and (kind, ref.get(field)) in names:
                ref[field] = names[(kind, ref[field])]

        for spec in _pod_specs(obj):
            for volume in spec.get("volumes") or []:
                rename("ConfigMap", volume.get("configMap"))
                rename("Secret", volume.get("secret"), "secretName")
                for source in (volume.get("projected") or {}).get("sources") or []:
                    rename("ConfigMap", source.get("configMap"))
                    rename("Secret", source.get("secret"))
            for container in _containers(spec):
                for env in container.get("env") or []:
                    value_from = env.get("valueFrom") or {}
                    rename("ConfigMap", value_from.get("configMapKeyRef"))
                    rename("Secret", value_from.get("secretKeyRef"))
                for env_from in container.get("envFrom") or []:
                    rename("ConfigMap", env_from.get("configMapRef"))
                    rename("Secret", env_from.get("secretRef"))


def _sort_key(obj: Obj) -> tuple[int, str, str]:
    kind = obj["kind"]
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    return rank, kind, obj["metadata"]["name"]


def render(directory: str | Path) -> list[Obj]:
    """Render a kustomization directory into a sorted list of objects."""
    objects = Renderer().render(Path(directory))
    for obj in objects:
        annotations = obj["metadata"].get("annotations")
        if annotations:
            annotations.pop(BASE_NAME, None)
            if not annotations:
                del obj["metadata"]["annotations"]
    return sorted(objects, key=_sort_key)


def dump(objects: list[Obj]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        text = dump(render(args.directory))
    except (KustomizeError, OSError) as exc:
        sys.stderr.write(f"kustomize_render: {exc}\n")
        return 1
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
