"""The per-key request rate (pure token buckets)."""

from __future__ import annotations

import pytest

from worldserve.quota.rate import RequestRate


def test_a_key_gets_its_burst_then_its_rate() -> None:
    rate = RequestRate(rate=10, burst=3)
    assert [rate.admit("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rate.admit("a", 0.0) == pytest.approx(0.1)  # a whole token is 1/10 s away
    assert rate.admit("a", 0.05) == pytest.approx(0.05)  # a refusal takes nothing
    assert rate.admit("a", 0.1) == 0.0
    assert rate.admit("a", 0.1) > 0
    assert rate.admit("b", 0.1) == 0.0  # another key has its own bucket
    assert [rate.admit("a", 100.0) for _ in range(4)][:3] == [0.0] * 3  # refills to the burst only


def test_a_clock_going_back_takes_nothing_and_gives_nothing() -> None:
    rate = RequestRate(rate=1, burst=1)
    assert rate.admit("a", 10.0) == 0.0
    assert rate.admit("a", 5.0) == pytest.approx(1.0)


def test_the_idlest_bucket_goes_first_and_comes_back_full() -> None:
    rate = RequestRate(rate=1, burst=1, max_keys=2)
    rate.admit("a", 0.0)
    rate.admit("b", 0.0)
    rate.admit("c", 0.0)  # drops a, the idlest
    assert rate.admit("a", 0.0) == 0.0  # a new, full bucket
    assert rate.admit("c", 0.0) > 0  # c kept its empty one


def test_a_rate_must_admit_something() -> None:
    with pytest.raises(ValueError, match="rate > 0"):
        RequestRate(rate=0, burst=1)
    with pytest.raises(ValueError, match="burst >= 1"):
        RequestRate(rate=1, burst=0.5)


def test_a_limit_switched_off_stays_off_in_a_child_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """``worldserve up`` and the benches hand settings to children as WORLDSERVE_* variables: a
    None must arrive as None, not fall back to a default that is on."""
    from worldserve.dev.launcher import settings_env
    from worldserve.settings import Settings

    assert Settings().requests_per_second_per_key is not None  # on by default
    parent = Settings(requests_per_second_per_key=None, max_inflight_steps_per_tenant=None,
                      request_burst_per_key=7)
    env = settings_env(parent)
    for name in list(env):
        monkeypatch.setenv(name, env[name])
    child = Settings()
    assert child.requests_per_second_per_key is None and child.max_inflight_steps_per_tenant is None
    assert child.request_burst_per_key == 7 and child == parent
