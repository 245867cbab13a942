"""An OpenEnv episode in worldserve terms (pure): reset parameters, step metadata, the end.

``reset`` opens a worldserve session from its parameters; each ``step`` is one session step whose
receipt (turn, usage, fault kind, model version, reasoning) travels in the observation's metadata;
an episode ends after ``max_turns`` steps or when the deployment's terminate predicate says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from worldserve.domains.templates import Domain
from worldserve.domains.tools import ToolSpec
from worldserve.sdk.types import FaultPolicy, SessionInfo, StepResult

_TEXT = ("task_instruction", "initial_state", "model", "system_prompt")
_NUMBERS = {"temperature": float, "top_p": float, "max_tokens": int, "reasoning_budget": int,
            "ttl_seconds": int}
KNOWN = {"domain", "tools", "faults", "labels", "max_turns", "seed", "episode_id", *_TEXT,
         *_NUMBERS}


@dataclass(frozen=True)
class EpisodeSpec:
    """What ``reset`` asks for: the session to open and when the episode ends."""

    domain: str
    max_turns: int
    create: dict[str, Any] = field(default_factory=dict)  # keyword arguments of create_session


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _faults(value: object) -> FaultPolicy:
    if not isinstance(value, Mapping):
        raise ValueError("faults must be an object: {kinds, rate, turns, seed}")
    unknown = set(value) - {"kinds", "rate", "turns", "seed"}
    if unknown:
        raise ValueError(f"faults: unknown field(s) {', '.join(sorted(unknown))}")
    seed = value.get("seed")
    return FaultPolicy(kinds=tuple(str(k) for k in value.get("kinds") or ()),
                       rate=float(value.get("rate") or 0.0),
                       turns=tuple(_int("faults.turns", t) for t in value.get("turns") or ()),
                       seed=None if seed is None else _int("faults.seed", seed))


def episode_spec(params: Mapping[str, Any], default_max_turns: int) -> EpisodeSpec:
    """The episode a reset's parameters describe; ValueError naming the first bad one."""
    unknown = set(params) - KNOWN
    if unknown:
        raise ValueError(f"unknown reset parameter(s): {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(KNOWN))}")
    domain = str(params.get("domain") or "TERMINAL").upper()
    if domain not in Domain.__members__:
        raise ValueError(f"unknown domain {domain!r}; one of {', '.join(Domain.__members__)}")
    create: dict[str, Any] = {}
    for name in _TEXT:
        if params.get(name) is not None:
            if not isinstance(params[name], str):
                raise ValueError(f"{name} must be a string")
            create[name] = params[name]
    for name, kind in _NUMBERS.items():
        if params.get(name) is not None:
            create[name] = _int(name, params[name]) if kind is int else float(params[name])
    if params.get("seed") is not None:
        create["seed"] = _int("seed", params["seed"])
    if params.get("faults") is not None:
        create["faults"] = _faults(params["faults"])
    tools = params.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools):
        raise ValueError("tools must be a list of MCP tool objects {name, description, "
                         "inputSchema}")
    create["tools"] = [ToolSpec.from_dict(t) for t in tools]
    labels = dict(params.get("labels") or {})
    if params.get("episode_id"):
        labels["openenv-episode"] = str(params["episode_id"])
    create["labels"] = {str(k): str(v) for k, v in labels.items()}
    max_turns = _int("max_turns", params.get("max_turns", default_max_turns))
    if max_turns < 0:
        raise ValueError("max_turns must not be negative (0 = no limit)")
    return EpisodeSpec(domain, max_turns, create)


def session_metadata(info: SessionInfo) -> dict[str, Any]:
    return {"session_id": info.session_id, "domain": info.domain,
            "model_version": info.model_version, "turn": info.turn_count,
            "seed": info.seed, "tools": [t.to_dict() for t in info.tools]}


def step_metadata(step: StepResult) -> dict[str, Any]:
    """A step's receipt as the observation's metadata."""
    return {"session_id": step.session_id, "turn": step.turn, "reasoning": step.reasoning,
            "fault_kind": step.fault_kind, "model_version": step.model_version,
            "finish_reason": step.finish_reason, "seed": step.seed,
            "usage": {"input_tokens": step.usage.input_tokens,
                      "output_tokens": step.usage.output_tokens,
                      "reasoning_tokens": step.usage.reasoning_tokens}}


def over_turns(turn: int, max_turns: int) -> bool:
    return max_turns > 0 and turn >= max_turns
