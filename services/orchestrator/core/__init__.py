"""Orchestrator core: plain typed Python (no grpc, no SQL). See services/orchestrator/README.md."""
