#!/usr/bin/env bash
# Idempotent setup for a fresh Debian or Ubuntu machine with Python 3.11+.
#   scripts/setup.sh          runtime: system packages, .venv, agent-canvas
#   scripts/setup.sh --test   also what the test suite needs (podman, the sandbox image, npm deps, gRPC C++
#                             for bench.store's native load client)
# Uses sudo when not root. Re-running it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WITH_TEST=0
[ "${1:-}" = "--test" ] && WITH_TEST=1
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# --- system packages ---------------------------------------------------------------------------
packages=(bubblewrap build-essential cmake git nodejs npm)
# podman/runc: the sandbox's container tests; the gRPC C++ packages: bench.store's native load client.
# zsh: the test of `agent-canvas completion zsh`.
[ "$WITH_TEST" = 1 ] && packages+=(podman runc pkg-config libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc zsh)
missing=()
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
# nodejs/npm may come from elsewhere (nvm, nodesource): only install them when the commands are absent.
filtered=()
for pkg in "${missing[@]}"; do
  case "$pkg" in
    nodejs) command -v node >/dev/null || filtered+=("$pkg") ;;
    npm) command -v npm >/dev/null || filtered+=("$pkg") ;;
    *) filtered+=("$pkg") ;;
  esac
done
if [ "${#filtered[@]}" -gt 0 ]; then
  log "installing system packages: ${filtered[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${filtered[@]}" >/dev/null
fi

# --- Python ------------------------------------------------------------------------------------
PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "agent-canvas needs Python 3.11+ (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PYTHON" -m venv .venv || { $SUDO apt-get install -y -qq python3-venv >/dev/null && "$PYTHON" -m venv .venv; }
fi
# A prebuilt llama-cpp-python wheel saves a 12-minute compile when the workplace provides one.
if [ -d "$ROOT/../shared/wheels" ]; then
  export PIP_FIND_LINKS="$ROOT/../shared/wheels"
fi
extras=""
[ "$WITH_TEST" = 1 ] && extras="[dev]"
stamp=".venv/.installed$extras"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log "installing agent-canvas$extras into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip==25.3
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
  touch "$stamp"
fi

if [ "$WITH_TEST" = 1 ]; then
  # --- npm deps of the polyglot client test ------------------------------------------------------
  if [ ! -d tests/polyglot/node_modules ] || [ tests/polyglot/package-lock.json -nt tests/polyglot/node_modules ]; then
    log "installing the polyglot client's npm deps"
    (cd tests/polyglot && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
log "setup done"
