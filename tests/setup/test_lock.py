"""The hashed lock files are what setup.sh installs: they must match pyproject.toml's dependency lists (CI fails
when they are stale), pin every package with hashes, and agree with each other."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.deploy.support import ROOT, load_module

lock_digest = load_module("lock_digest", ROOT / "scripts" / "lock_digest.py")

LOCKS = [ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "lock-dev.txt"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^ ;]+)")


def pins(lock: Path) -> dict[tuple[str, str], str]:
    """(normalised name, marker) -> version."""
    out = {}
    for line in lock.read_text().splitlines():
        if match := PIN.match(line):
            marker = line.split(";", 1)[1].strip(" \\") if ";" in line else ""
            out[(re.sub(r"[-_.]+", "-", match[1]).lower(), marker)] = match[3]
    return out


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_the_committed_lock_matches_pyproject(lock):
    assert lock_digest.stale(lock, ROOT / "pyproject.toml") is None, "run scripts/lock.sh"


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_every_package_is_pinned_with_hashes(lock):
    text = lock.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 3)[-1])
    packages = [b for b in blocks if PIN.match(b)]
    assert len(packages) > 50
    for block in packages:
        assert "--hash=sha256:" in block, block.splitlines()[0]


def test_direct_dependencies_are_locked_at_their_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = {name: version for (name, _), version in pins(LOCKS[1]).items()}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        name, version = re.match(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^ ;]+)", requirement).groups()
        assert locked[re.sub(r"[-_.]+", "-", name).lower()] == version, requirement


def test_the_runtime_lock_has_the_dev_locks_versions():
    runtime, dev = pins(LOCKS[0]), pins(LOCKS[1])
    assert runtime and all(dev.get(key) == version for key, version in runtime.items())


def test_a_changed_dependency_list_makes_the_lock_stale_and_other_edits_do_not(tmp_path):
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    pyproject = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(pyproject.replace('description = "', 'description = "Edited. '))
    check = [sys.executable, str(ROOT / "scripts" / "lock_digest.py"), "check"]
    assert subprocess.run([*check, str(tmp_path / "requirements" / "lock.txt")]).returncode == 0
    (tmp_path / "pyproject.toml").write_text(pyproject.replace('  "pyyaml==6.0.3",\n', '  "pyyaml==6.0.3",\n  "argcomplete==3.6.3",\n'))
    done = subprocess.run([*check, str(tmp_path / "requirements" / "lock-dev.txt")], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == ("error: requirements/lock-dev.txt is stale against pyproject.toml's dependencies: "
                                   "run scripts/lock.sh")


def test_the_build_shows_progress_from_ninja_and_make_step_lines(tmp_path):
    ninja = "".join(f"[{i}/40] g++ -c file{i}.cpp\n" for i in range(1, 41))
    make = "".join(f"[{p:3d}%] Building CXX object x.o\n" for p in range(0, 101, 5))
    for output, last in ((ninja, "100% (40/40 steps"), (make, "100% (100%")):
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_progress.py"), str(tmp_path / "log"), "llama.cpp"],
                              input="cmake says hello\n" + output, capture_output=True, text=True)
        lines = done.stderr.splitlines()
        assert done.returncode == 0 and 10 <= len(lines) <= 12, lines
        assert lines[0].startswith("    llama.cpp:") and last in lines[-1]
        assert (tmp_path / "log").read_text() == "cmake says hello\n" + output  # the whole output is kept


def test_one_locked_package_is_printed_with_all_its_hashes():
    line = lock_digest.requirement(LOCKS[0], "llama-cpp-python")
    assert line is not None and line.startswith("llama-cpp-python==") and "--hash=sha256:" in line
    pip = lock_digest.requirement(LOCKS[0], "pip")
    assert pip is not None and pip.count("--hash=sha256:") >= 2 and "\\" not in pip and "#" not in pip
    assert lock_digest.requirement(LOCKS[0], "no-such-package") is None
