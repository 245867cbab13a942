"""AgentWorldBench samples (pure): the history to replay, the action to predict, the reference.

A record (docs/ARCHITECTURE.md §4) for turn t carries ``prompt`` (action prompts of turns 1..t),
``response`` (real observations; response[t-1] is turn t's, the reference), ``system_str``,
``turn_idx`` and ``task``. The history is turns 1..t-1 as interleaved user/assistant messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldserve.sessions.trajectory import parse_agentworldbench


@dataclass(frozen=True, slots=True)
class Sample:
    sample_id: str
    domain: str
    turn_idx: int
    history_record: dict[str, Any]  # the record cut to turns 1..t-1, for ImportTrajectory
    action: str
    current_state: str
    reference: str
    source: str  # file name
    category: str = ""  # the fixture's command or fault kind (report group)
    fault_kind: str = ""  # the reference turn's injected fault: the eval injects it too
    untruncated: str = ""  # truncated_output: the real output before the cut


def _sample(record: dict[str, Any], source: str, line: int) -> Sample:
    prompts, responses = list(record["prompt"]), list(record["response"])
    t = int(record.get("turn_idx", len(prompts)))
    if not 1 <= t <= len(prompts) or len(responses) < t:
        raise ValueError(f"{source}:{line}: turn_idx {t} does not fit prompt/response lengths")
    history = {**record, "prompt": prompts[:t], "response": responses[:t - 1], "turn_idx": t}
    parsed = parse_agentworldbench(json.dumps(history))
    last = parse_agentworldbench(json.dumps({**record, "prompt": prompts[t - 1:t],
                                             "response": responses[t - 1:t]}))
    action = last.turns[0].action if last.turns else str(prompts[t - 1])
    state = last.initial_state if t > 1 else ""
    if state == "As left by the previous turns.":
        state = ""
    raw_extra = record.get("worldserve")
    extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
    raw_turn = extra.get("turn")
    turn: dict[str, Any] = raw_turn if isinstance(raw_turn, dict) else {}
    return Sample(sample_id=str(record.get("id") or f"{source}:{line}"), domain=parsed.domain,
                  turn_idx=t, history_record=history, action=action, current_state=state,
                  reference=str(responses[t - 1]), source=source,
                  category=str(extra.get("category") or ""),
                  fault_kind=str(turn.get("fault_kind") or ""),
                  untruncated=str(turn.get("untruncated") or ""))


def load(data_dir: Path, pattern: str = "*_test.jsonl") -> list[Sample]:
    """Every sample of every ``*_test.jsonl`` in ``data_dir`` (sorted, so runs are stable)."""
    samples = []
    files = sorted(data_dir.glob(pattern))
    if not files:
        raise ValueError(f"no {pattern} files in {data_dir}")
    for path in files:
        for line_no, line in enumerate(path.read_text().splitlines(), start=1):
            if line.strip():
                samples.append(_sample(json.loads(line), path.name, line_no))
    ids = [s.sample_id for s in samples]
    if len(set(ids)) != len(ids):
        raise ValueError("sample ids must be unique across the data directory")
    return samples
