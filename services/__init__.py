"""agent-canvas services: canvas_store, orchestrator, llm_gateway and sandbox, plus what they share."""
