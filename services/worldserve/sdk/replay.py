"""Replay: re-simulate a recorded session's actions against another model version, turn by turn.

    report = replay(client, "s_…", model="qwen-agentworld@2")
    for d in report.diffs: print(d.turn, d.exact, d.similarity)

The recorded session is read through ``export(format="json")`` (its system prompt, task, state and
per-turn current states included); a new session with the same set-up is created on ``model``
and every recorded action is stepped in order. Differences are reported per turn (exact match
and a character-level similarity ratio), plus which turns had injected faults.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from worldserve.sdk.client import Client


@dataclass(frozen=True, slots=True)
class TurnDiff:
    turn: int
    action: str
    recorded: str
    replayed: str
    recorded_fault: str = ""
    replayed_fault: str = ""

    @property
    def exact(self) -> bool:
        return self.recorded == self.replayed

    @property
    def similarity(self) -> float:
        return difflib.SequenceMatcher(None, self.recorded, self.replayed).ratio()


@dataclass(frozen=True, slots=True)
class ReplayReport:
    source_session: str
    source_model: str
    replay_session: str
    replay_model: str
    diffs: list[TurnDiff] = field(default_factory=list)

    @property
    def exact_rate(self) -> float:
        return sum(d.exact for d in self.diffs) / len(self.diffs) if self.diffs else 1.0

    @property
    def mean_similarity(self) -> float:
        return (sum(d.similarity for d in self.diffs) / len(self.diffs)) if self.diffs else 1.0


def _source(client: Client, session_id: str) -> dict[str, Any]:
    doc = json.loads(client.export(session_id, format="json").content)
    return dict(doc["sessions"][0])


def replay(client: Client, session_id: str, *, model: str = "", seed: int | None = None,
           temperature: float | None = None, target: Client | None = None,
           close: bool = True) -> ReplayReport:
    """Replay ``session_id`` (read with ``client``) on ``model`` via ``target`` (default: same).

    Faults are replayed with the recorded policy, so an injected failure recurs on the same
    turn. ``seed`` defaults to the recorded session's.
    """
    src = _source(client, session_id)
    runner = target or client
    sampling = src["sampling"]
    new = runner.create_session(
        src["domain"], task_instruction=src["task_instruction"],
        initial_state=src["initial_state"], system_prompt=src["system_prompt"], model=model,
        temperature=sampling["temperature"] if temperature is None else temperature,
        top_p=sampling["top_p"], max_tokens=sampling["max_tokens"],
        reasoning_budget=sampling.get("reasoning_budget") or None,
        seed=src.get("seed") if seed is None else seed,
        labels={"replay_of": session_id}, faults=_faults(src.get("faults") or {}))
    diffs = []
    try:
        for turn in src["turns"]:
            result = runner.step(new.session_id, turn["action"], expected_turn=turn["index"] - 1,
                                 current_state=turn.get("current_state") or None)
            diffs.append(TurnDiff(turn["index"], turn["action"], turn["observation"],
                                  result.observation, turn.get("fault_kind", ""),
                                  result.fault_kind))
    finally:
        if close:
            runner.close_session(new.session_id)
    return ReplayReport(session_id, src["model_version"], new.session_id, new.model_version,
                        diffs)


def _faults(policy: dict[str, Any]) -> Any:
    from worldserve.sdk.types import FaultPolicy

    if not policy:
        return None
    return FaultPolicy(tuple(policy.get("kinds", [])), float(policy.get("rate", 0.0)),
                       tuple(policy.get("turns", [])), policy.get("seed"))
