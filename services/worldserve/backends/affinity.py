"""Replica choice (pure): rendezvous hashing on the session, with a bounded-load fallback.

Every gateway computes the same order for a session without coordination, so a session's steps
(and its forks', keyed by the root session) land on the replica that holds its prompt prefix in
the KV cache; removing a replica moves only that replica's sessions. A replica already carrying
more than ``bound`` × its fair share of in-flight calls is skipped for the next in order — but
never below ``floor`` in-flight calls: a model server batches that many at almost no extra cost
per call, and moving a session away from its KV cache costs a whole prefill. (Without the floor,
two sessions in flight on one replica of two would already push the third elsewhere.) A session
that had to move stays on its new replica while that one is under the bound.
"""

from __future__ import annotations

import hashlib
import math


def _score(key: str, replica: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}|{replica}".encode(), digest_size=8).digest(),
                          "big")


def rendezvous_order(key: str, replicas: list[str]) -> list[str]:
    """Replicas in this key's preference order (highest random weight first)."""
    return sorted(replicas, key=lambda r: _score(key, r), reverse=True)


def choose(key: str, replicas: list[str], load: dict[str, int], bound: float = 1.25,
           floor: int = 1, previous: str | None = None) -> list[str]:
    """The order to try replicas in: the preferred one unless it is over the load bound.

    ``previous`` — the replica that served the key's last call — goes first while it is under
    the bound: after a spill the session stays where its KV cache now is instead of moving back.
    """
    order = rendezvous_order(key, replicas)
    if not order:
        return []
    fair = math.ceil(bound * (sum(load.get(r, 0) for r in order) + 1) / len(order))
    cap = max(1, floor, fair)
    under = [r for r in order if load.get(r, 0) < cap]
    if previous in under:
        under.remove(previous)
        under.insert(0, previous)
    return under + [r for r in order if r not in under]
