"""`python -m services.canvas_store migrate|seed-templates`: what the migration Job and operators run."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"AGENT_CANVAS_DATA_DIR": str(data_dir), "PYTHONPATH": f"{ROOT}:{ROOT / 'gen' / 'python'}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "services.canvas_store", *args], env=env, capture_output=True, text=True, timeout=120)


def test_migrate_then_seed_templates_is_idempotent(tmp_path):
    migrated = _run("migrate", data_dir=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert "store schema at revision" in migrated.stdout
    revision = migrated.stdout.strip().rsplit(" ", 1)[1]
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert db.execute("select version_num from alembic_version_canvas_store").fetchone()[0] == revision
    first = _run("seed-templates", data_dir=tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "15 templates added"
    assert _run("seed-templates", data_dir=tmp_path).stdout.strip() == "0 templates added"


def test_unknown_command_is_a_usage_error(tmp_path):
    result = _run("explode", data_dir=tmp_path)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
