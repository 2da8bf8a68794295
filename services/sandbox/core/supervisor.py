"""Runs one job to its end on any backend: streams output, enforces the output cap and the wall
clock, classifies the exit from facts (our timers, our byte counter, the cgroup/engine OOM counter,
the wait status; never from text the job printed), collects the result and artifacts after every
job process is dead, and always cleans up, also when the caller goes away mid-run.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.sandbox.core.models import (
    Collected,
    Event,
    Exit,
    ExitReason,
    JobSpec,
    Output,
    RawExit,
    Result,
    Started,
)
from services.sandbox.core.ports import RunningJob, SandboxBackend
from services.sandbox.core.status import MISSING, RunnerStatus, StatusProblem

logger = logging.getLogger(__name__)


@dataclass
class _JobState:
    output_total: int = 0
    output_limited: bool = False
    timed_out: bool = False


async def _pump(running: RunningJob, cap: int, queue: asyncio.Queue[Output | None], state: _JobState) -> None:
    """Forwards output chunks; past the cap it forwards the part that fits, flags and kills the job."""
    stream = running.output()
    try:
        async for name, data in stream:
            room = cap - state.output_total
            if len(data) > room:
                if room > 0:
                    queue.put_nowait(Output(name, data[:room]))
                state.output_total = cap
                state.output_limited = True
                await running.kill()
                break
            state.output_total += len(data)
            queue.put_nowait(Output(name, data))
    finally:
        await stream.aclose()
        queue.put_nowait(None)


async def _watchdog(running: RunningJob, seconds: float, state: _JobState) -> None:
    await asyncio.sleep(seconds)
    state.timed_out = True
    await running.kill()


def classify(raw: RawExit, state: _JobState, oom: bool, collected: Collected, job: JobSpec) -> tuple[ExitReason, str]:
    """Reason and message, most specific fact first. The status record ranks below every fact the
    supervisor owns (output counter, timers, OOM counter, signals): an oversized record is OUTPUT_LIMIT,
    a missing or unreadable one turns an exit 0 into ERROR."""
    status = collected.status if collected.status is not None else MISSING
    problem = status if isinstance(status, StatusProblem) else None
    error = status.error if isinstance(status, RunnerStatus) else None
    limits = job.limits
    if state.output_limited:
        return ExitReason.OUTPUT_LIMIT, f"output exceeded {limits.output_bytes} bytes; the job was stopped"
    if state.timed_out:
        return ExitReason.TIMEOUT, f"wall time limit of {limits.wall_time_ms} ms exceeded"
    if oom:
        return ExitReason.MEMORY, f"memory limit of {limits.memory_bytes} bytes exceeded (OOM kill)"
    if raw.signal == signal.SIGXCPU:
        return ExitReason.TIMEOUT, f"CPU time limit of {limits.cpu_time_ms} ms exceeded"
    if error and (error.get("memory") is True or error.get("type") == "MemoryError"):
        return ExitReason.MEMORY, "MemoryError: the job could not allocate memory"
    if raw.signal:
        return ExitReason.KILLED, f"killed by signal {raw.signal} ({_signal_name(raw.signal)})"
    if problem is not None and problem.kind == "too_large":
        return ExitReason.OUTPUT_LIMIT, problem.message
    if raw.code == 0:
        if problem is not None:
            return ExitReason.ERROR, problem.message
        return ExitReason.OK, ""
    if error:
        return ExitReason.ERROR, f"{error.get('type', 'Error')}: {error.get('message', '')}"[:2000]
    if problem is not None and problem.kind == "invalid":
        return ExitReason.ERROR, f"exited with code {raw.code}; {problem.message}"
    return ExitReason.ERROR, f"exited with code {raw.code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


def _result_event(collected: Collected) -> Result | None:
    status = collected.status
    if isinstance(status, RunnerStatus) and status.result is not None:
        return Result(status.result)  # parse_status checked that it is JSON text
    return None


async def supervise(
    backend: SandboxBackend,
    job: JobSpec,
    runtime_version: str,
    *,
    max_artifacts: int,
    max_artifact_bytes: int,
) -> AsyncIterator[Event]:
    """Started, Output..., [Result], Artifact..., Exit. Closing the iterator early kills the job."""
    started_at = time.monotonic()
    running = await backend.launch(job)
    state = _JobState()
    queue: asyncio.Queue[Output | None] = asyncio.Queue()
    pump = asyncio.create_task(_pump(running, job.limits.output_bytes, queue, state))
    waiter = asyncio.create_task(running.wait())
    watchdog = asyncio.create_task(_watchdog(running, job.limits.wall_time_ms / 1000, state))
    finished = False
    try:
        yield Started(job.job_id, backend.name, job.language, runtime_version, job.request_id)
        getter: asyncio.Task[Output | None] | None = None
        end_of_output = False
        while not waiter.done():
            getter = getter or asyncio.create_task(queue.get())
            done, _ = await asyncio.wait({getter, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                item = getter.result()
                getter = None
                if item is None:
                    end_of_output = True
                    break
                yield item
        raw = await waiter
        watchdog.cancel()
        # The main process is gone: whatever it left running dies now, which also closes the pipes.
        await running.kill()
        if getter is not None:
            item = await getter
            if item is None:
                end_of_output = True
            else:
                yield item
        while not end_of_output:
            item = await queue.get()
            if item is None:
                break
            yield item
        await pump
        oom = await running.memory_exceeded()
        collected = await running.collect(max_artifacts, max_artifact_bytes)
        reason, message = classify(raw, state, oom, collected, job)
        result = _result_event(collected)
        if result is not None:
            yield result
        for artifact in collected.artifacts:
            yield artifact
        wall_ms = int((time.monotonic() - started_at) * 1000)
        finished = True
        yield Exit(
            code=raw.code if not raw.signal else -1,
            signal=raw.signal,
            reason=reason,
            message=message,
            wall_time_ms=wall_ms,
            output_truncated=state.output_limited,
        )
    finally:
        if not finished:
            logger.info("job %s abandoned by its caller; killing it", job.job_id)
        for task in (pump, waiter, watchdog):
            task.cancel()
        # Its own task: a cancelled caller cannot interrupt the kill and the clean-up, and the caller
        # gets its end of stream without waiting for cgroups and directories to be removed.
        teardown = asyncio.ensure_future(_teardown(running, job.job_id))
        _TEARDOWNS.add(teardown)
        teardown.add_done_callback(_TEARDOWNS.discard)


_TEARDOWNS: set[asyncio.Future[None]] = set()


async def _teardown(running: RunningJob, job_id: str) -> None:
    await running.kill()
    await running.cleanup()
    logger.debug("job %s cleaned up", job_id)


async def drain_teardowns() -> None:
    """Waits for every pending job clean-up (service shutdown)."""
    while _TEARDOWNS:
        await asyncio.gather(*list(_TEARDOWNS), return_exceptions=True)
