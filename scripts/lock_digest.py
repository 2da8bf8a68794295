"""The lock file's link to pyproject.toml: a digest of the dependency lists it was resolved from.

  python3 scripts/lock_digest.py stamp LOCK    write the digest line at the top of LOCK (scripts/lock.sh does)
  python3 scripts/lock_digest.py check [LOCK]  exit 1 with one line when LOCK (default: both lock files) was
                                               resolved from other lists than pyproject.toml's
  python3 scripts/lock_digest.py requirement LOCK NAME
                                               print NAME's pin with all its hashes on one line (what setup.sh
                                               installs on its own: pip first, then llama-cpp-python)

Only what resolution reads is digested (requires-python, dependencies, every optional-dependencies list), so
editing the description or pytest options does not make the lock stale. Standard library only: setup.sh runs it
before any virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = (ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "lock-dev.txt")
PREFIX = "# pyproject-digest: "


def digest(pyproject: Path) -> str:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    inputs = {"requires-python": project.get("requires-python", ""),
              "dependencies": project.get("dependencies", []),
              "optional-dependencies": project.get("optional-dependencies", {})}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def recorded(lock: Path) -> str | None:
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith(PREFIX):
            return line[len(PREFIX):].strip()
    return None


def stamp(lock: Path, pyproject: Path) -> None:
    lines = [line for line in lock.read_text(encoding="utf-8").splitlines() if not line.startswith(PREFIX)]
    lock.write_text("\n".join([PREFIX + digest(pyproject), *lines]) + "\n", encoding="utf-8")


def stale(lock: Path, pyproject: Path) -> str | None:
    """Why LOCK does not match PYPROJECT, or None when it does."""
    if not lock.is_file():
        return f"{lock.name} is missing: run scripts/lock.sh"
    if recorded(lock) != digest(pyproject):
        return f"{lock.relative_to(lock.parent.parent)} is stale against pyproject.toml's dependencies: run scripts/lock.sh"
    return None


def requirement(lock: Path, name: str) -> str | None:
    """`name==version --hash=sha256:... ...` from the lock (markers and comments dropped), None if absent."""
    lines = lock.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.split("==", 1)[0].split("[", 1)[0].lower() == name.lower() and "==" in line:
            pin = line.split(";", 1)[0].rstrip(" \\")
            hashes = []
            for follow in lines[i + 1:]:
                if not follow.strip().startswith("--hash="):
                    break
                hashes.append(follow.strip().rstrip(" \\"))
            package, version = pin.split("==", 1)
            return " ".join([f"{package.split('[', 1)[0]}=={version.strip()}", *hashes])
    return None


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "requirement":
        line = requirement(Path(argv[1]), argv[2])
        if line is None:
            print(f"error: {argv[2]} is not in {argv[1]}", file=sys.stderr)
            return 1
        print(line)
        return 0
    if len(argv) < 1 or argv[0] not in ("stamp", "check"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    locks = [Path(argv[1]).resolve()] if len(argv) > 1 else list(LOCKS)
    for lock in locks:
        pyproject = lock.parent.parent / "pyproject.toml"
        if argv[0] == "stamp":
            stamp(lock, pyproject)
        elif problem := stale(lock, pyproject):
            print(f"error: {problem}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
