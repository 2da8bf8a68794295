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
packages=(bubblewrap build-essential cmake ninja-build git nodejs npm)
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
extras=""
lock=requirements/lock.txt
if [ "$WITH_TEST" = 1 ]; then extras="[dev]"; lock=requirements/lock-dev.txt; fi
"$PYTHON" scripts/lock_digest.py check "$lock" || exit 1
pip_install() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip first, from the lock (hash-checked): the venv's own pip may be too old for the lock (pip 23 refuses a
# locked package that another one asks for with an extra, such as httpx[http2])
"$PYTHON" scripts/lock_digest.py requirement "$lock" pip > "$work/pip.txt"
if [ "$(.venv/bin/python -m pip --version | cut -d' ' -f2)" != "$(cut -d' ' -f1 "$work/pip.txt" | cut -d= -f3)" ]; then
  pip_install --require-hashes --no-deps -r "$work/pip.txt"
fi

# --- llama-cpp-python, portable ----------------------------------------------------------------------
# Built from the sdist pinned (with its hash) in the lock, with the same flags as the prebuilt wheel:
# GGML_NATIVE=OFF targets a fixed x86-64 level (AVX2/FMA/F16C) instead of the build host's CPU, whose native
# build crashes on the first completion on AVX-512/AMX CPUs; the examples, tools, tests and the multimodal
# library are not built (llama-cpp-python does not use them). README.md, "The embedded model's build".
"$PYTHON" scripts/lock_digest.py requirement "$lock" llama-cpp-python > "$work/llama.txt"
LLAMA_VERSION=$(cut -d' ' -f1 "$work/llama.txt" | cut -d= -f3)
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
llama_build="$LLAMA_VERSION $LLAMA_CMAKE_ARGS"
llama_id=$(printf '%s' "$llama_build" | sha256sum | cut -c1-12)
wheel_cache="${AGENT_CANVAS_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-canvas/wheels}/llama-cpp-python-$LLAMA_VERSION-$llama_id"
if [ "$(cat .venv/.llama-cpp-python 2>/dev/null)" != "$llama_build" ]; then
  wheel=""
  # The workplace's prebuilt wheel (same version and portable flags) is used only when its sha256 is the one
  # recorded in requirements/prebuilt-wheels.sha256: the lock's hash is the sdist's, which no wheel matches.
  shared="$ROOT/../shared/wheels/llama_cpp_python-$LLAMA_VERSION-py3-none-linux_$(uname -m).whl"
  if [ -z "${AGENT_CANVAS_REBUILD_LLAMA:-}" ] && [ -f "$shared" ] \
     && grep -q "^$(sha256sum "$shared" | cut -d' ' -f1)  $(basename "$shared")\$" requirements/prebuilt-wheels.sha256; then
    log "installing llama-cpp-python $LLAMA_VERSION from the prebuilt portable wheel in ../shared/wheels (sha256 checked)"
    wheel=$shared
  elif cached=("$wheel_cache"/*.whl) && [ -z "${AGENT_CANVAS_REBUILD_LLAMA:-}" ] && [ -f "${cached[0]}" ]; then
    log "installing llama-cpp-python $LLAMA_VERSION from the wheel built earlier ($wheel_cache)"
    wheel=${cached[0]}
  else
    jobs=$(nproc 2>/dev/null || echo 2)
    log "building llama-cpp-python $LLAMA_VERSION from source, portable (GGML_NATIVE=OFF), on $jobs cores: 5-15 minutes on 2, progress follows"
    # downloads the sdist and checks it against the lock's hash
    .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: --require-hashes \
      -r "$work/llama.txt" -d "$work/sdist"
    mkdir -p "$wheel_cache"
    if ! CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$jobs \
        .venv/bin/python -m pip wheel -v --disable-pip-version-check --no-deps "$work"/sdist/*.tar.gz -w "$work/wheel" 2>&1 \
        | .venv/bin/python scripts/build_progress.py "$work/build.log" llama.cpp; then
      tail -n 25 "$work/build.log" >&2
      cp "$work/build.log" .venv/llama-build.log
      echo "error: building llama-cpp-python $LLAMA_VERSION failed (full log: .venv/llama-build.log); it needs a C++ compiler and cmake (apt-get install build-essential cmake)" >&2
      exit 1
    fi
    rm -f "$wheel_cache"/*.whl
    mv "$work"/wheel/*.whl "$wheel_cache"/
    cached=("$wheel_cache"/*.whl)
    wheel=${cached[0]}
  fi
  pip_install --no-deps --force-reinstall "$wheel"
  printf '%s' "$llama_build" > .venv/.llama-cpp-python
fi

# --- everything else, from the hashed lock ---------------------------------------------------------------
# llama-cpp-python is already installed (above), so pip skips its sdist line; every other file is checked
# against the lock's sha256. The project itself goes in last, without resolving anything.
stamp=".venv/.installed$extras"
want="$(sha256sum "$lock" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing agent-canvas$extras and its locked dependencies ($lock) into .venv"
  pip_install --require-hashes -r "$lock"
  pip_install --no-deps -e ".$extras"
  printf '%s' "$want" > "$stamp"
fi

if [ "$WITH_TEST" = 1 ]; then
  # --- npm deps of the polyglot client test ------------------------------------------------------
  if [ ! -d tests/polyglot/node_modules ] || [ tests/polyglot/package-lock.json -nt tests/polyglot/node_modules ]; then
    log "installing the polyglot client's npm deps"
    (cd tests/polyglot && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
# --- the embedded model answers --------------------------------------------------------------------------
log "asking the embedded model one question (llama_cpp in .venv)"
.venv/bin/python scripts/check_model.py || exit 1
log "setup done"
