"""Benchmarks: python -m bench.<name> prints one JSON object per line."""
