"""Quota counters in Redis, checked and changed atomically by Lua scripts.

Per tenant (keys from ``worldserve.keyspace``, one cluster slot per tenant): the in-flight
reservations (id -> expiry: a short lease that the holding gateway renews while the step runs, so
a dead gateway's reservations are reclaimed within one lease), the tokens each reserves, the
tokens settled this month (seeded from PostgreSQL when absent) and per minute (fixed window,
120 s TTL).

A step *reserves* (input estimate + max_tokens) before the model call and *settles* after it:
the reservation is replaced by the tokens really used and the usage event is appended to the
stream in the same script. Budgets therefore overshoot only by what steps already in flight use
beyond their reservation (a retried answer).

The settle script also writes the usage stream, which is global: the commit script that combines
it with the session keys needs a single Redis primary (replicas/Sentinel are fine; Redis Cluster
would need per-slot streams — see docs/TENANCY.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from worldserve.errors import DatabaseUnavailable, ResourceExhausted, Unavailable
from worldserve.keyspace import Keyspace
from worldserve.quota.events import UsageEvent
from worldserve.quota.limits import TenantLimits, month_of, oversized, seconds_to_next_month
from worldserve.quota.lua import RESERVE_LUA, SETTLE_LUA
from worldserve.redis_guard import guard

log = logging.getLogger(__name__)
MONTH_KEY_TTL_S = 40 * 24 * 3600

_DENIALS = {
    "inflight": ("in-flight steps", "max_inflight_steps"),
    "tpm": ("tokens per minute", "tokens_per_minute"),
    "budget": ("monthly token budget", "monthly_token_budget"),
}


@dataclass(frozen=True, slots=True)
class Settlement:
    """Keys and arguments of the settle function (``lua.SETTLE_FN``) for a caller's script —
    the session commit settles in the same script that appends the turn (it adds the outcome)."""

    keys: list[str]
    args: list[Any]  # rid, actual tokens, tenant, event json


# A script runner for ``RedisQuota.reserve``: (keys, args) -> the script's reply.
ReserveRunner = Callable[[list[str], list[Any]], Awaitable[Any]]


class ReservationSkipped(Exception):
    """A caller's reservation script answered with a verdict of its own: nothing reserved."""

    def __init__(self, verdict: str) -> None:
        super().__init__(verdict)
        self.verdict = verdict


@dataclass(frozen=True, slots=True)
class Reservation:
    tenant: str
    rid: str
    tokens: int
    tpm_key: str


def _limit(value: int | None) -> int:
    return -1 if value is None else value


