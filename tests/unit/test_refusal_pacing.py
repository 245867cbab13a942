"""Pacing a key's refusals (pure token buckets), and settings that switch a limit off."""

from __future__ import annotations

import pytest

from worldserve import errors
from worldserve.quota.rate import RefusalPacer


def test_a_key_gets_its_burst_then_waits_its_turn() -> None:
    pacer = RefusalPacer(rate=10, burst=3)
    assert [pacer.delay("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.delay("a", 0.0) == pytest.approx(0.1)
    assert pacer.delay("a", 0.0) == pytest.approx(0.2)  # at once: they queue
    assert pacer.delay("a", 0.3) == pytest.approx(0.0)  # the queue has drained: its own turn
    assert pacer.delay("a", 0.4) == pytest.approx(0.0)  # 10 a second is the rate
    assert pacer.delay("a", 0.4) == pytest.approx(0.1)  # faster is held
    assert pacer.delay("b", 0.4) == 0.0  # another key has its own bucket
    assert [pacer.delay("a", 100.0) for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


def test_no_refusal_is_held_longer_than_the_most_a_bucket_may_owe() -> None:
    pacer = RefusalPacer(rate=10, burst=1, max_delay_s=0.5)
    waits = [pacer.delay("a", 0.0) for _ in range(50)]
    assert max(waits) == pytest.approx(0.5) and waits[:6] == pytest.approx([0, .1, .2, .3, .4, .5])


def test_a_clock_going_back_gives_nothing() -> None:
    pacer = RefusalPacer(rate=1, burst=1)
    assert pacer.delay("a", 10.0) == 0.0
    assert pacer.delay("a", 5.0) == pytest.approx(1.0)


def test_the_idlest_bucket_goes_first_and_comes_back_full() -> None:
    pacer = RefusalPacer(rate=1, burst=1, max_keys=2)
    pacer.delay("a", 0.0)
    pacer.delay("b", 0.0)
    pacer.delay("c", 0.0)  # drops a, the idlest
    assert pacer.delay("a", 0.0) == 0.0  # a new, full bucket
    assert pacer.delay("c", 0.0) > 0  # c kept its empty one


def test_pacing_must_let_something_through() -> None:
    for bad in ({"rate": 0, "burst": 1}, {"rate": 1, "burst": 0.5},
                {"rate": 1, "burst": 1, "max_delay_s": 0}):
        with pytest.raises(ValueError, match="pacing needs"):
            RefusalPacer(**bad)  # type: ignore[arg-type]


def test_refusals_are_what_asking_again_at_once_cannot_change() -> None:
    refusals = {c.code_name for c in (errors.InvalidArgument, errors.NotFound,
                                      errors.PermissionDenied, errors.AlreadyExists,
                                      errors.FailedPrecondition, errors.ResourceExhausted)
                if c.refusal}
    assert len(refusals) == 6
    for retryable in (errors.Aborted, errors.Unavailable, errors.ModelOutputError,
                      errors.DeadlineExceeded, errors.Unauthenticated, errors.WorldserveError):
        assert not retryable.refusal, retryable


def test_a_limit_switched_off_stays_off_in_a_child_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """``worldserve up`` and the benches hand settings to children as WORLDSERVE_* variables: a
    None must arrive as None, not fall back to a default that is on."""
    from worldserve.dev.launcher import settings_env
    from worldserve.settings import Settings

    assert Settings().refusals_per_second_per_key is not None  # on by default
    parent = Settings(refusals_per_second_per_key=None, max_inflight_steps_per_tenant=None,
                      refusal_burst_per_key=7)
    env = settings_env(parent)
    for name in list(env):
        monkeypatch.setenv(name, env[name])
    child = Settings()
    assert child.refusals_per_second_per_key is None and child.max_inflight_steps_per_tenant is None
    assert child.refusal_burst_per_key == 7 and child == parent
