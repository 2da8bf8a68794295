"""python -m bench.chaos (see bench/chaos/__init__.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import time
from pathlib import Path

from bench.chaos.cluster import ChaosCluster
from bench.chaos.suite import FAULTS, Client, run_fault


async def run_suite(*, injections: int = 5, clients: int = 4, faults: list[str] | None = None, short: bool = False,
                    emit=lambda line: print(json.dumps(line), flush=True), keep_logs: Path | None = None) -> list[dict]:
    """Start the deployment, run every (chosen) fault, stop and remove everything; the JSON lines."""
    chosen = [f for f in FAULTS if not faults or f.name in faults]
    cluster = ChaosCluster()
    lines: list[dict] = []
    try:
        started = time.monotonic()
        await cluster.start()
        emit({"bench": "chaos", "event": "deployment_ready", "seconds": round(time.monotonic() - started, 1)})
        client = Client(cluster)
        try:
            for fault in chosen:
                lines.append(await run_fault(cluster, client, fault, injections=injections, clients=clients,
                                             short=short, emit=emit))
        finally:
            await client.close()
    finally:
        await asyncio.to_thread(cluster.close, keep_logs)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos")
    parser.add_argument("--injections", type=int, default=5, help="injections of each fault (default 5)")
    parser.add_argument("--clients", type=int, default=4, help="closed-loop clients (default 4)")
    parser.add_argument("--faults", default="", help="comma-separated fault names (default: all)")
    parser.add_argument("--short", action="store_true", help="3 s windows instead of 10 s")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep-logs", type=Path, default=None, help="copy the services' logs here before cleaning up")
    args = parser.parse_args(argv)
    if args.seed is not None:
        random.seed(args.seed)
    # SIGTERM ends the suite like Ctrl-C: the finally blocks stop every process it started.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        lines = asyncio.run(run_suite(injections=args.injections, clients=args.clients,
                                      faults=[f for f in args.faults.split(",") if f], short=args.short,
                                      keep_logs=args.keep_logs))
    except KeyboardInterrupt:
        return 130
    return 0 if all(line["lost"] == 0 and line["duplicated_deltas"] == 0 for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
