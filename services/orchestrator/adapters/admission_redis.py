"""Admission slots in Redis, shared by every orchestrator replica.

One sorted set per tenant (`<prefix><tenant>`): member = run id, score = expiry in ms of Redis' own
clock (TIME), so replicas need no synchronised clocks. Acquire is one Lua script (atomic: drop
expired members, count, add); renewals are one pipelined ZADD per tenant. The key itself expires
with its last slot: every script only ever extends its TTL, so a replica configured with a shorter
slot TTL cannot expire the slots of the others. A Redis failure surfaces as UnavailableError (admission fails closed).
"""

from __future__ import annotations

import logging
from collections import defaultdict

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from services.common.errors import UnavailableError

logger = logging.getLogger(__name__)

_NOW_MS = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) "

_ACQUIRE = _NOW_MS + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
"""

_HOLD = _NOW_MS + """
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], now + ttl, ARGV[i]) end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
"""

_RENAME = _NOW_MS + """
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
end
return 1
"""

_COUNT = _NOW_MS + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


class RedisSlots:
    def __init__(self, url: str, prefix: str = "agentcanvas:admission:"):
        self._client = aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._prefix = prefix
        self._acquire = self._client.register_script(_ACQUIRE)
        self._hold = self._client.register_script(_HOLD)
        self._count = self._client.register_script(_COUNT)
        self._rename = self._client.register_script(_RENAME)

    def _key(self, tenant: str) -> str:
        return self._prefix + (tenant or "_")

    async def try_acquire(self, tenant: str, run_id: str, limit: int, ttl_ms: int) -> bool:
        try:
            return bool(await self._acquire(keys=[self._key(tenant)], args=[run_id, limit, ttl_ms]))
        except RedisError as exc:
            raise UnavailableError(f"admission control (Redis) is unavailable: {type(exc).__name__}") from None

    async def hold(self, tenants_runs: list[tuple[str, str]], ttl_ms: int) -> None:
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for tenant, run_id in tenants_runs:
            by_tenant[tenant].append(run_id)
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for tenant, runs in by_tenant.items():
                    await self._hold(keys=[self._key(tenant)], args=[ttl_ms, *runs], client=pipe)
                await pipe.execute()
        except RedisError as exc:
            raise UnavailableError(f"admission control (Redis) is unavailable: {type(exc).__name__}") from None

    async def release(self, tenant: str, run_id: str) -> None:
        try:
            await self._client.zrem(self._key(tenant), run_id)
        except RedisError as exc:  # the slot lapses on its own after its TTL
            logger.warning("admission slot of run %s not released: %s", run_id, type(exc).__name__)

    async def rename(self, tenant: str, old: str, new: str, ttl_ms: int) -> None:
        try:
            await self._rename(keys=[self._key(tenant)], args=[old, new, ttl_ms])
        except RedisError as exc:
            raise UnavailableError(f"admission control (Redis) is unavailable: {type(exc).__name__}") from None

    async def count(self, tenant: str) -> int:
        try:
            return int(await self._count(keys=[self._key(tenant)]))
        except RedisError as exc:
            raise UnavailableError(f"admission control (Redis) is unavailable: {type(exc).__name__}") from None

    async def close(self) -> None:
        await self._client.aclose()
