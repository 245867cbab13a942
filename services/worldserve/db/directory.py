"""Who a key belongs to and what its tenant may do: the gateway's one port onto tenancy.

``DatabaseDirectory`` reads PostgreSQL through a short-lived cache (a revoked key or a changed
quota takes effect within ``auth_cache_ttl_s``; concurrent misses for one key share one query).
``StaticDirectory`` serves fixed keys and the deployment defaults: the dev stack without a
database, and tests of parts that are not about tenancy.

When PostgreSQL is unreachable, keys and quotas seen in the last ``auth_stale_s`` keep their last
answer (no revocation can be written while the database is down), so clients already working
keep working; a key never seen before fails with UNAVAILABLE: it cannot be checked.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from worldserve.db.repository import Repository
from worldserve.errors import DatabaseUnavailable, PermissionDenied
from worldserve.quota.limits import TenantLimits
from worldserve.tenancy.keys import Principal

T = TypeVar("T")
log = logging.getLogger(__name__)
MAX_CACHED = 10_000


class Directory(Protocol):
    async def authenticate(self, key: str) -> Principal | None: ...
    async def limits(self, tenant: str) -> TenantLimits: ...
    async def month_tokens(self, tenant: str, month: str) -> int: ...


class StaticDirectory:
    def __init__(self, keys: dict[str, Principal], defaults: TenantLimits) -> None:
        self._keys = {hashlib.sha256(k.encode()).digest(): p for k, p in keys.items() if k}
        self._defaults = defaults

    async def authenticate(self, key: str) -> Principal | None:
        return self._keys.get(hashlib.sha256(key.encode()).digest())

    async def limits(self, tenant: str) -> TenantLimits:
        return self._defaults

    async def month_tokens(self, tenant: str, month: str) -> int:
        return 0


class _TtlCache:
    """A small TTL cache whose concurrent misses for one key run one loader.

    Stale-if-unreachable: when the loader fails with DatabaseUnavailable, an expired answer
    younger than ``stale_s`` is served instead (a key cannot be revoked while PostgreSQL is down,
    so the last answer is still the truth, bar the last few seconds before the outage). Keys
    never seen before still fail: they cannot be checked.
    """

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic,
                 stale_s: float = 0.0) -> None:
        self.ttl_s = ttl_s
        self.stale_s = stale_s
        self._clock = clock
        self._values: dict[object, tuple[float, object]] = {}
        self._loading: dict[object, asyncio.Future[object]] = {}

    async def get(self, key: object, load: Callable[[], Awaitable[T]]) -> T:
        hit = self._values.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]  # type: ignore[return-value]
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)  # type: ignore[return-value,arg-type]
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            value = await load()
        except DatabaseUnavailable as exc:
            if hit is not None and hit[0] + self.stale_s > self._clock():
                log.warning("PostgreSQL unreachable; serving a cached answer (%s)", exc)
                future.set_result(hit[1])
                return hit[1]  # type: ignore[return-value]
            future.set_exception(exc)
            future.exception()
            raise
        except BaseException as exc:
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            else:
                future.cancel()
            raise
        finally:
            self._loading.pop(key, None)
        future.set_result(value)
        if len(self._values) >= MAX_CACHED:
            self._values.clear()
        self._values[key] = (self._clock() + self.ttl_s, value)
        return value


class DatabaseDirectory:
    def __init__(self, repo: Repository, defaults: TenantLimits, ttl_s: float = 4.0,
                 stale_s: float = 900.0) -> None:
        self.repo = repo
        self._defaults = defaults
        self._keys = _TtlCache(ttl_s, stale_s=stale_s)
        self._limits = _TtlCache(ttl_s, stale_s=stale_s)

    async def authenticate(self, key: str) -> Principal | None:
        digest = hashlib.sha256(key.encode()).digest()  # the cache never holds the key itself
        return await self._keys.get(digest, lambda: self.repo.find_key(key))

    async def limits(self, tenant: str) -> TenantLimits:
        async def load() -> TenantLimits:
            spec = await self.repo.quota(tenant)
            if spec is None:
                raise PermissionDenied(f"tenant {tenant} is disabled or deleted")
            return spec.over(self._defaults)
        return await self._limits.get(tenant, load)

    async def month_tokens(self, tenant: str, month: str) -> int:
        return await self.repo.month_tokens(tenant, month)
