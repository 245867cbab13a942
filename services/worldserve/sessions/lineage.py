"""Copy-on-write forks as data (pure): which stored turn lists make up a session's history.

A session owns the turns it appended itself. A fork also inherits a *lineage*: an ordered list of
``(session_id, count)`` segments, each "the first ``count`` own turns of that ancestor". Forking
copies the parent's lineage (truncated at the fork point) plus one segment for the parent's own
turns — work proportional to the tree's depth, never to the history's length; no turn is copied.
"""

from __future__ import annotations

Segment = tuple[str, int]


def base_count(lineage: list[Segment]) -> int:
    """Turns a session inherits (its own turns are numbered after these)."""
    return sum(count for _, count in lineage)


def fork_lineage(parent_id: str, parent_lineage: list[Segment], parent_own: int,
                 at_turn: int) -> list[Segment]:
    """The lineage of a child that shares the parent's first ``at_turn`` turns."""
    if at_turn < 0 or at_turn > base_count(parent_lineage) + parent_own:
        raise ValueError(f"at_turn {at_turn} is outside the parent's history")
    out: list[Segment] = []
    remaining = at_turn
    for sid, count in [*parent_lineage, (parent_id, parent_own)]:
        if remaining <= 0:
            break
        take = min(count, remaining)
        if take > 0:
            out.append((sid, take))
        remaining -= take
    return out
