"""Per-tenant admission control: at most `limit` concurrent runs per tenant, across replicas.

A run holds a *slot* from RunCanvas until it ends (SUCCEEDED, FAILED, CANCELLED) or pauses. Slots
live in a `SlotStore`: Redis when `orchestrator.redis_url` is set (shared by every replica; see
adapters/admission_redis.py), otherwise this module's in-memory store (per replica: N replicas then
admit up to N × limit). Every slot expires `slot_ttl_ms` after its last renewal, and the replica
executing a run renews all its slots on one timer, so a replica that dies (kill -9) frees its slots
when they lapse, while the replica that takes a run over re-claims its slot (`hold`, never refused).

The next RunCanvas over the cap gets ResourceExhaustedError (RESOURCE_EXHAUSTED with RetryInfo)
before any run record is created.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from services.common.errors import AgentCanvasError, ResourceExhaustedError

logger = logging.getLogger(__name__)


class SlotStore(Protocol):
    async def try_acquire(self, tenant: str, run_id: str, limit: int, ttl_ms: int) -> bool:
        """Take a slot for `run_id` if the tenant holds fewer than `limit` live ones (or already holds this one)."""
        ...

    async def hold(self, tenants_runs: list[tuple[str, str]], ttl_ms: int) -> None:
        """Renew (or re-create) the slots of these runs unconditionally."""
        ...

    async def release(self, tenant: str, run_id: str) -> None: ...

    async def rename(self, tenant: str, old: str, new: str, ttl_ms: int) -> None:
        """Atomically replace slot `old` by `new` (just release `old` when `new` is empty)."""
        ...

    async def count(self, tenant: str) -> int:
        """Live slots of a tenant."""
        ...

    async def close(self) -> None: ...


class InMemorySlots:
    """Slots of one replica (the fallback without Redis)."""

    def __init__(self, clock=time.monotonic) -> None:
        self._slots: dict[str, dict[str, float]] = {}
        self._clock = clock

    def _live(self, tenant: str) -> dict[str, float]:
        now = self._clock()
        slots = self._slots.setdefault(tenant, {})
        for run_id in [r for r, expiry in slots.items() if expiry <= now]:
            del slots[run_id]
        return slots

    async def try_acquire(self, tenant: str, run_id: str, limit: int, ttl_ms: int) -> bool:
        slots = self._live(tenant)
        if run_id not in slots and len(slots) >= limit:
            return False
        slots[run_id] = self._clock() + ttl_ms / 1000
        return True

    async def hold(self, tenants_runs: list[tuple[str, str]], ttl_ms: int) -> None:
        expiry = self._clock() + ttl_ms / 1000
        for tenant, run_id in tenants_runs:
            self._slots.setdefault(tenant, {})[run_id] = expiry

    async def release(self, tenant: str, run_id: str) -> None:
        self._slots.get(tenant, {}).pop(run_id, None)

    async def rename(self, tenant: str, old: str, new: str, ttl_ms: int) -> None:
        self._slots.get(tenant, {}).pop(old, None)
        if new:
            self._slots.setdefault(tenant, {})[new] = self._clock() + ttl_ms / 1000

    async def count(self, tenant: str) -> int:
        return len(self._live(tenant))

    async def close(self) -> None:
        return None


class Admission:
    """The cap and the slots of the runs this replica executes."""

    def __init__(self, slots: SlotStore, limit: int, slot_ttl_ms: int = 30_000, retry_after_s: float = 1.0):
        self.slots = slots
        self.limit = limit
        self.slot_ttl_ms = slot_ttl_ms
        self.retry_after_s = retry_after_s
        self._held: dict[str, str] = {}  # run id → tenant, for runs executed here
        self._renewer: asyncio.Task | None = None

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    async def admit(self, tenant: str, run_id: str) -> None:
        """Take a slot for a new run, or raise ResourceExhaustedError."""
        if not self.enabled:
            return
        if not await self.slots.try_acquire(tenant, run_id, self.limit, self.slot_ttl_ms):
            raise ResourceExhaustedError(
                f"tenant {tenant or '(none)'} already has {self.limit} runs in progress "
                f"(orchestrator.max_runs_per_tenant); retry when one ends",
                retry_after_s=self.retry_after_s, metadata={"tenant": tenant, "limit": str(self.limit)})
        self._held[run_id] = tenant

    async def rename(self, tenant: str, provisional: str, run_id: str) -> None:
        """The admitted run got its id from the store (`run_id`; "" = no new run was created)."""
        if not self.enabled:
            return
        self._held.pop(provisional, None)
        if run_id:
            self._held[run_id] = tenant
        await self.slots.rename(tenant, provisional, run_id, self.slot_ttl_ms)

    async def adopt(self, tenant: str, run_id: str) -> None:
        """This replica executes `run_id` (a takeover): keep its slot alive, beyond the cap if need be."""
        if not self.enabled or run_id in self._held:
            return
        self._held[run_id] = tenant
        await self.slots.hold([(tenant, run_id)], self.slot_ttl_ms)

    def forget(self, run_id: str) -> None:
        """Stop renewing without releasing (the run was abandoned; its next owner adopts it)."""
        self._held.pop(run_id, None)

    async def release(self, tenant: str, run_id: str) -> None:
        self._held.pop(run_id, None)
        if self.enabled:
            await self.slots.release(tenant, run_id)

    async def renew_once(self) -> None:
        if self._held:
            await self.slots.hold(list((t, r) for r, t in self._held.items()), self.slot_ttl_ms)

    def start(self) -> None:
        if self.enabled and self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        interval = max(0.05, self.slot_ttl_ms / 3000)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.renew_once()
            except AgentCanvasError as exc:  # Redis briefly unreachable: the next tick retries
                logger.warning("admission slots not renewed: %s", exc.message)

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
            self._renewer = None
        await self.slots.close()
