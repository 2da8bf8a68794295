"""`agent-canvas kb` end to end through the CLI entry point, on a real SQLite knowledge base."""

from __future__ import annotations

from services.cli.main import main


def test_kb_add_list_remove(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    doc = tmp_path / "paris.md"
    doc.write_text("# Paris\n\nParis is the capital of France.\n")
    assert main(["kb", "add", str(doc)]) == 0
    added = capsys.readouterr().out
    assert "paris.md" in added and "added" in added
    document_id = added.splitlines()[1].split()[0]

    assert main(["kb", "list"]) == 0
    assert document_id in capsys.readouterr().out

    # An unknown id is bad input (exit 2, as for every CLI command): the known ones are still removed.
    assert main(["kb", "remove", document_id, "f" * 32]) == 2
    captured = capsys.readouterr()
    assert f"{document_id}\tremoved" in captured.out and f"{'f' * 32}\tnot found" in captured.out
    assert captured.err.strip() == f"error: NOT_FOUND: {'f' * 32}: no such document in the knowledge base"
    assert main(["kb", "list"]) == 0
    assert document_id not in capsys.readouterr().out
    assert main(["kb", "remove", document_id]) == 2  # already gone
    assert "NOT_FOUND" in capsys.readouterr().err


def test_kb_remove_of_known_ids_exits_0(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nalpha\n")
    assert main(["kb", "add", str(doc)]) == 0
    document_id = capsys.readouterr().out.splitlines()[1].split()[0]
    assert main(["kb", "remove", document_id]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{document_id}\tremoved\n" and captured.err == ""


def test_kb_add_of_a_missing_file_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_CANVAS_DATA_DIR", str(tmp_path / "data"))
    assert main(["kb", "add", str(tmp_path / "missing.txt")]) == 2
    assert "INVALID_ARGUMENT" in capsys.readouterr().err
