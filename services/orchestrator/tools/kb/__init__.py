"""The embedded knowledge base: SQLite FTS5 (BM25) with chunking, document aggregates and stable ids."""
