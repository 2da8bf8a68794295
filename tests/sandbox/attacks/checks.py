"""Host-side assertions every attack test makes: contained, and the host unchanged."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tests.sandbox.harness import Outcome, SandboxUnderTest

SCAN_DIRS = ["/", "/tmp", "/var/tmp", "/root", "/etc", "/usr", "/usr/bin", "/dev/shm", "/run", "/home", "/opt",
             tempfile.gettempdir()]


def files_named_with(token: str, extra_roots: list[Path]) -> list[str]:
    found = []
    for directory in SCAN_DIRS:
        try:
            found += [os.path.join(directory, n) for n in os.listdir(directory) if token in n]
        except OSError:
            continue
    for root in extra_roots:
        for dirpath, dirnames, filenames in os.walk(root):
            found += [os.path.join(dirpath, n) for n in dirnames + filenames if token in n]
    return found


async def assert_host_unchanged(sandbox: SandboxUnderTest, canary, outcome: Outcome, token: str | None = None) -> None:
    text = outcome.everything()
    assert canary.secret not in text, "the job read the canary secret"
    assert canary.private_file.read_text() == canary.secret and canary.public_file.read_text() == canary.secret
    await sandbox.no_leftovers()
    if token:
        roots = [sandbox.backend.settings.work_root_path]
        assert files_named_with(token, roots) == [], "the job wrote outside its sandbox"
