"""`python -m services.canvas_store serve|migrate|seed-templates` with a database it cannot use: one line on
stderr naming the database (password hidden), exit status 1, no traceback."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.databases import MYSQL_URL, POSTGRES_URL

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-pw"
MISSING = f"ac_missing_{uuid.uuid4().hex[:8]}"


def _with(url: str, **parts) -> str:
    return sa.engine.make_url(url).set(**parts).render_as_string(hide_password=False)


CASES = [
    ("migrate", _with(POSTGRES_URL, database=MISSING), MISSING),
    ("seed-templates", _with(POSTGRES_URL, username="ac_no_such_role", password=SECRET), "ac_no_such_role"),
    ("serve", _with(MYSQL_URL, database=MISSING), MISSING),
    ("migrate", _with(MYSQL_URL, password=SECRET, database=MISSING), MISSING),
    ("serve", f"postgresql://user:{SECRET}@no-such-host.invalid/db", "no-such-host.invalid"),
    ("migrate", "sqlite:////proc/agent-canvas-no-such-dir/store.db", "/proc/agent-canvas-no-such-dir/store.db"),
    ("seed-templates", f"nonsense://user:{SECRET}@host/db", "nonsense://user:***@host/db"),
]


@pytest.mark.parametrize("command,url,named", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_an_unusable_database_is_one_line_and_exit_1(tmp_path, command, url, named):
    env = {"AGENT_CANVAS_DATA_DIR": str(tmp_path), "STORE_DATABASE_URL": url, "PORT": "0",
           "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "services.canvas_store", command], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"canvas_store {command}: cannot use the database "), lines[0]
    assert named in lines[0] and SECRET not in lines[0] and "Traceback" not in result.stderr
    assert result.stdout == ""
