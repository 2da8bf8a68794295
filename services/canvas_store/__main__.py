"""python -m services.canvas_store [serve|migrate|seed-templates] [--config FILE]

serve (the default) runs the store on config.port("canvas_store"); migrate applies the Alembic
migrations to store.database_url and prints the resulting revision (what the Kubernetes Job runs);
seed-templates loads the bundled RAGFlow templates (idempotent).

A database the command cannot use (unknown host, wrong password, missing database, bad URL) is one line
on stderr naming the database (password hidden) and exit status 1, not a driver traceback.
"""

from __future__ import annotations

import argparse
import re
import sys

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from services.canvas_store import app
from services.canvas_store.settings import StoreSettings
from services.common.bootstrap import configuration_errors, run_service
from services.common.errors import InvalidArgumentError, UnavailableError, clip_chars
from services.common.settings import Config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.canvas_store", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="serve", choices=["serve", "migrate", "seed-templates"])
    parser.add_argument("--config", help="YAML config file (default: AGENT_CANVAS_CONFIG or built-in defaults)")
    args = parser.parse_args(argv)
    with configuration_errors("canvas_store"):
        config = Config.load(args.config)
    try:
        try:  # these touch nothing but the database (an OSError: the SQLite file's directory, its lock file)
            if args.command == "migrate":
                print(f"store schema at revision {app.migrate(config)}")
                return 0
            if args.command == "seed-templates":
                print(f"{app.seed_templates(config)} templates added")
                return 0
            definition = app.build_definition(config)
        except OSError as error:
            raise _DatabaseFailure(str(error)) from error
        return run_service(definition, config)
    except Exception as error:  # noqa: BLE001 - only database failures are handled here; others re-raise
        reason = _database_reason(error)
        if reason is None:
            raise
        sys.stderr.write(f"canvas_store {args.command}: cannot use the database {_safe_url(config)}: {reason}\n")
        return 1


class _DatabaseFailure(Exception):
    pass


def _database_reason(error: BaseException) -> str | None:
    """A one-line reason when `error` (or what caused it) is a failure to use the database, else None."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 20:  # the cause chain, iteratively
        seen += 1
        if isinstance(current, _DatabaseFailure):
            return _one_line(str(current))
        if isinstance(current, sa_exc.ArgumentError):
            return "not a usable database URL"
        if isinstance(current, sa_exc.DBAPIError):
            return _one_line(str(current.orig) or type(current.orig).__name__)
        if isinstance(current, sa_exc.SQLAlchemyError):
            return _one_line(str(current))
        if isinstance(current, UnavailableError) and current.reason in ("DATABASE_UNAVAILABLE", "MIGRATION_LOCK_HELD"):
            if current.__cause__ is None:
                return _one_line(current.message)
        elif isinstance(current, InvalidArgumentError) and any(v.field == "store.database_url"
                                                                 for v in current.violations):
            return _one_line(current.message)
        current = current.__cause__ or current.__context__
    return None


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return clip_chars(" ".join(lines[:2]) if lines else "unknown error", 300)


def _safe_url(config: Config) -> str:
    """The configured database URL with its password hidden."""
    try:
        url = StoreSettings.from_config(config).database_url
    except Exception:  # noqa: BLE001 - the settings themselves are broken: nothing better to name
        return "(store.database_url)"
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparsable: hide whatever sits between the scheme and the host
        return re.sub(r"://[^@/]*@", "://***@", url)


if __name__ == "__main__":
    sys.exit(main())
