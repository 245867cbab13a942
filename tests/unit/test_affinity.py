"""Replica choice: rendezvous hashing is stable, balanced, minimal on change; load is bounded."""

from __future__ import annotations

from collections import Counter

from worldserve.backends.affinity import choose, rendezvous_order

REPLICAS = ["10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"]


def test_rendezvous_is_stable_balanced_and_minimal() -> None:
    keys = [f"s_{i}" for i in range(3000)]
    first = {k: rendezvous_order(k, REPLICAS)[0] for k in keys}
    assert first == {k: rendezvous_order(k, list(reversed(REPLICAS)))[0] for k in keys}
    counts = Counter(first.values())
    assert all(800 < c < 1200 for c in counts.values()), counts
    # a replica goes away: only its sessions move
    survivors = REPLICAS[:2]
    moved = [k for k in keys if rendezvous_order(k, survivors)[0] != first[k]]
    assert all(first[k] == REPLICAS[2] for k in moved)
    assert len(moved) == counts[REPLICAS[2]]


def test_bounded_load_skips_an_overloaded_replica() -> None:
    key = "s_hot"
    preferred = rendezvous_order(key, REPLICAS)[0]
    assert choose(key, REPLICAS, dict.fromkeys(REPLICAS, 0))[0] == preferred
    busy = {r: 0 for r in REPLICAS} | {preferred: 10}
    order = choose(key, REPLICAS, busy)
    assert order[0] != preferred and order[-1] == preferred
    assert choose(key, [], {}) == []


def test_below_the_floor_a_session_stays_on_its_replica() -> None:
    key = "s_warm"
    preferred = rendezvous_order(key, REPLICAS)[0]
    light = {r: 0 for r in REPLICAS} | {preferred: 2}  # 2 in flight there, none elsewhere
    assert choose(key, REPLICAS, light)[0] != preferred  # no floor: the bound moves it
    assert choose(key, REPLICAS, light, floor=8)[0] == preferred  # it can batch 8: stays
    heavy = {r: 0 for r in REPLICAS} | {preferred: 8}
    assert choose(key, REPLICAS, heavy, floor=8)[0] != preferred  # at the floor: moves


def test_a_session_that_moved_stays_on_its_new_replica_while_under_the_bound() -> None:
    key = "s_moved"
    preferred, other = rendezvous_order(key, REPLICAS)[:2]
    idle = dict.fromkeys(REPLICAS, 0)
    assert choose(key, REPLICAS, idle, previous=other)[0] == other  # its KV is there now
    assert choose(key, REPLICAS, idle, previous="gone")[0] == preferred
    busy = idle | {other: 10}
    assert choose(key, REPLICAS, busy, previous=other)[0] == preferred  # over the bound: back
