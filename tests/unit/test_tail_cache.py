"""The gateway's in-memory session tails (``sessions.tails``): what a committed step leaves
there, what the budget keeps, and what makes an entry go."""

from __future__ import annotations

from worldserve.sessions.records import LoadedSession, Sampling, SessionRecord, TurnRecord
from worldserve.sessions.tails import ENTRY_OVERHEAD_BYTES, TailCache


def record(sid: str, tenant: str = "t") -> SessionRecord:
    return SessionRecord(sid, tenant, "TERMINAL", "m@1", "task", "state", "sys",
                         Sampling(0.0, 1.0, 64), None, {}, {}, 60, 0.0)


def turn(action: str, observation: str = "obs") -> TurnRecord:
    return TurnRecord(action, observation, "", 1, 2, 1, "m@1", "stop", 0.0)


def test_a_commit_appends_the_turn_and_keeps_only_the_tail() -> None:
    cache = TailCache(1 << 20, tail=3)
    rec = record("s_1")
    before = LoadedSession(rec, [turn("a"), turn("b"), turn("c")], 7, 4)
    cache.committed(before, turn("d"), 8)
    got = cache.get("t", "s_1")
    assert got is not None
    assert [t.action for t in got.turns] == ["b", "c", "d"]
    assert got.turn_count == 8 and got.first_index == 5 and got.record is rec
    # a short session keeps all its turns, indexed from 0
    cache.committed(LoadedSession(record("s_2"), [], 0, 0), turn("x"), 1)
    short = cache.get("t", "s_2")
    assert short is not None and short.first_index == 0 and len(short.turns) == 1


def test_a_count_that_does_not_follow_drops_the_entry() -> None:
    cache = TailCache(1 << 20, tail=3)
    rec = record("s_1")
    cache.committed(LoadedSession(rec, [], 0, 0), turn("a"), 1)
    assert cache.get("t", "s_1") is not None
    cache.committed(LoadedSession(rec, [turn("a")], 1, 0), turn("b"), 5)  # not 2: unknown turns
    assert cache.get("t", "s_1") is None and cache.size == 0


def test_tenants_are_apart_and_drop_forgets() -> None:
    cache = TailCache(1 << 20, tail=2)
    cache.committed(LoadedSession(record("s_1", "a"), [], 0, 0), turn("x"), 1)
    assert cache.get("b", "s_1") is None
    cache.drop("a", "s_1")
    assert cache.get("a", "s_1") is None and len(cache) == 0 and cache.size == 0


def test_the_budget_evicts_the_least_recently_used() -> None:
    rec_size = len("state") + len("task") + len("sys")
    one = ENTRY_OVERHEAD_BYTES + rec_size + len("x") + len("o" * 100)
    cache = TailCache(3 * one, tail=2)
    for sid in ("s_1", "s_2", "s_3"):
        cache.committed(LoadedSession(record(sid), [], 0, 0), turn("x", "o" * 100), 1)
    assert len(cache) == 3 and cache.size == 3 * one
    assert cache.get("t", "s_1") is not None  # now the most recently used
    cache.committed(LoadedSession(record("s_4"), [], 0, 0), turn("x", "o" * 100), 1)
    assert cache.get("t", "s_2") is None  # the least recently used went
    assert {sid for sid in ("s_1", "s_3", "s_4") if cache.get("t", sid)} == {"s_1", "s_3", "s_4"}
    assert cache.size <= cache.budget
    # an entry larger than the whole budget is not kept, and takes nothing with it
    cache.committed(LoadedSession(record("s_5"), [], 0, 0), turn("x", "o" * 10 * one), 1)
    assert cache.get("t", "s_5") is None and len(cache) == 3


def test_a_budget_of_zero_keeps_nothing() -> None:
    cache = TailCache(0, tail=4)
    cache.committed(LoadedSession(record("s_1"), [], 0, 0), turn("a"), 1)
    assert cache.get("t", "s_1") is None and len(cache) == 0
