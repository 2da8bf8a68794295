"""Helpers for the deployment tests: paths, the renderer module, object lookups."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")
KUBERNETES_VERSION = "1.34.0"


def load_module(name: str, path: Path) -> ModuleType:
    """Import a script that is not part of a package (scripts/, deploy/docker/)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


renderer = load_module("kustomize_render", ROOT / "scripts" / "kustomize_render.py")


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected exactly one {kind}/{name}, found {len(found)}"
    return found[0]
