"""Admission of a step against a session's turn list (pure; the Redis commit re-checks atomically).

``expected_turn`` is optimistic concurrency: the step applies only when the session has exactly
that many turns. A retry of a step already applied (same position, same action) gets the stored
turn back instead of a second turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from worldserve.sessions.records import TurnRecord


class Verdict(Enum):
    APPLY = "apply"
    REPLAY = "replay"
    CONFLICT = "conflict"
    LIMIT = "limit"


@dataclass(frozen=True, slots=True)
class Admission:
    verdict: Verdict
    turn_count: int
    stored: TurnRecord | None = None
    stored_index: int = 0


def admit(turns: list[TurnRecord], action: str, expected_turn: int | None, max_turns: int,
          first_index: int = 0) -> Admission:
    """``turns`` are the session's turns from index ``first_index`` on (the latest ones); the
    caller loads further back when a retry names a turn before them (``needs_older``)."""
    n = first_index + len(turns)
    if expected_turn is not None and expected_turn != n:
        if first_index <= expected_turn < n and turns[expected_turn - first_index].action == action:
            return Admission(Verdict.REPLAY, n, turns[expected_turn - first_index],
                             expected_turn + 1)
        return Admission(Verdict.CONFLICT, n)
    if n >= max_turns:
        return Admission(Verdict.LIMIT, n)
    return Admission(Verdict.APPLY, n)


def needs_older(expected_turn: int | None, first_index: int) -> bool:
    """A retry of a turn older than the loaded ones: its stored answer must be read."""
    return expected_turn is not None and 0 <= expected_turn < first_index
