"""python -m services.canvas_store [serve|migrate|seed-templates] [--config FILE]

serve (the default) runs the store on config.port("canvas_store"); migrate applies the Alembic
migrations to store.database_url and prints the resulting revision (what the Kubernetes Job runs);
seed-templates loads the bundled RAGFlow templates (idempotent).
"""

from __future__ import annotations

import argparse
import sys

from services.canvas_store import app
from services.common.bootstrap import run_service
from services.common.settings import Config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.canvas_store", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="serve", choices=["serve", "migrate", "seed-templates"])
    parser.add_argument("--config", help="YAML config file (default: AGENT_CANVAS_CONFIG or built-in defaults)")
    args = parser.parse_args(argv)
    config = Config.load(args.config)
    if args.command == "migrate":
        print(f"store schema at revision {app.migrate(config)}")
        return 0
    if args.command == "seed-templates":
        print(f"{app.seed_templates(config)} templates added")
        return 0
    return run_service(app.build_definition(config), config)


if __name__ == "__main__":
    sys.exit(main())
