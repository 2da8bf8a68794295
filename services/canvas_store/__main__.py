"""python -m services.canvas_store [--config FILE]: serve the canvas store on config.port("canvas_store")."""

from __future__ import annotations

import argparse
import sys

from services.canvas_store.app import build_service
from services.common.bootstrap import run_service
from services.common.settings import Config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.canvas_store", description=__doc__)
    parser.add_argument("--config", help="YAML config file (default: AGENT_CANVAS_CONFIG or built-in defaults)")
    args = parser.parse_args(argv)
    config = Config.load(args.config)
    definition, _app = build_service(config)
    return run_service(definition, config)


if __name__ == "__main__":
    sys.exit(main())
