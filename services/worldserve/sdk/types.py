"""Typed results of the SDK (plain dataclasses, no protobuf)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from worldserve.domains.tools import ToolSpec


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
    preview: bool = False  # a counterfactual (batch_step with commit=False): not stored
    sample_index: int = 0
    seed: int | None = None


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
    fault_kind: str = ""
    seed: int | None = None
    imported: bool = False


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
    parent_session_id: str = ""
    fork_turn: int = 0  # turns shared with the parent
    tools: list[ToolSpec] = field(default_factory=list)  # MCP sessions: the declared tools


@dataclass(frozen=True, slots=True)
class FaultPolicy:
    """Injected environment failures: kinds (empty = all of the domain's), a per-turn rate
    and/or 1-based turn numbers, and the policy's own seed."""

    kinds: tuple[str, ...] = ()
    rate: float = 0.0
    turns: tuple[int, ...] = ()
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class BatchStep:
    session_id: str
    action: str
    expected_turn: int | None = None
    current_state: str | None = None


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One answer of ``batch_step``: a result, or the error of that item alone."""

    request_index: int
    sample_index: int
    result: StepResult | None
    error: Exception | None


@dataclass(frozen=True, slots=True)
class Export:
    format: str
    content: bytes
    metadata: dict[str, object]


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
