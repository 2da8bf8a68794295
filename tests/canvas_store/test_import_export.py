"""Import/export round trip of every RAGFlow DSL fixture (template wrappers and bare DSLs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentcanvas.v1 import canvas_store_pb2 as pb

from services.canvas_store.app import bundled_templates
from services.canvas_store.core.dsl import export_document, import_fields, split_import
from services.canvas_store.core.types import Category
from services.common.structs import from_struct, to_struct
from tests.canvas_store.conftest import unique_title

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "ragflow_dsl"
FILES = sorted(CORPUS.glob("*/*.json"))


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
async def test_round_trip(store, path):
    original = json.loads(path.read_text())
    dsl, metadata = split_import(original)
    fields = import_fields(metadata)
    canvas = pb.Canvas(title=unique_title(fields["title"] or path.stem), description=fields["description"],
                       avatar=fields["avatar"])
    canvas.dsl.CopyFrom(to_struct(dsl))
    created = await store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=canvas))
    got = await store.alice.GetCanvas(pb.GetCanvasRequest(id=created.id))
    assert from_struct(got.dsl) == dsl
    expected_category = Category.DATAFLOW if path.stem in {"advanced_ingestion_pipeline", "chunk_summary", "compiler",
                                                           "title_chunker"} else Category.AGENT
    assert got.category == (pb.CANVAS_CATEGORY_DATAFLOW if expected_category is Category.DATAFLOW
                            else pb.CANVAS_CATEGORY_AGENT)
    # Export to a file and import it again: an equal canvas.
    exported = json.dumps(export_document(
        canvas_id=got.id, title=got.title, description=got.description, avatar=got.avatar, category=expected_category,
        tags=list(got.tags), dsl=from_struct(got.dsl)), ensure_ascii=False)
    again_dsl, again_meta = split_import(json.loads(exported))
    assert again_dsl == dsl
    again_fields = import_fields(again_meta)
    assert (again_fields["title"], again_fields["description"], again_fields["avatar"]) == (
        got.title, got.description, got.avatar)
    reimport = pb.Canvas(title=unique_title("reimport"))
    reimport.dsl.CopyFrom(to_struct(again_dsl))
    second = await store.alice.CreateCanvas(pb.CreateCanvasRequest(canvas=reimport))
    assert from_struct((await store.alice.GetCanvas(pb.GetCanvasRequest(id=second.id))).dsl) == dsl


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
