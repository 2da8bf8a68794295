"""python -m services.sandbox [--config FILE]"""

from __future__ import annotations

import argparse

from services.common.bootstrap import configuration_errors, run_service
from services.common.settings import Config
from services.sandbox.app import build_definition


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.sandbox", description="Run the sandbox gRPC service.")
    parser.add_argument("--config", help="YAML config file (default: $AGENT_CANVAS_CONFIG)")
    args = parser.parse_args(argv)
    with configuration_errors("sandbox"):
        config = Config.load(args.config)
        definition = build_definition(config)
    return run_service(definition, config)


if __name__ == "__main__":
    raise SystemExit(main())
