"""The unmodified `ragflow-sdk` from PyPI in a venv of its own, made once per machine and version.

Its metadata asks for Python 3.13; it runs on 3.11 when installed with `--ignore-requires-python`. The
venv lives under `$XDG_CACHE_HOME/agent-canvas/` (default ~/.cache), keyed by the SDK version and the
interpreter version, and is built in a temporary directory renamed into place under a lock, so
concurrent test runs neither rebuild it nor see it half made. Building it needs PyPI; without PyPI the
tests that use it fail, saying so (CI reaches PyPI).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

SDK_VERSION = "0.27.3"
REQUIREMENT = f"ragflow-sdk=={SDK_VERSION}"


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agent-canvas"


class SdkUnavailable(RuntimeError):
    """The SDK's venv could not be made (no PyPI, most likely)."""


def sdk_python() -> Path:
    """The interpreter of the SDK's venv, made on first use."""
    tag = f"ragflow-sdk-{SDK_VERSION}-py{sys.version_info.major}{sys.version_info.minor}"
    root = cache_root()
    home = root / tag
    python = home / "bin" / "python"
    done = home / ".complete"
    if done.exists():
        return python
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{tag}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return python
        building = root / f"{tag}.building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        steps = [[base, "-m", "venv", str(building)],
                 [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  "--ignore-requires-python", REQUIREMENT]]
        for step in steps:
            result = subprocess.run(step, capture_output=True, text=True, timeout=600)
            if result.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                raise SdkUnavailable(f"could not install {REQUIREMENT} into a venv (needs PyPI): `{' '.join(step)}` "
                                     f"exited {result.returncode}: {(result.stderr or result.stdout)[-2000:]}")
        (building / ".complete").write_text(REQUIREMENT + "\n")
        shutil.rmtree(home, ignore_errors=True)
        building.rename(home)
    return python
