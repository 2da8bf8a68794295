"""Admission slots: the in-memory fallback (fake clock) and the Redis store (real Redis, real TTLs)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from services.common.errors import InvalidArgumentError, ResourceExhaustedError
from services.orchestrator.adapters.admission_redis import RedisSlots
from services.orchestrator.core.admission import Admission, InMemorySlots
from services.orchestrator.settings import OrchestratorSettings
from tests.support.cluster import REDIS_URL


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_in_memory_cap_release_expiry_and_rename():
    clock = Clock()
    admission = Admission(InMemorySlots(clock), limit=2, slot_ttl_ms=3000)
    await admission.admit("t", "p1")
    await admission.rename("t", "p1", "run-1")
    await admission.admit("t", "run-2")
    with pytest.raises(ResourceExhaustedError) as refused:
        await admission.admit("t", "run-3")
    assert refused.value.retry_after_s == 1.0 and "max_runs_per_tenant" in refused.value.message
    await admission.admit("other", "run-4")  # another tenant is unaffected
    await admission.release("t", "run-2")
    await admission.admit("t", "run-3")
    clock.now += 2.0
    await admission.renew_once()  # the executing replica renews run-1 and run-3 ...
    clock.now += 2.0
    assert await admission.slots.count("t") == 2
    clock.now += 3.5  # ... until it dies: its slots lapse
    assert await admission.slots.count("t") == 0


async def test_unlimited_never_refuses():
    admission = Admission(InMemorySlots(), limit=0)
    for i in range(100):
        await admission.admit("t", f"r{i}")
    assert await admission.slots.count("t") == 0


async def test_redis_slots_are_shared_expire_and_are_adopted():
    tenant = f"t-{uuid.uuid4().hex}"
    # A's slots lapse 2 s after their last renewal: ample time for the cap checks below before that
    # happens. B's TTL outlasts the test, so B's slot cannot lapse too on a slow machine (which would
    # let "one slot left" be reached without A's slot having lapsed).
    replica_a = Admission(RedisSlots(REDIS_URL), limit=2, slot_ttl_ms=2000)
    replica_b = Admission(RedisSlots(REDIS_URL), limit=2, slot_ttl_ms=600_000)
    try:
        await replica_a.admit(tenant, "p1")
        await replica_a.rename(tenant, "p1", "run-1")
        await replica_b.admit(tenant, "run-2")
        with pytest.raises(ResourceExhaustedError):
            await replica_b.admit(tenant, "run-3")
        await replica_b.admit(tenant, "run-2")  # re-admitting a run that holds a slot is not a new slot
        # replica A dies: nothing renews run-1, which lapses by Redis' own clock (poll with a deadline).
        deadline = asyncio.get_running_loop().time() + 30
        while await replica_b.slots.count(tenant) != 1:
            assert asyncio.get_running_loop().time() < deadline, "the dead replica's slot never lapsed"
            await asyncio.sleep(0.05)
        await replica_b.adopt(tenant, "run-1")  # B took run-1 over: its slot is back, beyond the cap if need be
        assert await replica_b.slots.count(tenant) == 2
        await replica_b.release(tenant, "run-1")
        await replica_b.release(tenant, "run-2")
        assert await replica_b.slots.count(tenant) == 0
    finally:
        await replica_a.close()
        await replica_b.close()


def test_settings_validate_the_admission_keys():
    assert OrchestratorSettings.from_section({}).max_runs_per_tenant == 32
    with pytest.raises(InvalidArgumentError):
        OrchestratorSettings.from_section({"max_runs_per_tenant": -1})
    with pytest.raises(InvalidArgumentError):
        OrchestratorSettings.from_section({"admission_slot_ttl_ms": 10})


async def test_redis_a_short_slot_ttl_does_not_expire_other_replicas_slots():
    tenant = f"t-{uuid.uuid4().hex}"
    # Replicas may be configured with different slot TTLs: the key holding every replica's slots must
    # live as long as its longest slot, whichever replica acquired last.
    long_lived = Admission(RedisSlots(REDIS_URL), limit=5, slot_ttl_ms=600_000)
    short_lived = Admission(RedisSlots(REDIS_URL), limit=5, slot_ttl_ms=300)
    try:
        await long_lived.admit(tenant, "run-long")
        await short_lived.admit(tenant, "run-short")
        deadline = asyncio.get_running_loop().time() + 30
        while (count := await long_lived.slots.count(tenant)) == 2:  # until the short slot lapses
            assert asyncio.get_running_loop().time() < deadline, "the short slot never lapsed"
            await asyncio.sleep(0.05)
        assert count == 1  # the long-lived slot is still held
    finally:
        await long_lived.release(tenant, "run-long")
        await long_lived.close()
        await short_lived.close()
