"""The usage event: one per step that reached the model (pure: no I/O).

Written by the gateway into the Redis usage stream in the same Lua call that settles the step's
token reservation (and, for a stored turn, appends it), so an event exists exactly when tokens
were spent. ``event_id`` is unique; the accounting worker inserts idempotently on it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True, slots=True)
class UsageEvent:
    event_id: str
    tenant: str
    session_id: str
    model_version: str
    domain: str
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    latency_ms: int
    fault_kind: str
    started_at: float  # epoch seconds
    ended_at: float
    outcome: str = "ok"  # ok | replay | conflict | limit | missing | error | cancelled

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> str:  # not asdict(): it deep-copies every value (issue 15)
        return json.dumps({name: getattr(self, name) for name in _EVENT_FIELDS},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> UsageEvent:
        return cls(**json.loads(raw))


_EVENT_FIELDS = tuple(f.name for f in fields(UsageEvent))


def from_stream_fields(fields: dict[bytes, bytes]) -> UsageEvent:
    """Decode a stream entry: ``e`` holds the event JSON, ``o`` the commit outcome (if any)."""
    event = UsageEvent.from_json(fields[b"e"])
    outcome = fields.get(b"o")
    if outcome:
        event = UsageEvent(**{**asdict(event), "outcome": outcome.decode()})
    return event


def utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def hour_of(ts: float) -> dt.datetime:
    return utc(ts).replace(minute=0, second=0, microsecond=0)
