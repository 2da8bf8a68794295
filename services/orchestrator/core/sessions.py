"""Session bookkeeping between turns (spec §3.6, fixes §7 item 8), and the rules that keep a paused
run's continuation unique.

Session state (stored on the store's Session.state):
    paused_run_id   run waiting for a UserFillUp answer ("" when none)
    pending         UserFillUp ids that run waits on
    history         bounded list of {role, content} (the last `window` messages within HISTORY_MAX_BYTES);
                    sys.history is derived from it
    env             env.* values carried to the next turn (VariableAssigner may change them)
    last_run_id     the run whose turn was applied last
    recent_runs     the last RECENT_RUNS runs whose turns were applied: a replica that takes over a
                    run which had already written its turn (it crashed before its terminal commit)
                    finds the run's id here and does not append the turn again
    last_request_id the client request_id of that run, so a retried RunCanvas whose run already
                    finished reattaches to it instead of sending the same message as a new turn
The answer of a turn is the concatenation of the Message contents of that run.

One run per turn: a session's next message makes its run under the store idempotency key
`turn:<session>:<digest of the turn count>` (`turn_request_id`), so of two messages sent at once, or one sent
while the previous turn still runs, one makes the run and the other is refused (ABORTED, TURN_IN_PROGRESS).

One continuation per paused run: the run that resumes a paused run P is created under the store
idempotency key `resume:<P>` (`resume_request_id`). The store keeps that key unique per tenant in the
same transaction that inserts the run, so of two concurrent resumes exactly one creates the run; the
other gets that run back, sees that its claim nonce is not in the spec, and is refused (ABORTED).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from services.common.errors import AbortedError, NotFoundError
from services.orchestrator.core import events as ev
from services.orchestrator.core.ports import RunRecord, RunStatus, RunStore

logger = logging.getLogger(__name__)

RESUME_KEY_PREFIX = "resume:"
RECENT_RUNS = 16
HISTORY_MAX_BYTES = 2 << 20
"""Content kept in the state's history (older messages go first, never this turn's): the state travels with
every turn write, which the store limits in size, and prompts are fitted to far less than this anyway."""
TURN_WRITE_ATTEMPTS = 8  # each retry means another turn of this session landed in between


TURN_KEY_PREFIX = "turn:"


def turn_request_id(session_id: str, turns: int, passed_over: list[str]) -> str:
    """The idempotency key of the one run allowed to answer a session's next message (<= 64 chars).

    It names the session's turn count: two messages sent at once (or one while a turn is still running)
    read the same count and so the same key, and the store's unique key lets one of them create the run.
    The count moves on when a turn is recorded. `passed_over` are runs that held this key and ended without
    recording their turn (rare: the session refused it): the key goes past them instead of waiting for the
    store to forget it."""
    digest = hashlib.sha256(":".join([str(turns), *passed_over]).encode()).hexdigest()[:16]
    return f"{TURN_KEY_PREFIX}{session_id}:{digest}"


def resume_request_id(paused_run_id: str) -> str:
    """The idempotency key of the one run allowed to continue `paused_run_id` (<= 64 chars)."""
    return RESUME_KEY_PREFIX + paused_run_id


def history_lines(history: list[dict[str, Any]]) -> list[str]:
    return [f"{h.get('role', 'user')}: {h.get('content', '')}" for h in history]


def next_state(previous: dict[str, Any], *, query: str, answer: str | None, paused_run_id: str, pending: list[str],
               env: dict[str, Any], window: int, run_id: str = "",
               request_id: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(new session state, messages to append) after a run ended."""
    messages: list[dict[str, Any]] = []
    history = list(previous.get("history") or [])
    if query:  # §7 item 8: empty queries (e.g. a resume with answers only) are not user turns
        messages.append({"role": "user", "content": query})
    if answer:
        messages.append({"role": "assistant", "content": answer})
    history.extend(messages)
    kept = history[-window:] if window > 0 else []
    sizes = [len(str(m.get("content", ""))) for m in kept]
    while len(kept) > len(messages) and sum(sizes) > HISTORY_MAX_BYTES:
        kept.pop(0)
        sizes.pop(0)
    state = {
        "paused_run_id": paused_run_id,
        "pending": pending,
        "history": kept,
        "env": env,
        "last_run_id": run_id,
        "recent_runs": ([r for r in previous.get("recent_runs") or [] if r != run_id] + [run_id])[-RECENT_RUNS:]
        if run_id else list(previous.get("recent_runs") or []),
        "last_request_id": request_id,
    }
    return state, messages


async def record_turn(store: RunStore, record: RunRecord, *, answer: str, status: RunStatus,
                      pauses: list[tuple[str, dict[str, Any]]], env: dict[str, Any], window: int) -> bool:
    """Write the run's turn into its session, at most once per run. False when it was already there.

    Called before the run's terminal commit. A crash in between leaves the run RUNNING, so a takeover
    replays it from the journal and calls this again: the session already names this run as its
    last one, and the turn is not appended twice. The write is a compare-and-set on the etag read
    here; a concurrent turn of the same session makes it re-read and apply this turn on top.
    """
    # A conversation loop's pause comes after the turn's answer was shown: keep it in the history.
    shown = status != RunStatus.PAUSED or any(p.get("conversation") for _, p in pauses)
    for _attempt in range(TURN_WRITE_ATTEMPTS):
        try:
            session = await store.get_session(record.session_id)
        except NotFoundError:
            # Deleted meanwhile: the run still ends (else every takeover would fail here again).
            logger.warning("run %s: session %s is gone; its turn is not recorded", record.id, record.session_id)
            return False
        if record.id in (session.state.get("recent_runs") or ()):
            return False
        new_state, messages = next_state(
            session.state, query=str(record.spec.get("query") or ""), answer=answer if shown else None,
            paused_run_id=record.id if status == RunStatus.PAUSED else "", pending=[p[0] for p in pauses],
            env=env, window=window, run_id=record.id, request_id=str(record.spec.get("request_id") or ""))
        try:
            await store.append_session_turn(record.session_id, messages, new_state, etag=session.etag)
            return True
        except AbortedError:
            continue  # another turn landed since the read: re-read and apply this one on top
    raise AbortedError(f"session {record.session_id}: the turn of run {record.id} lost {TURN_WRITE_ATTEMPTS} "
                       "compare-and-set races in a row", reason="SESSION_CONTENDED")


async def paused_components(store: RunStore, run: RunRecord) -> list[str]:
    """The UserFillUp ids a paused run waits on, from its last events (a run without a session has
    no session state that lists them). The pause events come just before WorkflowFinished."""
    window = 64
    while True:
        events = await store.list_events(run.id, max(0, run.last_seq - window), limit=window + 1)
        tail = [e for e in events if e.kind != ev.WORKFLOW_FINISHED]
        pending: list[str] = []
        for event in reversed(tail):
            if event.kind != ev.USER_INPUTS_REQUIRED:
                return list(reversed(pending))
            pending.append(str(event.data.get("component_id", "")))
        if run.last_seq - window <= 0 or window >= 4096:  # the store pages at most 5000 events
            return list(reversed(pending))
        window *= 4
