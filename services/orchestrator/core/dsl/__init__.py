"""Loading RAGFlow canvas DSL: unwrap, migrate, normalise, build the typed graph, validate."""
