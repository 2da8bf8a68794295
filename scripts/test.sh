#!/usr/bin/env bash
# Command 2: set everything up on a fresh Debian/Ubuntu machine and run the whole test suite.
# What it does, in order: system packages, .venv and the npm deps (scripts/setup.sh --test); the
# database servers (scripts/test-services.sh); contract checks (stale stubs, buf lint); deployment
# checks; pytest. The sandbox tests start podman's Docker-compatible socket and import the sandbox
# image themselves (tests/sandbox/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
./scripts/test-services.sh
PY=.venv/bin/python
echo "==> contracts: generated stubs are current, buf lint is clean" >&2
$PY scripts/gen_protos.py --check
.venv/bin/buf lint protos
if [ -x scripts/check_deploy.sh ]; then
  echo "==> deployment manifests" >&2
  CHECK_DEPLOY_SKIP_PYTEST=1 ./scripts/check_deploy.sh
fi
echo "==> pytest" >&2
exec $PY -m pytest "$@"
