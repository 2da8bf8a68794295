"""The agent-canvas command-line interface."""
