"""Session bookkeeping between turns (spec §3.6, fixes §7 item 8).

Session state (stored on the store's Session.state):
    paused_run_id   run waiting for a UserFillUp answer ("" when none)
    pending         UserFillUp ids that run waits on
    history         bounded list of {role, content}; sys.history is derived from it
    env             env.* values carried to the next turn (VariableAssigner may change them)
The answer of a turn is the concatenation of the Message contents of that run.
"""

from __future__ import annotations

from typing import Any


def history_lines(history: list[dict[str, Any]]) -> list[str]:
    return [f"{h.get('role', 'user')}: {h.get('content', '')}" for h in history]


def next_state(previous: dict[str, Any], *, query: str, answer: str | None, paused_run_id: str, pending: list[str],
               env: dict[str, Any], window: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(new session state, messages to append) after a run ended."""
    messages: list[dict[str, Any]] = []
    history = list(previous.get("history") or [])
    if query:  # §7 item 8: empty queries (e.g. a resume with answers only) are not user turns
        messages.append({"role": "user", "content": query})
    if answer:
        messages.append({"role": "assistant", "content": answer})
    history.extend(messages)
    state = {
        "paused_run_id": paused_run_id,
        "pending": pending,
        "history": history[-window:] if window > 0 else [],
        "env": env,
    }
    return state, messages
