"""Pure tenancy logic: quota arithmetic, key format and hashing, quota merging, usage events."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from worldserve.errors import PermissionDenied
from worldserve.quota.events import UsageEvent, from_stream_fields, hour_of
from worldserve.quota.limits import (
    TenantLimits,
    check_allowed,
    month_bounds,
    month_of,
    reservation_tokens,
    seconds_to_next_month,
)
from worldserve.tenancy.keys import PREFIX_LEN, generate_key, hash_key, key_prefix, matches
from worldserve.tenancy.records import QuotaSpec


def test_reservation_covers_the_prompt_and_max_tokens() -> None:
    assert reservation_tokens(1000, 64, 1.0) == 1064
    assert reservation_tokens(1001, 64, 4.0) == 251 + 64  # rounds up
    assert reservation_tokens(0, 1, 1.0) == 1


def test_months_are_utc_calendar_months() -> None:
    ts = dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.UTC).timestamp()
    assert month_of(ts) == "202612"
    assert month_of(ts + 1) == "202701"
    start, end = month_bounds("202612")
    assert (start.isoformat(), end.isoformat()) == ("2026-12-01T00:00:00+00:00",
                                                    "2027-01-01T00:00:00+00:00")
    assert month_bounds("202602")[1].day == 1 and month_bounds("202602")[1].month == 3
    assert seconds_to_next_month(ts) == 1.0


def test_allowed_models_and_domains() -> None:
    everything = TenantLimits()
    check_allowed(everything, "t", "m@1", "", "TERMINAL")
    only_mcp = TenantLimits(allowed_domains=("MCP",))
    check_allowed(only_mcp, "t", "m@1", "", "MCP")
    with pytest.raises(PermissionDenied, match="domain TERMINAL"):
        check_allowed(only_mcp, "t", "m@1", "", "TERMINAL")
    by_name = TenantLimits(allowed_models=("m",))
    check_allowed(by_name, "t", "m@1", "", "MCP")  # a bare name allows every version
    check_allowed(TenantLimits(allowed_models=("m@1",)), "t", "m@1", "", "MCP")
    check_allowed(TenantLimits(allowed_models=("stable",)), "t", "m@1", "stable", "MCP")
    with pytest.raises(PermissionDenied, match="model m@2"):
        check_allowed(TenantLimits(allowed_models=("m@1",)), "t", "m@2", "", "MCP")
    with pytest.raises(PermissionDenied):
        check_allowed(TenantLimits(allowed_models=()), "t", "m@1", "", "MCP")  # empty = none


def test_quota_spec_overrides_defaults_only_where_set() -> None:
    defaults = TenantLimits(max_sessions=1000, max_inflight_steps=64)
    merged = QuotaSpec(max_sessions=5, monthly_token_budget=10).over(defaults)
    assert merged == TenantLimits(max_sessions=5, max_inflight_steps=64,
                                  monthly_token_budget=10)
    assert QuotaSpec().over(defaults) == defaults
    assert QuotaSpec(max_sessions=0).over(defaults).max_sessions == 0  # 0 is a limit, not unset


def test_keys_are_random_hashed_and_compared_by_hash() -> None:
    a, b = generate_key(), generate_key()
    assert a.secret != b.secret and a.key_id != b.key_id
    assert a.secret.startswith("wsk_") and len(a.secret) > 40
    assert a.prefix == a.secret[:PREFIX_LEN] == key_prefix(a.secret)
    assert a.secret_hash == hash_key(a.secret) and a.secret not in a.secret_hash
    assert matches(a.secret, a.secret_hash)
    assert not matches(b.secret, a.secret_hash)
    assert not matches(a.secret + "x", a.secret_hash)
    given = generate_key("my-dev-key")
    assert given.secret == "my-dev-key" and matches("my-dev-key", given.secret_hash)


def test_usage_event_round_trip_and_stream_outcome() -> None:
    e = UsageEvent("id1", "t", "s", "m@1", "MCP", 10, 5, 2, 120, "", 100.0, 101.5)
    assert UsageEvent.from_json(e.to_json()) == e
    assert e.total_tokens == 15
    decoded = from_stream_fields({b"e": e.to_json().encode(), b"o": b"conflict"})
    assert decoded.outcome == "conflict" and decoded.event_id == "id1"
    assert from_stream_fields({b"e": e.to_json().encode()}).outcome == "ok"
    with pytest.raises(KeyError):
        from_stream_fields({b"x": b"{}"})
    assert hour_of(3600 * 5 + 59).hour == 5


def test_ttl_cache_shares_one_load_and_expires() -> None:
    from worldserve.db.directory import _TtlCache

    now = [0.0]
    cache = _TtlCache(4.0, clock=lambda: now[0])
    loads: list[int] = []

    async def load() -> int:
        loads.append(1)
        await asyncio.sleep(0.01)
        return len(loads)

    async def scenario() -> None:
        first = await asyncio.gather(*(cache.get("k", load) for _ in range(10)))
        assert first == [1] * 10 and len(loads) == 1  # concurrent misses: one query
        now[0] = 3.9
        assert await cache.get("k", load) == 1
        now[0] = 4.1
        assert await cache.get("k", load) == 2  # expired: loaded again

    asyncio.run(scenario())


def test_ttl_cache_serves_stale_answers_while_the_database_is_down() -> None:
    from worldserve.db.directory import _TtlCache
    from worldserve.errors import DatabaseUnavailable

    now = [0.0]
    cache = _TtlCache(4.0, clock=lambda: now[0], stale_s=60.0)
    up = [True]

    async def load() -> str:
        if not up[0]:
            raise DatabaseUnavailable("PostgreSQL unreachable")
        return "tenant-a"

    async def scenario() -> None:
        assert await cache.get("k", load) == "tenant-a"
        up[0] = False
        now[0] = 30.0  # expired, but within the stale window: the last answer
        assert await cache.get("k", load) == "tenant-a"
        with pytest.raises(DatabaseUnavailable):
            await cache.get("never-seen", load)  # cannot be checked: refused
        now[0] = 70.0  # beyond the stale window: fail closed
        with pytest.raises(DatabaseUnavailable):
            await cache.get("k", load)
        up[0] = True
        assert await cache.get("k", load) == "tenant-a"

    asyncio.run(scenario())
