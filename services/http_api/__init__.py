"""RAGFlow's HTTP API for agents, over the store and the orchestrator (README.md)."""
