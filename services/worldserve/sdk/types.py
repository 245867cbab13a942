"""Typed results of the SDK (plain dataclasses, no protobuf)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int


@dataclass(frozen=True, slots=True)
class StepResult:
    session_id: str
    turn: int
    observation: str
    reasoning: str
    usage: Usage
    model_version: str
    finish_reason: str
    fault_kind: str = ""
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Turn:
    index: int
    action: str
    observation: str
    reasoning: str
    usage: Usage
    model_version: str
    finish_reason: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: str
    domain: str
    model_version: str
    task_instruction: str
    initial_state: str
    turn_count: int
    ttl_seconds: int
    seed: int | None
    labels: dict[str, str]
    created_at: datetime
    turns: list[Turn] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ObservationDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Restart:
    """The model's first answer was unusable: drop the deltas received so far."""

    reason: str


StreamEvent = ReasoningDelta | ObservationDelta | Restart | StepResult
