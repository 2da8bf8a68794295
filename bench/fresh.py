"""Time to the first answer on a fresh clone: what a new user waits for, split by phase.

    python3 -m bench.fresh [--keep] [--question Q] [--wheel-cache DIR]

Clones this checkout into a temporary folder (so `../shared` and its prebuilt wheel are absent by construction),
then runs README command 1 there exactly as a user does, `./scripts/demo.sh`: setup.sh (system packages,
.venv, llama-cpp-python built from its sdist, the locked dependencies, the model check), then
`agent-canvas run examples/hello.json`. The pip HTTP cache is the machine's own (a download cache); the
llama-cpp-python wheel cache and the data dir live inside the temporary folder, so the compile is measured.
Only the standard library is used: it runs before any venv exists (`python3 -m bench.fresh`).

Lines printed (one JSON object each), from setup.sh's `==>` step lines timestamped as they appear:
* phase: apt (system packages; 0 when all are installed), pip (venv, pip, the sdist download and the locked
  dependencies), llama_build (the compile), first_run (the model check plus the demo's run of the canvas).
* total: the sum beside the goal (6 minutes), with the run's status and answer, the CPU time of everything
  it ran (user + system; on an otherwise idle 2-core machine the compile's wall time is about half its CPU
  time) and the load average before and after (other work on the machine stretches the wall times).

Exits 1 unless the run ends SUCCEEDED with a non-empty answer, so .ci/run uses it as its fresh-machine stage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 360
STEP = re.compile(r"==> (.*)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def phase_of(step: str) -> str:
    """Which phase a setup.sh step line starts."""
    if step.startswith("installing system packages"):
        return "apt"
    if step.startswith("building llama-cpp-python"):
        return "llama_build"
    if step.startswith("asking the embedded model"):
        return "first_run"
    return "pip"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def emit(**fields: object) -> None:
    print(json.dumps({"bench": "fresh", **fields}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--question", default="What is the capital of France?")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone (its path is printed)")
    parser.add_argument("--wheel-cache", default="", help="reuse this llama-cpp-python wheel cache (skips the compile; "
                                                        "for trying the stage quickly, not for the figure)")
    args = parser.parse_args(argv)
    cpus = os.cpu_count()
    work = Path(tempfile.mkdtemp(prefix="agent-canvas-fresh-"))
    work.chmod(0o755)  # like a home checkout: the sandbox's unprivileged worker mounts the clone's site-packages
    clone = work / "agent-canvas"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AGENT_CANVAS", "VIRTUAL_ENV"))}
    # Addresses nobody else uses: the demo must boot the clone's own services, not reach whatever answers at the
    # default ports on this machine.
    config = work / "config.yaml"
    config.write_text("addresses:\n" + "".join(f"  {name}: 127.0.0.1:{_free_port()}\n" for name in
                                               ("canvas_store", "orchestrator", "llm_gateway", "sandbox")))
    env.update(AGENT_CANVAS_DATA_DIR=str(work / "data"), AGENT_CANVAS_CONFIG=str(config),
               AGENT_CANVAS_WHEEL_CACHE=args.wheel_cache or str(work / "wheels"),
               PYTHONUNBUFFERED="1")
    try:
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        assert not (clone.parent / "shared").exists()
        durations: dict[str, float] = {"apt": 0.0, "pip": 0.0, "llama_build": 0.0, "first_run": 0.0}
        phase, mark = "pip", time.monotonic()
        status = "none"
        answer_file = (work / "answer.txt").open("w+")  # a file, not a pipe: stdout is read only at the end
        process = subprocess.Popen(["./scripts/demo.sh", args.question], cwd=clone, env=env, stdout=answer_file,
                                   stderr=subprocess.PIPE, text=True, errors="replace")
        assert process.stderr is not None
        for raw in process.stderr:
            line = ANSI.sub("", raw.rstrip("\n"))
            print(line, file=sys.stderr, flush=True)  # the user's view: setup's steps and the build's progress
            if finished := re.search(r"■ (\w+)", line):  # the run's end, however much is logged after it
                status = finished[1]
            step = STEP.search(line)
            if step and phase != "first_run":
                now = time.monotonic()
                durations[phase] += now - mark
                phase, mark = phase_of(step[1]), now
        code = process.wait()
        answer_file.seek(0)
        answer = answer_file.read().strip()
        answer_file.close()
        durations[phase] += time.monotonic() - mark
        total = time.monotonic() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        for name, seconds in durations.items():
            emit(metric="phase", phase=name, seconds=round(seconds, 1), cpus=cpus)
        ok = code == 0 and status == "SUCCEEDED" and bool(answer)
        emit(metric="total", seconds=round(total, 1), goal_seconds=GOAL_S, within_goal=total <= GOAL_S, cpus=cpus,
             cpu_seconds=round(usage.ru_utime + usage.ru_stime, 1), loadavg_before=round(load_before, 2),
             loadavg_after=round(os.getloadavg()[0], 2), status=status, answer=answer[:200], exit_code=code,
             compiled=not args.wheel_cache)
        if not ok:
            print(f"error: the fresh clone's first command did not end SUCCEEDED with an answer (exit {code}, "
                  f"status {status}, answer {answer[:80]!r})", file=sys.stderr)
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
