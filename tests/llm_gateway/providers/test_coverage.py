"""Every row of the policy table is proved by at least one provider module."""

from __future__ import annotations

import importlib
import pkgutil

import tests.llm_gateway.providers as package
from services.llm_gateway.core.policy import FAMILIES


def test_every_policy_family_has_a_conformance_module():
    covered: set[str] = set()
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("test_") and module.name != "test_coverage":
            covered |= set(importlib.import_module(f"{package.__name__}.{module.name}").PROFILE.families)
    assert {f.name for f in FAMILIES} - covered == set()