class RedisQuota:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._r = client
        self._ks = Keyspace(prefix)
        self._reserve = client.register_script(RESERVE_LUA)
        self._settle = client.register_script(SETTLE_LUA)
        self._held: dict[str, str] = {}  # reservation id -> inflight key, while this process
        # holds it (renew() forgets the ones settled meanwhile)

    # --- keys ---

    def used_key(self, tenant: str, month: str) -> str:
        return self._ks.quota(tenant).used(month)

    def stream_key(self) -> str:
        return self._ks.usage_stream

    def served_key(self) -> str:
        return self._ks.usage_served

    # --- operations ---

    def _run_reserve(self, keys: list[str], args: list[Any]) -> Awaitable[Any]:
        return self._reserve(keys=keys, args=args)  # type: ignore[no-any-return]

    async def reserve(self, tenant: str, limits: TenantLimits, tokens: int, expiry_s: float,
                      seed_month: Callable[[str, str], Awaitable[int]],
                      run: ReserveRunner | None = None) -> Reservation:
        """Reserve ``tokens`` for one step, or raise ResourceExhausted naming the quota.

        ``seed_month(tenant, month)`` gives the tokens PostgreSQL already holds for the month; it
        is called when Redis has no counter for it (new month, new tenant, Redis lost its data).
        ``run(keys, args)`` runs a caller's script around ``lua.RESERVE_FN`` instead of the plain
        one (the session store checks its session in the same call); a verdict of its own
        raises ReservationSkipped: nothing was reserved.
        """
        refusal = oversized(limits, tenant, tokens)
        if refusal is not None:
            raise refusal
        script = run or self._run_reserve
        q = self._ks.quota(tenant)
        allow_unseeded = 0
        for _ in range(3):
            now = time.time()
            month = month_of(now)
            minute = int(now // 60)
            tpm_key = q.tpm(minute)
            rid = uuid.uuid4().hex
            keys = [q.inflight, q.reserved, q.used(month), tpm_key]
            args: list[Any] = [now, rid, now + expiry_s, tokens, _limit(limits.max_inflight_steps),
                               _limit(limits.tokens_per_minute), _limit(limits.monthly_token_budget),
                               max(int(60 - now % 60), 1), int(seconds_to_next_month(now)),
                               allow_unseeded]
            raw = await guard(lambda: script(keys, args))  # noqa: B023
            verdict = bytes(raw[0]).decode()
            if verdict == "ok":
                self._held[rid] = keys[0]
                return Reservation(tenant, rid, tokens, tpm_key)
            if verdict == "unseeded":
                try:
                    total = await seed_month(tenant, month)
                except DatabaseUnavailable:
                    if limits.monthly_token_budget is not None:
                        raise  # a budget that cannot be checked is not granted (fail closed)
                    allow_unseeded = 1  # nothing to enforce: serve, seed when it is back
                    continue
                await guard(lambda: self._r.set(keys[2], total, nx=True,  # noqa: B023
                                                ex=MONTH_KEY_TTL_S))
                continue
            if verdict not in _DENIALS:
                raise ReservationSkipped(verdict)
            what, field = _DENIALS[verdict]
            raise ResourceExhausted(f"tenant {tenant} reached its {what} quota",
                                    subject=f"tenant:{tenant}:{field}",
                                    retry_after_s=float(int(raw[1])))
        raise ResourceExhausted(f"could not seed the monthly usage of tenant {tenant}",
                                subject=f"tenant:{tenant}:monthly_token_budget", retry_after_s=1)

    def settle_keys(self, reservation: Reservation, now: float) -> list[str]:
        q = self._ks.quota(reservation.tenant)
        return [q.inflight, q.reserved, q.used(month_of(now)), reservation.tpm_key,
                self._ks.usage_stream, self._ks.usage_served]

    def settlement(self, reservation: Reservation, event: UsageEvent) -> Settlement:
        """What settling ``reservation`` with ``event`` takes, for a script that settles it."""
        return Settlement(self.settle_keys(reservation, event.ended_at),
                          [reservation.rid, event.total_tokens, reservation.tenant,
                           event.to_json()])

    async def settle(self, reservation: Reservation, event: UsageEvent) -> None:
        """Settle a step that stored no turn (failed, cancelled): its tokens still count."""
        s = self.settlement(reservation, event)
        args = [*s.args, event.outcome]
        await guard(lambda: self._settle(keys=s.keys, args=args))
        self._held.pop(reservation.rid, None)

    @property
    def held(self) -> int:
        return len(self._held)

    async def renew(self, lease_s: float) -> None:
        """Extend every reservation this process holds to now + ``lease_s``. ``ZADD XX CH``
        never re-adds a reservation settled meanwhile (it answers 0, and it is forgotten)."""
        held = list(self._held.items())
        if not held:
            return
        expiry = time.time() + lease_s
        pipe = self._r.pipeline(transaction=False)
        for rid, key in held:
            pipe.zadd(key, {rid: expiry}, xx=True, ch=True)
        changed = await guard(pipe.execute)
        for (rid, _), still in zip(held, changed, strict=True):
            if not still:
                self._held.pop(rid, None)

    async def keep_alive(self, lease_s: float) -> None:
        """Renew held reservations four times a lease, for as long as this gateway lives."""
        while True:
            await asyncio.sleep(lease_s / 4)
            try:
                await self.renew(lease_s)
            except Unavailable:  # Redis away: the reservations may lapse; steps fail anyway
                log.warning("could not renew in-flight reservations", exc_info=True)

    async def month_used(self, tenant: str, month: str) -> int | None:
        raw = await guard(lambda: self._r.get(self.used_key(tenant, month)))
        return None if raw is None else int(raw)

    async def inflight(self, tenant: str) -> int:
        return int(await guard(lambda: self._r.zcard(self._ks.quota(tenant).inflight)))
