"""The latest turns of the sessions this process committed to last, in memory (pure: no I/O).

A step needs its session's record and the turns its prompt shows (``turns_needed``). After this
gateway commits a turn it knows both exactly, so the session's next step here renders from them
and, in the one script that reserves its tokens, checks that the session is still there with the
same number of turns (``SessionStore.reserve_if_current``): one round trip and no JSON decoding
instead of a load and a reservation. Any other answer drops the entry and the step loads as
usual, so a session stepped through several gateways is served exactly as before, only without
the saving. A session's record is written once, before its first step, and a stored turn never
changes (docs/ARCHITECTURE.md, "keyspace"): the turn count is the whole version.
"""

from __future__ import annotations

from collections import OrderedDict

from worldserve.sessions.records import LoadedSession, SessionRecord, TurnRecord

ENTRY_OVERHEAD_BYTES = 2048  # the objects around the text, roughly


def _turn_size(turn: TurnRecord) -> int:
    return len(turn.action) + len(turn.observation) + len(turn.reasoning) + len(
        turn.current_state)


def _record_size(record: SessionRecord) -> int:
    return len(record.initial_state) + len(record.task_instruction) + len(record.system_prompt)


class TailCache:
    """Tails of at most ``budget_bytes`` of text in all (least recently used go first); a
    budget of 0 keeps none. ``tail``: how many of the latest turns a step reads."""

    def __init__(self, budget_bytes: int, tail: int) -> None:
        self.budget = max(budget_bytes, 0)
        self.tail = max(tail, 0)
        self.size = 0
        self._entries: OrderedDict[tuple[str, str], tuple[LoadedSession, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, tenant: str, session_id: str) -> LoadedSession | None:
        key = (tenant, session_id)
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def drop(self, tenant: str, session_id: str) -> None:
        entry = self._entries.pop((tenant, session_id), None)
        if entry is not None:
            self.size -= entry[1]

    def committed(self, before: LoadedSession, turn: TurnRecord, turn_count: int) -> None:
        """``turn`` was appended to the session as ``before`` showed it: now ``turn_count``."""
        record = before.record
        self.drop(record.tenant, record.session_id)
        if not self.budget or turn_count != before.turn_count + 1:
            return
        turns = [*before.turns, turn][-self.tail:] if self.tail else []
        size = ENTRY_OVERHEAD_BYTES + _record_size(record) + sum(_turn_size(t) for t in turns)
        if size > self.budget:
            return
        self._entries[(record.tenant, record.session_id)] = (
            LoadedSession(record, turns, turn_count, turn_count - len(turns)), size)
        self.size += size
        while self.size > self.budget:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.size -= dropped
