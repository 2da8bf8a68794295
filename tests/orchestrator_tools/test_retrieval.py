"""Embedded knowledge base (SQLite FTS5), the RAGFlow HTTP backend, and the kb CLI functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.common.errors import InvalidArgumentError
from services.common.settings import Config
from services.orchestrator.tools import kb_cli
from services.orchestrator.tools.citations import ReferenceBucket
from services.orchestrator.tools.config import EmbeddedKbSettings
from services.orchestrator.tools.errors import ToolConfigError, ToolInputError, ToolTimeoutError, ToolUpstreamError
from services.orchestrator.tools.kb.chunking import chunk_text
from services.orchestrator.tools.kb.store import KnowledgeBase
from services.orchestrator.tools.retrieval import Retrieval
from services.orchestrator.tools.runtime import ToolRuntime
from tests.orchestrator_tools.conftest import make_settings
from tests.support.web_apis import KEYS, WebApis

FRUIT = """# Apples

Apples grow on trees in orchards. Apple harvest is in autumn.

# Bananas

Bananas are tropical fruit. Banana plants are large herbs, not trees.
"""


def test_chunking_windows_overlap_and_offsets():
    text = " ".join(f"w{i}" for i in range(100))
    chunks = chunk_text(text, chunk_tokens=30, overlap=10)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(len(c.content.split()) <= 30 for c in chunks)
    assert chunks[0].content.split()[-10:] == chunks[1].content.split()[:10]
    assert chunks[-1].content.split()[-1] == "w99"
    assert all(text[c.start : c.end] == c.content for c in chunks)


def test_chunking_prefers_paragraph_breaks():
    para = lambda n, tag: " ".join(f"{tag}{i}" for i in range(n))  # noqa: E731
    text = f"{para(25, 'a')}.\n\n{para(25, 'b')}."
    chunks = chunk_text(text, chunk_tokens=30, overlap=0)
    assert chunks[0].content == f"{para(25, 'a')}."
    assert chunks[1].content.startswith("b0")


def _config(tmp_path: Path, **embedded) -> Config:
    return Config.load(env={}).with_overrides({"data_dir": str(tmp_path), "tools": {"retrieval": {"embedded": embedded}}})


def test_kb_cli_add_list_and_stable_ids(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "fruit.md").write_text(FRUIT)
    (docs / "page.html").write_text("<html><head><title>Cars</title><script>var x=1;</script></head><body><p>Electric cars use batteries.</p></body></html>")
    (docs / "data.json").write_text(json.dumps({"city": "Oslo", "facts": [{"population": 700000}]}))
    (docs / "table.csv").write_text("name,colour\ncherry,red\nlime,green\n")
    (docs / "notes.txt").write_text("Plain text about submarines.")
    (docs / "ignored.bin").write_bytes(b"\x00\x01")
    config = _config(tmp_path)

    added = kb_cli.add([docs], config)
    assert sorted(d.name for d in added) == ["data.json", "fruit.md", "notes.txt", "page.html", "table.csv"]
    assert {d.status for d in added} == {"added"}
    assert (tmp_path / "kb.sqlite").exists()
    listed = kb_cli.list_documents(config)
    assert {d.id for d in listed} == {d.id for d in added}
    assert len({d.id for d in listed}) == 5

    kb = KnowledgeBase(EmbeddedKbSettings(path=tmp_path / "kb.sqlite"))
    fruit = next(d for d in listed if d.name == "fruit.md")
    before = kb.chunks_of(fruit.id)

    again = kb_cli.add([docs / "fruit.md"], config)
    assert again[0].id == fruit.id and again[0].status == "unchanged"
    assert kb.chunks_of(fruit.id) == before

    (docs / "fruit.md").write_text(FRUIT + "\n# Cherries\n\nCherries are small stone fruit.\n")
    updated = kb_cli.add([docs / "fruit.md"], config)
    assert updated[0].id == fruit.id and updated[0].status == "updated"
    assert len(kb_cli.list_documents(config)) == 5
    after = kb.chunks_of(fruit.id)
    assert after[0]["id"] != before[0]["id"] or after[0]["content"] == before[0]["content"]
    kb.close()

    table = kb_cli.format_documents(kb_cli.list_documents(config))
    assert table.splitlines()[0].split() == ["ID", "DATASET", "NAME", "CHUNKS", "SIZE", "UPDATED"]
    assert "fruit.md" in table


def test_chunk_ids_are_stable_across_re_adds_and_unique(tmp_path: Path):
    settings = EmbeddedKbSettings(path=tmp_path / "kb.sqlite", chunk_tokens=16, chunk_overlap=4)
    text = "\n\n".join(f"Paragraph {i} says the same words again and again and again." for i in range(30))
    kb = KnowledgeBase(settings)
    doc = kb.add_text("rep.txt", text)
    first = [c["id"] for c in kb.chunks_of(doc.id)]
    kb.remove(doc.id)
    assert kb.chunks_of(doc.id) == []
    kb.add_text("rep.txt", text)
    assert [c["id"] for c in kb.chunks_of(doc.id)] == first
    assert len(first) == len(set(first)) > 20
    # Identical content in another document still gets its own ids.
    other = kb.add_text("copy.txt", text)
    assert not set(first) & {c["id"] for c in kb.chunks_of(other.id)}
    kb.close()


def test_kb_cli_rejects_bad_files_and_adds_nothing(tmp_path: Path):
    good = tmp_path / "good.txt"
    good.write_text("fine")
    (tmp_path / "x.exe").write_text("nope")
    config = _config(tmp_path)
    with pytest.raises(InvalidArgumentError) as err:
        kb_cli.add([good, tmp_path / "missing.txt", tmp_path / "x.exe"], config)
    fields = [v.field for v in err.value.violations]
    assert fields == ["files[1]", "files[2]"]
    assert "no such file" in err.value.violations[0].description
    assert "unsupported file type" in err.value.violations[1].description
    assert kb_cli.list_documents(config) == []


def test_search_ranking_threshold_and_doc_aggs(tmp_path: Path):
    kb = KnowledgeBase(EmbeddedKbSettings(path=tmp_path / "kb.sqlite", chunk_tokens=16, chunk_overlap=0))
    kb.add_text("fruit.md", FRUIT)
    kb.add_text("trees.txt", "Oak trees and pine trees. Trees everywhere: trees, trees, trees.")
    kb.add_text("cars.txt", "Cars have wheels.")
    hits = kb.search("apple trees", top_n=10, similarity_threshold=0.0)
    names = [c["document_name"] for c in hits.chunks]
    assert names[0] == "fruit.md" and "Apples grow on trees" in hits.chunks[0]["content"]  # both terms
    assert "cars.txt" not in names
    assert hits.chunks[0]["term_similarity"] == 1.0
    assert [c["similarity"] for c in hits.chunks] == sorted((c["similarity"] for c in hits.chunks), reverse=True)
    assert {a["doc_name"]: a["count"] for a in hits.doc_aggs} == {
        n: names.count(n) for n in set(names)
    }
    assert hits.total == len(hits.chunks)
    strict = kb.search("apple trees", similarity_threshold=0.99)
    assert [c["document_name"] for c in strict.chunks] == ["fruit.md"]
    assert kb.search("zeppelin").chunks == []
    top1 = kb.search("trees", top_n=1, similarity_threshold=0.0)
    assert len(top1.chunks) == 1 and top1.total >= 2
    # FTS syntax in the query is just text.
    assert kb.search('trees" OR NEAR(x AND -*', similarity_threshold=0.0).chunks
    kb.close()


async def test_retrieval_tool_embedded_with_citations(tmp_path: Path, web_apis: WebApis):
    runtime = ToolRuntime(make_settings({}, tmp_path))
    try:
        kb = runtime.kb
        kb.add_text("fruit.md", FRUIT)
        kb.add_text("herbs.txt", "Banana plants are herbs. Basil is a herb too.")
        bucket = ReferenceBucket()
        tool = Retrieval()
        result = await tool.invoke(
            {"query": "user: banana herbs"},
            params={"kb_ids": ["1a3d1d7afb0611ef9866047c16ec874f"], "top_n": 5, "similarity_threshold": 0.1},
            context=runtime.context(references=bucket),
        )
        assert result.ok, result.error
        assert [c["citation_id"] for c in result.chunks] == list(range(len(result.chunks)))
        assert result.chunks[0]["document_name"] in ("fruit.md", "herbs.txt")
        assert set(result.chunks[0]) >= {"id", "content", "document_id", "document_name", "dataset_id", "similarity", "positions", "url"}
        assert result.content == result.outputs["formalized_content"]
        assert "ID: 0\n├── Title: " in result.content
        assert result.outputs["json"] == result.chunks
        assert sum(a["count"] for a in result.doc_aggs) == len(result.chunks)
        again = await tool.invoke({"query": "banana herbs"}, params={"top_n": 5, "similarity_threshold": 0.1}, context=runtime.context(references=bucket))
        assert [c["citation_id"] for c in again.chunks] == [c["citation_id"] for c in result.chunks]
        assert len(bucket) == len(result.chunks)

        empty = await tool.invoke({"query": ""}, params={"empty_response": "Nothing found in dataset"}, context=runtime.context())
        assert empty.ok and empty.content == "Nothing found in dataset"
        nothing = await tool.invoke({"query": "zeppelin"}, params={"empty_response": "Nothing found"}, context=runtime.context())
        assert nothing.ok and nothing.chunks == [] and nothing.outputs["formalized_content"] == "Nothing found"
        assert tool.node_arguments({}) == {"query": ""}
        assert tool.node_arguments({"query": "{sys.query}"}) == {"query": "{sys.query}"}
    finally:
        await runtime.aclose()


async def test_retrieval_requested_scope_errors(tmp_path: Path):
    runtime = ToolRuntime(make_settings({"retrieval": {"embedded": {"dataset_scope": "requested"}}}, tmp_path))
    try:
        runtime.kb.add_text("a.txt", "alpha beta", dataset="manuals")
        tool = Retrieval()
        none = await tool.invoke({"query": "alpha"}, params={}, context=runtime.context())
        assert isinstance(none.error, ToolInputError) and none.error.detail == "No dataset is selected."
        unknown = await tool.invoke({"query": "alpha"}, params={"dataset_ids": ["nope"]}, context=runtime.context())
        assert isinstance(unknown.error, ToolInputError) and "nope" in unknown.error.detail
        ok = await tool.invoke({"query": "alpha"}, params={"dataset_ids": ["manuals"]}, context=runtime.context())
        assert ok.ok and ok.chunks[0]["dataset_id"] == "manuals"
    finally:
        await runtime.aclose()


async def test_retrieval_ragflow_backend(web_apis: WebApis, tmp_path: Path):
    section = web_apis.tools_config()
    section["retrieval"]["backend"] = "ragflow"
    runtime = ToolRuntime(make_settings(section, tmp_path))
    try:
        bucket = ReferenceBucket()
        result = await Retrieval().invoke(
            {"query": "how to reset"},
            params={"dataset_ids": ["ds1"], "top_n": 3, "similarity_threshold": 0.4, "keywords_similarity_weight": 0.3},
            context=runtime.context(references=bucket),
        )
        assert result.ok, result.error
        request = web_apis.of("ragflow")[-1]
        assert request.headers["authorization"] == f"Bearer {KEYS['ragflow']}"
        assert request.body["question"] == "how to reset" and request.body["dataset_ids"] == ["ds1"]
        assert request.body["vector_similarity_weight"] == 0.7 and request.body["page_size"] == 3
        assert [c["id"] for c in result.chunks] == ["chunk0", "chunk1"]  # threshold 0.4 drops the rest
        assert result.chunks[0]["document_name"] == "manual-0.pdf" and result.chunks[0]["dataset_id"] == "ds1"
        assert [c["citation_id"] for c in result.chunks] == [0, 1]
        assert result.doc_aggs == [{"doc_id": "doc0", "doc_name": "manual-0.pdf", "count": 1}, {"doc_id": "doc1", "doc_name": "manual-1.pdf", "count": 1}]

        unknown = await Retrieval().invoke({"query": "x"}, params={"dataset_ids": ["unknown-1"]}, context=runtime.context())
        assert isinstance(unknown.error, ToolUpstreamError) and "You don't own the dataset" in unknown.error.message
        none = await Retrieval().invoke({"query": "x"}, params={}, context=runtime.context())
        assert isinstance(none.error, ToolInputError) and none.error.detail == "No dataset is selected."
        failing = await Retrieval().invoke({"query": "trigger-500"}, params={"dataset_ids": ["d"]}, context=runtime.context())
        assert isinstance(failing.error, ToolUpstreamError) and failing.error.status == 500
    finally:
        await runtime.aclose()


async def test_retrieval_ragflow_backend_key_problems(web_apis: WebApis, tmp_path: Path):
    section = web_apis.tools_config(with_keys=False)  # answers get the default 5 s, however loaded the machine
    section["retrieval"]["backend"] = "ragflow"
    runtime = ToolRuntime(make_settings(section, tmp_path))
    try:
        missing = await Retrieval().invoke({"query": "x"}, params={"dataset_ids": ["d"]}, context=runtime.context())
        assert isinstance(missing.error, ToolConfigError) and missing.error.setting == "tools.retrieval.ragflow.api_key"
    finally:
        await runtime.aclose()
    section["retrieval"]["ragflow"]["api_key"] = "wrong"
    runtime = ToolRuntime(make_settings(section, tmp_path))
    try:
        wrong = await Retrieval().invoke({"query": "x"}, params={"dataset_ids": ["d"]}, context=runtime.context())
        assert isinstance(wrong.error, ToolConfigError) and wrong.error.setting == "tools.retrieval.ragflow.api_key"
    finally:
        await runtime.aclose()
    section["retrieval"]["ragflow"]["api_key"] = KEYS["ragflow"]
    section["http"]["timeout_s"] = 0.3  # only for a request the server never answers
    runtime = ToolRuntime(make_settings(section, tmp_path))
    try:
        slow = await Retrieval().invoke({"query": "trigger-hang"}, params={"dataset_ids": ["d"]}, context=runtime.context())
        assert isinstance(slow.error, ToolTimeoutError)
    finally:
        await runtime.aclose()


def test_pdf_documents_are_searchable(tmp_path: Path):
    from tests.orchestrator_tools.support.pdf import write_text_pdf

    pdf = tmp_path / "manual.pdf"
    write_text_pdf(pdf, ["Resetting the router:", "hold the reset button for ten seconds."])
    config = _config(tmp_path)
    (doc,) = kb_cli.add([pdf], config)
    assert doc.mime_type == "application/pdf" and doc.chunk_count == 1
    kb = KnowledgeBase(EmbeddedKbSettings(path=tmp_path / "kb.sqlite"))
    hits = kb.search("reset button", similarity_threshold=0.1)
    kb.close()
    assert hits.chunks and hits.chunks[0]["document_name"] == "manual.pdf"
    assert "hold the reset button" in hits.chunks[0]["content"]


def test_broken_pdf_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"this is not a pdf at all")
    with pytest.raises(InvalidArgumentError) as err:
        kb_cli.add([bad], _config(tmp_path))
    assert err.value.violations[0].field == "files[0]"
    assert "not a readable PDF" in err.value.violations[0].description


def test_kb_cli_remove_and_dataset_filters(tmp_path: Path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("Kettles boil water quickly.")
    b.write_text("Kettles can also whistle.")
    config = _config(tmp_path)
    (doc_a,) = kb_cli.add([a], config, dataset="kitchen")
    (doc_b,) = kb_cli.add([b], config)
    assert [d.name for d in kb_cli.list_documents(config, dataset="kitchen")] == ["a.txt"]
    kb = KnowledgeBase(EmbeddedKbSettings(path=tmp_path / "kb.sqlite"))
    try:
        assert {c["document_name"] for c in kb.search("kettles", similarity_threshold=0).chunks} == {"a.txt", "b.txt"}
        assert [c["document_name"] for c in kb.search("kettles", dataset_ids=["kitchen"], similarity_threshold=0).chunks] == ["a.txt"]
        assert [c["document_name"] for c in kb.search("kettles", document_ids=[doc_b.id], similarity_threshold=0).chunks] == ["b.txt"]
        assert kb_cli.remove([doc_a.id, "missing"], config) == [doc_a.id]
        assert [c["document_name"] for c in kb.search("kettles", similarity_threshold=0).chunks] == ["b.txt"]
    finally:
        kb.close()
    assert [d.id for d in kb_cli.list_documents(config)] == [doc_b.id]
