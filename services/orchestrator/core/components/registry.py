"""Component classes by RAGFlow class name."""

from __future__ import annotations

from services.orchestrator.core.components.base import Component

_REGISTRY: dict[str, type[Component]] = {}

# Recognised RAGFlow components that are not implemented here yet (a later issue brings them).
KNOWN_UNIMPLEMENTED = frozenset(
    {
        "Retrieval", "CodeExec", "Browser", "AkShare", "ArXiv", "BGPT", "Crawler", "DeepL",
        "DuckDuckGo", "Email", "ExeSQL", "GitHub", "Google", "GoogleScholar", "Jin10", "KeenableSearch",
        "PubMed", "QueritSearch", "QueritContents", "QWeather", "SearXNG", "TavilySearch", "TavilyExtract",
        "TuShare", "WenCai", "Wikipedia", "YahooFinance",
    }
)
# Ingestion-pipeline components: they run on a different runner, never on a canvas.
PIPELINE_COMPONENTS = frozenset(
    {"File", "Parser", "TokenChunker", "TitleChunker", "Extractor", "Tokenizer", "Compiler", "Splitter", "HierarchicalMerger"}
)


def register(cls: type[Component]) -> type[Component]:
    _REGISTRY[cls.type_name] = cls
    return cls


def get(type_name: str) -> type[Component] | None:
    _load_all()
    return _REGISTRY.get(type_name)


def known(type_name: str) -> bool:
    return get(type_name) is not None or type_name in KNOWN_UNIMPLEMENTED


_loaded = False


def _load_all() -> None:
    # A flag, not "is the registry empty": importing one component module first (a test importing
    # containers, say) registers its classes, and the others must still be loaded.
    global _loaded
    if _loaded:
        return
    _loaded = True
    # Importing the modules registers their classes.
    from services.orchestrator.core.components import (  # noqa: F401
        agent, begin, categorize, containers, data_operations, doc_generator, excel_processor, invoke, list_operations, llm,
        message, string_transform, switch, user_fill_up, variable_aggregator, variable_assigner,
    )
    from services.orchestrator.core.components.tool_node import register_tools

    register_tools()
