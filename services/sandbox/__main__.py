"""python -m services.sandbox [--config FILE]"""

from __future__ import annotations

import argparse

from services.common.bootstrap import run_service
from services.common.settings import Config
from services.sandbox.app import build_definition


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.sandbox", description="Run the sandbox gRPC service.")
    parser.add_argument("--config", help="YAML config file (default: $AGENT_CANVAS_CONFIG)")
    args = parser.parse_args(argv)
    config = Config.load(args.config)
    return run_service(build_definition(config), config)


if __name__ == "__main__":
    raise SystemExit(main())
