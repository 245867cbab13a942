"""A session and its turns as plain data, with the JSON form they are stored in."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from worldserve.domains.tools import ToolSpec, state_with_tools


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float
    top_p: float
    max_tokens: int
    reasoning_budget: int = 0


@dataclass(frozen=True, slots=True)
class SessionRecord:
    session_id: str
    tenant: str
    domain: str
    model_version: str
    task_instruction: str
    initial_state: str
    system_prompt: str
    sampling: Sampling
    seed: int | None
    faults: dict[str, Any]
    labels: dict[str, str]
    ttl_seconds: int
    created_at: float
    parent_session_id: str = ""
    # copy-on-write history: (ancestor session id, its first N own turns), oldest first
    lineage: list[tuple[str, int]] = field(default_factory=list)
    # MCP sessions: the declared tools, in MCP's spelling (domains.tools.ToolSpec.to_dict)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def tool_specs(self) -> list[ToolSpec]:
        return [ToolSpec.from_dict(t) for t in self.tools]

    def prompt_state(self) -> str:
        """The initial state as the model reads it (the tools block first, if any)."""
        return state_with_tools(self.tool_specs(), self.initial_state)

    def to_json(self) -> str:
        data = {name: getattr(self, name) for name in _SESSION_FIELDS}
        data["sampling"] = {name: getattr(self.sampling, name) for name in _SAMPLING_FIELDS}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> SessionRecord:
        data = json.loads(raw)
        data["sampling"] = Sampling(**data["sampling"])
        data["lineage"] = [(sid, int(n)) for sid, n in data.get("lineage", [])]
        return cls(**data)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One applied step. Its 1-based index is its position in the session's turn list."""

    action: str
    observation: str
    reasoning: str
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    model_version: str
    finish_reason: str
    created_at: float
    current_state: str = ""
    fault_kind: str = ""
    seed: int | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    imported: bool = False  # from a recorded (real) trajectory, not generated

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in _TURN_FIELDS},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> TurnRecord:
        return cls(**json.loads(raw))


# Field names, read once: ``dataclasses.asdict`` deep-copies every value on every call, which
# was a tenth of the gateway's own Python time per step (issue 15).
_SAMPLING_FIELDS = tuple(f.name for f in fields(Sampling))
_SESSION_FIELDS = tuple(f.name for f in fields(SessionRecord))
_TURN_FIELDS = tuple(f.name for f in fields(TurnRecord))


@dataclass(frozen=True, slots=True)
class LoadedSession:
    """A session as a step reads it: its record and its latest turns."""

    record: SessionRecord
    turns: list[TurnRecord]  # empty unless asked for; the latest ones only when a tail was
    turn_count: int
    first_index: int = 0  # index of turns[0] in the whole history
