"""The facade's use cases: plain Python, no HTTP and no gRPC (the adapters hold those)."""
