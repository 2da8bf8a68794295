#!/usr/bin/env bash
# Command 1: set everything up and run the main job: the four services on embedded defaults
# (SQLite, the local sandbox, the embedded SmolLM2 model) running examples/hello.json, with the
# local model's answer streamed to the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/agent-canvas run examples/hello.json --query "${1:-What is the capital of France?}"
