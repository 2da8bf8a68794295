"""`agent-canvas canvas delete | undelete [--etag] | list --show-deleted` through the CLI entry point, with the store
booted in-process on SQLite (--embedded)."""

from __future__ import annotations

import json
from pathlib import Path

from services.cli.main import main

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello.json"


def _listed(capsys, *extra: str) -> list[list[str]]:
    assert main(["canvas", "list", "--embedded", *extra]) == 0
    return [line.split("\t") for line in capsys.readouterr().out.splitlines()]


def test_delete_list_show_deleted_undelete(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CANVAS_STORE_ADDR", raising=False)
    assert main(["canvas", "import", str(HELLO), "--embedded"]) == 0
    canvas_id, title = capsys.readouterr().out.strip().split("\t")

    assert main(["canvas", "delete", canvas_id, "--embedded"]) == 0
    deleted = capsys.readouterr().out.strip().split("\t")
    assert deleted[:2] == [canvas_id, "deleted"] and deleted[2].startswith("restorable until ")
    assert [row[0] for row in _listed(capsys)] == []
    assert _listed(capsys, "--show-deleted") == [[canvas_id, "AGENT", title, "deleted"]]

    assert main(["canvas", "delete", canvas_id, "--embedded"]) == 2  # already deleted
    assert "NOT_FOUND" in capsys.readouterr().err
    assert main(["canvas", "undelete", canvas_id, "--embedded"]) == 0
    assert capsys.readouterr().out.strip() == f"{canvas_id}\trestored\t{title}"
    assert _listed(capsys) == [[canvas_id, "AGENT", title]]
    assert main(["canvas", "undelete", canvas_id, "--embedded"]) == 2  # not deleted
    assert "ALREADY_EXISTS" in capsys.readouterr().err


def _etag(capsys, canvas_id: str) -> str:
    assert main(["canvas", "get", canvas_id, "--embedded"]) == 0
    return json.loads(capsys.readouterr().out)["etag"]


def test_undelete_with_etag_refuses_a_stale_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CANVAS_STORE_ADDR", raising=False)
    assert main(["canvas", "import", str(HELLO), "--embedded"]) == 0
    canvas_id, title = capsys.readouterr().out.strip().split("\t")
    before_delete = _etag(capsys, canvas_id)
    assert main(["canvas", "delete", canvas_id, "--etag", before_delete, "--embedded"]) == 0
    capsys.readouterr()
    deleted = _etag(capsys, canvas_id)
    assert deleted != before_delete  # the delete is a write: the canvas got a new etag

    assert main(["canvas", "undelete", canvas_id, "--etag", before_delete, "--embedded"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: ABORTED: canvas {canvas_id!r} has changed since etag {before_delete!r} was read")
    assert _listed(capsys, "--show-deleted") == [[canvas_id, "AGENT", title, "deleted"]]  # still deleted

    assert main(["canvas", "undelete", canvas_id, "--etag", deleted, "--embedded"]) == 0
    assert capsys.readouterr().out.strip() == f"{canvas_id}\trestored\t{title}"
    assert _listed(capsys) == [[canvas_id, "AGENT", title]]


def test_import_reports_files_protobuf_cannot_carry_and_imports_the_others(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CANVAS_STORE_ADDR", raising=False)
    deep: dict = {}
    for _ in range(40):
        deep = {"k": deep}
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps({"components": {}, "deep": deep}))
    surrogate = tmp_path / "surrogate.json"
    surrogate.write_text('{"title": "half \\ud800 a pair", "dsl": {"components": {}}}')
    assert main(["canvas", "import", str(nested), str(HELLO), str(surrogate), "--embedded"]) == 2
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 1  # hello.json was imported
    errors = err.strip().splitlines()
    assert len(errors) == 2 and "Traceback" not in err, err
    assert errors[0].startswith(f"error: INVALID_ARGUMENT: {nested}.deep.k.") and "30 levels" in errors[0]
    assert errors[1].startswith(f"error: INVALID_ARGUMENT: {surrogate}.title: holds a lone surrogate")
