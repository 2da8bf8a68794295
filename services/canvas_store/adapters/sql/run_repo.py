"""SQL repository for durable run state: run records, leases, the step journal and events.

Every lease-sensitive write locks the run row first (SELECT ... FOR UPDATE on PostgreSQL/MySQL; on
SQLite the write transaction already holds the database's single writer lock), checks the caller with
the policy callback and the fencing token (a released or expired lease fences like a stale token), then
writes. So a commit either sees its own lease intact and writes everything (steps, events with
consecutive seq, status) in one transaction, or writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from services.canvas_store.adapters.sql.canvas_repo import keyset_after
from services.canvas_store.adapters.sql.engine import Database
from services.canvas_store.adapters.sql.models import idempotency_keys, run_events, run_steps, runs
from services.canvas_store.core.ids import now_ms
from services.canvas_store.core.canvases import idempotent_resource_gone
from services.canvas_store.core.policy import Action, Caller, Kind, Target, permits
from services.canvas_store.core.types import (
    CommitResult, RunCommit, RunLease, RunRecord, RunStatus, RunStep, StoredEvent,
)
from services.common.errors import (
    AbortedError, AgentCanvasError, FailedPreconditionError, NotFoundError, PermissionDeniedError,
)

Check = Callable[[Target], None]
Replayable = Callable[[Target], bool]
"""Whether a replayed request_id may hand back the run it recorded: the caller could Get it now."""

_FINAL = [status.value for status in RunStatus if status.is_final]
_FACT_COLUMNS = [runs.c.id, runs.c.tenant_id, runs.c.creator_id, runs.c.status, runs.c.lease_holder,
                 runs.c.lease_token, runs.c.lease_expire_time, runs.c.last_seq, runs.c.step_count,
                 runs.c.cancel_requested]
_SUMMARY = [c for c in runs.c if c.name != "spec"]

# Hot-path statements are built once (commits and event polls run many times per run).
_FACTS = sa.select(*_FACT_COLUMNS).where(runs.c.id == sa.bindparam("b_id"))
_FACTS_LOCKED = _FACTS.with_for_update()
_FENCED_UPDATE = sa.update(runs).where(runs.c.id == sa.bindparam("b_id"), runs.c.lease_token == sa.bindparam("b_token"))
_INSERT_STEPS = sa.insert(run_steps)
_INSERT_EVENTS = sa.insert(run_events)
# Built once and given their values at execute time: `.values(**row)` per call coerces every value
# into a new statement (a measurable share of StartRunRecord's CPU).
_INSERT_RUN = sa.insert(runs)
_INSERT_KEY = sa.insert(idempotency_keys)
_FIND_KEY = sa.select(idempotency_keys.c.resource_id).where(
    idempotency_keys.c.tenant_id == sa.bindparam("b_tenant"), idempotency_keys.c.user_id == sa.bindparam("b_user"),
    idempotency_keys.c.scope == "run", idempotency_keys.c.request_id == sa.bindparam("b_request"))
_STATUS = sa.select(runs.c.status).where(runs.c.id == sa.bindparam("b_id"))
_EVENTS_AFTER = (sa.select(run_events).where(run_events.c.run_id == sa.bindparam("b_id"),
                                             run_events.c.seq > sa.bindparam("b_after"))
                 .order_by(run_events.c.seq).limit(sa.bindparam("b_limit")))


def run_from_row(row: Any) -> RunRecord:
    m = row._mapping
    lease = None
    if m["lease_holder"]:
        lease = RunLease(run_id=m["id"], holder=m["lease_holder"], token=m["lease_token"],
                         expire_time_ms=m["lease_expire_time"], cancel_requested=bool(m["cancel_requested"]))
    return RunRecord(
        id=m["id"], tenant_id=m["tenant_id"], creator_id=m["creator_id"], canvas_id=m["canvas_id"],
        revision_id=m["revision_id"], session_id=m["session_id"], status=RunStatus(m["status"]), spec=m.get("spec"),
        outputs=m["outputs"], error=m["error"], usage=m["usage"], last_seq=m["last_seq"], step_count=m["step_count"],
        cancel_requested=bool(m["cancel_requested"]), lease=lease, create_time_ms=m["create_time"],
        update_time_ms=m["update_time"],
    )


def run_target(row: Any) -> Target:
    m = row._mapping
    return Target(Kind.RUN, m["tenant_id"], m["id"], creator_id=m["creator_id"])


def _not_found(run_id: str) -> NotFoundError:
    return NotFoundError(f"run {run_id!r} not found", resource_type="run", resource_name=run_id)


def _lease_lost(run_id: str, token: int) -> AbortedError:
    return AbortedError(f"lease token {token} on run {run_id!r} is no longer held; stop working on this run",
                        reason="LEASE_LOST", metadata={"run_id": run_id})


class RunRepository:
    def __init__(self, db: Database):
        self._db = db

    # ---- records ---------------------------------------------------------------------------------

    def create(self, run: RunRecord, request_id: str, replayable: Replayable | None = None, *,
               key_user: str | None = None) -> RunRecord:
        """Insert the run; a replayed request_id returns the original, also when two retries race.

        Idempotency keys are (tenant, user, "run", request_id) with user = `key_user`, by default the run's
        creator: another user's identical request_id is another request ('' makes the key tenant-wide, for
        continuation claims). A replay hands back the recorded run only if `replayable` says the caller could
        Get it (default: the policy's answer for the creator); otherwise, or when it is gone, ABORTED
        IDEMPOTENT_RESOURCE_GONE, whatever the reason (nothing is leased either)."""
        return self._retrying(lambda: self._create_once(run, request_id, None, replayable, key_user)[0], request_id)

    def start(self, run: RunRecord, request_id: str, holder: str, ttl_ms: int,
              replayable: Replayable | None = None, *, key_user: str | None = None) -> tuple[RunRecord, RunLease | None]:
        """create + the first lease for `holder` in one transaction. A replay (of the same key, and visible as
        in `create`) leases the existing run only while it has not started (PENDING) and is free or already
        `holder`'s; otherwise no lease."""
        return self._retrying(lambda: self._create_once(run, request_id, (holder, ttl_ms), replayable, key_user),
                              request_id)

    @staticmethod
    def _retrying(attempt_once: Callable[[], Any], request_id: str) -> Any:
        for attempt in range(3):
            try:
                return attempt_once()
            except AbortedError as exc:
                if not request_id or attempt == 2 or exc.reason == "IDEMPOTENT_RESOURCE_GONE":
                    raise
        raise AssertionError("unreachable")

    def _create_once(self, run: RunRecord, request_id: str, lease_for: tuple[str, int] | None,
                     replayable: Replayable | None, key_user: str | None) -> tuple[RunRecord, RunLease | None]:
        now = now_ms()
        key_user = run.creator_id if key_user is None else key_user
        with self._db.write() as conn:
            if request_id:
                existing = conn.execute(_FIND_KEY, {"b_tenant": run.tenant_id, "b_user": key_user,
                                                    "b_request": request_id}).scalar()
                if existing:
                    query = sa.select(runs).where(runs.c.id == existing)
                    if lease_for and conn.dialect.name != "sqlite":
                        query = query.with_for_update()  # the replay may lease it: lock as acquire does
                    row = conn.execute(query).first()
                    if replayable is None:
                        creator = Caller(run.tenant_id, run.creator_id)
                        replayable = lambda target: permits(creator, Action.READ_RUN, target)  # noqa: E731
                    # Checked before anything is returned or leased; invisible answers exactly like gone.
                    if row is None or not replayable(run_target(row)):
                        raise idempotent_resource_gone("run")
                    found = run_from_row(row)
                    return found, self._replay_lease(conn, row, found, lease_for, now)
            lease = None
            lease_values: dict[str, Any] = dict(lease_holder="", lease_token=0, lease_expire_time=0)
            if lease_for:
                lease = RunLease(run.id, lease_for[0], 1, now + lease_for[1], False)
                lease_values = dict(lease_holder=lease.holder, lease_token=1, lease_expire_time=lease.expire_time_ms)
            conn.execute(_INSERT_RUN, dict(
                id=run.id, tenant_id=run.tenant_id, creator_id=run.creator_id, canvas_id=run.canvas_id,
                revision_id=run.revision_id, session_id=run.session_id, status=RunStatus.PENDING.value,
                spec=run.spec or {}, outputs=None, error=None, usage=None, last_seq=0, step_count=0,
                cancel_requested=False, create_time=now, update_time=now, **lease_values))
            if request_id:
                conn.execute(_INSERT_KEY, dict(
                    tenant_id=run.tenant_id, user_id=key_user, scope="run", request_id=request_id,
                    resource_id=run.id, create_time=now))
        run.status, run.create_time_ms, run.update_time_ms, run.lease = RunStatus.PENDING, now, now, lease
        return run, lease

    @staticmethod
    def _replay_lease(conn: Connection, row: Any, found: RunRecord, lease_for: tuple[str, int] | None,
                      now: int) -> RunLease | None:
        if lease_for is None or found.status is not RunStatus.PENDING:
            return None
        holder, ttl_ms = lease_for
        m = row._mapping
        live = bool(m["lease_holder"]) and m["lease_expire_time"] >= now
        if live and m["lease_holder"] != holder:
            return None  # another replica's live lease: the caller takes the normal path
        # The same holder's live lease is extended (as a renewal would); otherwise a new token fences
        # out whoever held it before.
        token = m["lease_token"] if live else m["lease_token"] + 1
        expire = now + ttl_ms
        result = conn.execute(sa.update(runs).where(runs.c.id == found.id, runs.c.lease_token == m["lease_token"])
                              .values(lease_holder=holder, lease_token=token, lease_expire_time=expire))
        if result.rowcount != 1:
            return None  # leased concurrently
        lease = RunLease(found.id, holder, token, expire, bool(m["cancel_requested"]))
        found.lease = lease
        return lease

    def get(self, run_id: str, *, with_spec: bool = True) -> RunRecord | None:
        with self._db.read() as conn:
            row = conn.execute(sa.select(*(runs.c if with_spec else _SUMMARY)).where(runs.c.id == run_id)).first()
        return run_from_row(row) if row else None

    def list(self, *, all_tenants: bool, tenant_id: str, user_id: str, tenant_owner: bool,
             statuses: list[RunStatus], lease_expired_only: bool, session_id: str,
             after: list[Any] | None, limit: int) -> list[RunRecord]:
        query = sa.select(*_SUMMARY)
        if not all_tenants:
            query = query.where(runs.c.tenant_id == tenant_id)
            if not tenant_owner:
                query = query.where(runs.c.creator_id == user_id)
        if statuses:
            query = query.where(runs.c.status.in_([status.value for status in statuses]))
        if lease_expired_only:
            query = query.where(sa.or_(runs.c.lease_holder == "", runs.c.lease_expire_time < now_ms()))
        if session_id:
            query = query.where(runs.c.session_id == session_id)
        if after is not None:
            query = query.where(keyset_after(runs.c.create_time, runs.c.id, after, descending=False))
        query = query.order_by(runs.c.create_time, runs.c.id).limit(limit + 1)
        with self._db.read() as conn:
            return [run_from_row(row) for row in conn.execute(query).all()]

    def request_cancel(self, run_id: str, check: Check) -> RunRecord:
        with self._db.write() as conn:
            self._locked_facts(conn, run_id, check)
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(cancel_requested=True, update_time=now_ms()))
            return run_from_row(conn.execute(sa.select(*_SUMMARY).where(runs.c.id == run_id)).one())

    # ---- leases ----------------------------------------------------------------------------------

    def acquire(self, run_id: str, holder: str, ttl_ms: int, check: Check) -> RunLease:
        with self._db.write() as conn:
            facts = self._locked_facts(conn, run_id, check)
            if facts.status in _FINAL:
                raise FailedPreconditionError(f"run {run_id!r} is {facts.status}; it cannot be leased",
                                              reason="RUN_FINISHED")
            now = now_ms()
            if facts.lease_holder and facts.lease_expire_time >= now:
                raise AbortedError(f"run {run_id!r} is leased by {facts.lease_holder!r} for another "
                                   f"{facts.lease_expire_time - now} ms", reason="LEASE_HELD",
                                   metadata={"holder": facts.lease_holder})
            token = facts.lease_token + 1
            expire = now + ttl_ms
            result = conn.execute(sa.update(runs).where(runs.c.id == run_id, runs.c.lease_token == facts.lease_token)
                                  .values(lease_holder=holder, lease_token=token, lease_expire_time=expire))
            if result.rowcount != 1:
                raise AbortedError(f"run {run_id!r} was leased concurrently", reason="LEASE_HELD")
        return RunLease(run_id, holder, token, expire, bool(facts.cancel_requested))

    def renew(self, run_id: str, holder: str, token: int, ttl_ms: int, check: Check) -> RunLease:
        with self._db.write() as conn:
            facts = self._locked_facts(conn, run_id, check)
            now = now_ms()
            if facts.lease_token != token or facts.lease_holder != holder or facts.lease_expire_time < now:
                raise _lease_lost(run_id, token)  # an expired lease is lost: anyone may have acquired it meanwhile
            expire = now + ttl_ms
            conn.execute(sa.update(runs).where(runs.c.id == run_id, runs.c.lease_token == token)
                         .values(lease_expire_time=expire))
        return RunLease(run_id, holder, token, expire, bool(facts.cancel_requested))

    def release(self, run_id: str, token: int, check: Check) -> None:
        with self._db.write() as conn:
            facts = self._locked_facts(conn, run_id, check)
            if facts.lease_token != token or not facts.lease_holder:
                raise _lease_lost(run_id, token)
            conn.execute(sa.update(runs).where(runs.c.id == run_id, runs.c.lease_token == token)
                         .values(lease_holder="", lease_expire_time=0))

    # ---- journal and events ----------------------------------------------------------------------

    def commit(self, commit: RunCommit, check: Check) -> CommitResult:
        """One transaction: fence on the lease token, append steps and events, update the run."""
        with self._db.write() as conn:
            return self._commit_in(conn, commit, check, now_ms())

    def commit_many(self, commits: list[RunCommit], check: Check) -> list[CommitResult | AgentCanvasError]:
        """All commits in ONE transaction, each fenced on its own: an item whose checks fail gets its
        error (and writes nothing, since every check precedes that item's writes) without failing the
        others. Rows are locked in run-id order so two concurrent batches cannot deadlock; items of
        the same run keep their request order."""
        results: list[CommitResult | AgentCanvasError] = [None] * len(commits)  # type: ignore[list-item]
        order = sorted(range(len(commits)), key=lambda i: commits[i].run_id)
        now = now_ms()
        with self._db.write() as conn:
            for index in order:
                try:
                    results[index] = self._commit_in(conn, commits[index], check, now)
                except (AbortedError, FailedPreconditionError, NotFoundError, PermissionDeniedError) as exc:
                    results[index] = exc
        return results

    def _commit_in(self, conn: Connection, commit: RunCommit, check: Check, now: int) -> CommitResult:
        facts = self._locked_facts(conn, commit.run_id, check)
        # Expiry is judged now, with the row locked (`now` may predate a wait for the lock).
        if (facts.lease_token != commit.lease_token or not facts.lease_holder
                or facts.lease_expire_time < now_ms()):
            raise _lease_lost(commit.run_id, commit.lease_token)
        if facts.status in _FINAL:
            raise FailedPreconditionError(f"run {commit.run_id!r} is already {facts.status}",
                                          reason="RUN_FINISHED")
        first_seq = facts.last_seq + 1
        last_seq = facts.last_seq + len(commit.events)
        step_base = facts.step_count
        values: dict[str, Any] = dict(last_seq=last_seq, step_count=step_base + len(commit.steps), update_time=now)
        if commit.status is not None:
            values["status"] = commit.status.value
        if commit.outputs is not None:
            values["outputs"] = commit.outputs
        if commit.error is not None:
            values["error"] = commit.error
        if commit.usage is not None:
            values["usage"] = commit.usage
        result = conn.execute(_FENCED_UPDATE, {"b_id": commit.run_id, "b_token": commit.lease_token, **values})
        if result.rowcount != 1:
            raise _lease_lost(commit.run_id, commit.lease_token)
        if commit.steps:
            conn.execute(_INSERT_STEPS, [
                {"run_id": commit.run_id, "step_index": step_base + offset + 1, "node_id": step.node_id,
                 "attempt": step.attempt, "state": step.state, "create_time": now}
                for offset, step in enumerate(commit.steps)])
        if commit.events:
            conn.execute(_INSERT_EVENTS, [
                {"run_id": commit.run_id, "seq": first_seq + offset, "event_type": event.event_type,
                 "payload": event.payload, "terminal": event.terminal, "create_time": now}
                for offset, event in enumerate(commit.events)])
        return CommitResult(first_seq if commit.events else 0, last_seq, bool(facts.cancel_requested))

    def list_steps(self, run_id: str, after_step: int) -> list[RunStep]:
        with self._db.read() as conn:
            rows = conn.execute(sa.select(run_steps).where(run_steps.c.run_id == run_id,
                                                           run_steps.c.step_index > after_step)
                                .order_by(run_steps.c.step_index)).all()
        return [RunStep(node_id=r.node_id, attempt=r.attempt, state=r.state, step_index=r.step_index,
                        create_time_ms=r.create_time) for r in rows]

    def events_since(self, run_id: str, after_seq: int, limit: int) -> tuple[list[StoredEvent], RunStatus | None]:
        """Events with seq > after_seq (at most `limit`) and the run's status read in the same snapshot."""
        with self._db.read() as conn:
            status = conn.execute(_STATUS, {"b_id": run_id}).scalar()
            rows = conn.execute(_EVENTS_AFTER, {"b_id": run_id, "b_after": after_seq, "b_limit": limit}).all()
        events = [StoredEvent(event_type=r.event_type, payload=bytes(r.payload), terminal=bool(r.terminal), seq=r.seq,
                              run_id=run_id) for r in rows]
        return events, RunStatus(status) if status else None

    # ---- helpers ---------------------------------------------------------------------------------

    def _locked_facts(self, conn: Connection, run_id: str, check: Check) -> Any:
        row = conn.execute(_FACTS if conn.dialect.name == "sqlite" else _FACTS_LOCKED, {"b_id": run_id}).first()
        if row is None:
            raise _not_found(run_id)
        check(run_target(row))
        return row
