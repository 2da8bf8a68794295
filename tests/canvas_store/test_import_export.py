"""Import/export round trip of every RAGFlow DSL fixture (template wrappers and bare DSLs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.canvas_store.app import bundled_templates
from services.cli.files import (export_document, from_canvas_message, load_document, parse_document,
                                to_canvas_message)
from services.common.errors import InvalidArgumentError
from services.common.structs import from_struct
from tests.canvas_store.conftest import unique_title

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "ragflow_dsl"
FILES = sorted(CORPUS.glob("*/*.json"))
INGESTION = {"advanced_ingestion_pipeline", "chunk_summary", "compiler", "title_chunker"}


def test_bundled_templates_are_byte_identical_copies():
    bundled = Path(__file__).resolve().parents[2] / "services" / "canvas_store" / "templates"
    for fixture in sorted((CORPUS / "templates").glob("*.json")):
        assert (bundled / fixture.name).read_bytes() == fixture.read_bytes(), fixture.name
    assert "Apache" in (bundled / "NOTICE").read_text() and "b1b8cd62" in (bundled / "NOTICE").read_text()


def test_corpus_is_present():
    assert len(FILES) == 20
    wrappers = [f for f in FILES if "dsl" in json.loads(f.read_text())]
    assert wrappers and len(wrappers) < len(FILES)  # both shapes are covered


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
async def test_round_trip(store, path, tmp_path):
    """`canvas import` then `canvas export` then import again: an equal canvas, for both file shapes."""
    document = load_document(path)
    created = await store.alice.CreateCanvas(
        pb.CreateCanvasRequest(canvas=to_canvas_message(document, unique_title(document.title)))
    )
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    raw = json.loads(path.read_text())
    assert from_struct(got.dsl) == (raw["dsl"] if "dsl" in raw else raw)
    assert got.category == (pb.CANVAS_CATEGORY_DATAFLOW if path.stem in INGESTION else pb.CANVAS_CATEGORY_AGENT)

    exported = tmp_path / "exported.json"
    first_export = export_document(from_canvas_message(got))
    exported.write_text(json.dumps(first_export, ensure_ascii=False))
    # Imported back as it is (title included) by another owner, so the title does not collide with the original.
    second = await store.bob.CreateCanvas(pb.CreateCanvasRequest(canvas=to_canvas_message(load_document(exported))))
    reread = await store.bob.GetCanvas(pb.GetCanvasRequest(id=second.id))
    assert from_struct(reread.dsl) == from_struct(got.dsl)
    assert (reread.title, reread.description, reread.avatar, reread.category, list(reread.tags), reread.permission) == (
        got.title, got.description, got.avatar, got.category, list(got.tags), got.permission)
    # And exporting the re-imported canvas writes the same document.
    assert export_document(from_canvas_message(reread)) == first_export


BAD_DOCUMENTS = [
    ({"dsl": {"components": {}}, "tags": "abc"}, "tags"),
    ({"dsl": {"components": {}}, "tags": [1]}, "tags"),
    ({"dsl": {"components": {}}, "permission": "everyone"}, "permission"),
    ({"dsl": {"components": {}}, "title": ["a"]}, "title"),
    ({"dsl": {"components": {}}, "description": {"en": 3}}, "description"),
    ({"dsl": {"components": {}}, "avatar": 5}, "avatar"),
    (["components"], "canvas file"),
    ({"nodes": []}, "canvas file"),
]


@pytest.mark.parametrize("raw,field", BAD_DOCUMENTS, ids=[f for _, f in BAD_DOCUMENTS])
def test_malformed_documents_name_the_field(raw, field):
    with pytest.raises(InvalidArgumentError) as caught:
        parse_document(raw)
    assert caught.value.violations[0].field.endswith(field)


async def test_templates_are_seeded_and_listed(store):
    first = await store.alice.ListTemplates(pb.ListTemplatesRequest(page_size=10))
    rest = await store.alice.ListTemplates(pb.ListTemplatesRequest(page_size=10, page_token=first.next_page_token))
    templates = list(first.templates) + list(rest.templates)
    assert rest.next_page_token == "" and len(templates) == 15
    by_id = {t.id: t for t in templates}
    dataflow = {t.id for t in templates if t.category == pb.CANVAS_CATEGORY_DATAFLOW}
    assert dataflow == {"advanced_ingestion_pipeline", "chunk_summary", "compiler", "title_chunker"}
    assert by_id["deep_research"].title["en"] == "Deep research" and not by_id["deep_research"].HasField("dsl")
    full = await store.alice.GetTemplate(pb.GetTemplateRequest(id="compiler"))
    assert from_struct(full.dsl) == json.loads((CORPUS / "templates" / "compiler.json").read_text())
    # Seeding again (as at every start-up) changes nothing.
    assert store.app.tenants.seed_templates(bundled_templates()) == 0
