"""Bundled RAGFlow canvas templates (package data; see NOTICE)."""
