"""python -m services.http_api [--config FILE] [--host H] [--port P]"""

from __future__ import annotations

import argparse

from services.common.bootstrap import configuration_errors
from services.common.settings import Config
from services.http_api.runner import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.http_api", description="Run RAGFlow's agent HTTP API.")
    parser.add_argument("--config", help="YAML config file (default: $AGENT_CANVAS_CONFIG)")
    parser.add_argument("--host", help="listen address (default: $AGENT_CANVAS_LISTEN_HOST, then 0.0.0.0)")
    parser.add_argument("--port", type=int, help="listen port (default: $PORT, then http.port, then 9380)")
    args = parser.parse_args(argv)
    with configuration_errors("http_api"):  # a bad config or a port in use: one line, exit 2
        config = Config.load(args.config)
        return run(config, host=args.host, port=args.port)


if __name__ == "__main__":
    raise SystemExit(main())
