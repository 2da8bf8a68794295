#!/usr/bin/env bash
# Regenerate the hashed lock files: requirements/lock-dev.txt (agent-canvas and its [dev] extra: what
# `setup.sh --test`, test.sh and CI install) and requirements/lock.txt (the runtime subset, the same versions:
# what `setup.sh` and demo.sh install). Every transitive dependency is pinned
# with the sha256 of every file PyPI has for that version, resolved once for every platform and Python >= 3.11
# (uv's universal resolution; Linux x86_64 and aarch64 are the platforms setup supports). Versions already in
# the lock are kept unless pyproject.toml needs others, so re-running it is deterministic and a new dependency
# changes only its own lines. Then stamps the digest of pyproject's dependency lists that setup.sh and the
# tests check (scripts/lock_digest.py). Takes a few seconds; needs PyPI.
#   scripts/lock.sh            update the lock
#   scripts/lock.sh --upgrade  re-resolve every transitive dependency to its newest allowed version
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.8
PYTHON=${PYTHON:-python3}
tools="${XDG_CACHE_HOME:-$HOME/.cache}/agent-canvas/uv-$UV_VERSION"
if [ ! -x "$tools/bin/uv" ]; then
  "$PYTHON" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
upgrade=()
[ "${1:-}" = "--upgrade" ] && upgrade=(--upgrade)
# uv reads no pip.conf and --no-config keeps it on its default index; UV_* variables of the caller's machine must not change what is resolved
compile() {
  env -u UV_INDEX_URL -u UV_EXTRA_INDEX_URL -u UV_FIND_LINKS -u UV_CONSTRAINT -u UV_EXCLUDE_NEWER \
    "$tools/bin/uv" pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
    --no-config --custom-compile-command scripts/lock.sh --quiet "$@"
}
mkdir -p requirements
compile --extra dev "${upgrade[@]}" -o requirements/lock-dev.txt
# the runtime lock takes its versions from the dev lock, so demo.sh runs what the tests ran
compile -c requirements/lock-dev.txt -o requirements/lock.txt
for lock in requirements/lock-dev.txt requirements/lock.txt; do
  "$PYTHON" scripts/lock_digest.py stamp "$lock"
  echo "$lock: $(grep -c '^[A-Za-z0-9]' "$lock") packages" >&2
done
