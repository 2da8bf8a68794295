"""Chaos suite: faults injected under a steady load of canvases, with the figures per fault.

    python -m bench.chaos [--injections 5] [--clients 4] [--faults a,b,...] [--short] [--seed N]

Deployment (loopback only; everything is started here and removed afterwards): its own PostgreSQL (initdb into
a temporary directory, on a free port: the machine's shared server is never touched), its own redis-server on a
free port, the scripted OpenAI-compatible model server (tests/support/openai_server.py; every answer streams 12
pieces 30 ms apart), and as processes one canvas_store, one llm_gateway, one sandbox (bubblewrap) and two
orchestrator replicas (2 s leases, takeover scan every 0.5 s, admission slots in Redis with a cap of 32 runs per
tenant, so that every start and end goes through Redis). The canvas:
Begin -> Retrieval (embedded knowledge base) -> CodeExec (sandbox, 0.1 s) -> LLM -> Message; nodes that call
out retry up to 4 times (1 s, doubling).

For each fault, `--clients` closed-loop clients run the canvas through either replica (reattaching through the
other one after a broken stream, retrying a failed start with the same request_id; half stream with
TEXT_DELIVERY_LIVE applying MessageReset, half with TEXT_DELIVERY_CONFIRMED appending every delta), while the
fault is injected `--injections` times at random points:

    orchestrator_kill9      kill -9 of a random orchestrator replica, then started again
    store_kill9_restart     kill -9 of the store, then started again
    gateway_kill9_mid_call  kill -9 of the gateway while a model call streams, then started again
    sandbox_kill9_mid_call  kill -9 of the sandbox around a CodeExec call, then started again
    postgres_restart        pg_ctl restart -m fast of the suite's PostgreSQL
    redis_down              the suite's Redis killed for 10 s (3 s with --short), then started again
    model_500_429           the model answers 500 and 429 alternately for 10 s (3 s with --short)
    model_drops_mid_stream  the model cuts the connection of the next two streams after two pieces

One JSON line per fault: runs started (a run id was seen), succeeded, failed (by ErrorDetail.reason),
cancelled, lost (no terminal event within 60 s of its start), not_started (by the last gRPC code),
duplicated_deltas (a seq delivered twice, or a Message's text shown beyond its MessageEnd content) and the
recovery time p50/max: seconds from an injection until the runs in flight at that moment have all ended and
a run started after the repair has succeeded. Goal: 0 lost and 0 duplicated for every fault. Results:
deploy/README.md, "Chaos".
"""
