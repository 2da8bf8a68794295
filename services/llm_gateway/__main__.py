"""python -m services.llm_gateway [--config FILE]"""

from __future__ import annotations

import argparse
import sys

from services.common.bootstrap import configuration_errors, run_service
from services.common.settings import Config
from services.llm_gateway.app import build_definition


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.llm_gateway", description="agent-canvas LLM gateway")
    parser.add_argument("--config", help="YAML config file (default: $AGENT_CANVAS_CONFIG)")
    parser.add_argument("--port", type=int, help="listen port (default: config / PORT env / 50053)")
    args = parser.parse_args(argv)
    with configuration_errors("llm_gateway"):
        config = Config.load(args.config)
        definition = build_definition(config)
    return run_service(definition, config, port=args.port)


if __name__ == "__main__":
    sys.exit(main())
