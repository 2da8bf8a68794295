"""Benchmarks: python -m bench.<name>; each prints JSON lines."""
