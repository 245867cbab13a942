"""Trajectories in and out (pure): AgentWorldBench JSONL and the SDK's session JSON.

AgentWorldBench records (docs/ARCHITECTURE.md §4) carry ``task``, ``id``, ``prompt`` (the action prompts
of turns 1..t), ``response`` (the observations of turns 1..t), ``current_prompt`` (turn t's
action prompt), ``system_str``, ``turn_idx`` (t, 1-based) and ``total_turns``. An export writes
one record per turn; worldserve's own receipts (model version, seed, sampling, fault kind,
reasoning, tokens, fork parent) ride along under ``worldserve`` so nothing is lost.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from worldserve.domains.rendering import PastTurn, action_prompts
from worldserve.domains.templates import Domain
from worldserve.sessions.lineage import base_count
from worldserve.sessions.records import SessionRecord, TurnRecord

AGENTWORLDBENCH = "agentworldbench"
SESSION_JSON = "json"
FORMATS = (AGENTWORLDBENCH, SESSION_JSON)

_FIELD = re.compile(r"^\*\*(Task Instruction|Historical Context|Current State|Action):\*\* ?",
                    re.MULTILINE)


def _receipt(t: TurnRecord) -> dict[str, Any]:
    return {"model_version": t.model_version, "seed": t.seed, "sampling": t.sampling,
            "fault_kind": t.fault_kind, "reasoning": t.reasoning, "finish_reason": t.finish_reason,
            "input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
            "reasoning_tokens": t.reasoning_tokens, "imported": t.imported,
            "created_at": t.created_at}


def to_agentworldbench(record: SessionRecord, turns: list[TurnRecord]) -> list[dict[str, Any]]:
    """One AgentWorldBench record per turn of the session."""
    prompts = action_prompts(record.task_instruction, record.prompt_state(),
                             [PastTurn(t.action, t.observation, t.current_state) for t in turns])
    observations = [t.observation for t in turns]
    out = []
    for n in range(1, len(turns) + 1):
        out.append({
            "task": record.domain.lower(), "id": f"{record.session_id}:{n}",
            "prompt": prompts[:n], "response": observations[:n],
            "current_prompt": prompts[n - 1], "system_str": record.system_prompt,
            "turn_idx": n, "total_turns": len(turns),
            "worldserve": {"session_id": record.session_id,
                           "parent_session_id": record.parent_session_id,
                           "fork_turn": base_count(record.lineage),
                           "labels": record.labels, "faults": record.faults,
                           "tools": record.tools, "turn": _receipt(turns[n - 1])},
        })
    return out


def to_session_json(record: SessionRecord, turns: list[TurnRecord]) -> dict[str, Any]:
    data = asdict(record)
    data["fork_turn"] = base_count(record.lineage)
    data["turns"] = [{"index": i, **asdict(t)} for i, t in enumerate(turns, start=1)]
    return data


def dumps(fmt: str, sessions: list[tuple[SessionRecord, list[TurnRecord]]]) -> bytes:
    if fmt == AGENTWORLDBENCH:
        lines = [json.dumps(r, ensure_ascii=False) for rec, turns in sessions
                 for r in to_agentworldbench(rec, turns)]
        return ("\n".join(lines) + "\n").encode() if lines else b""
    if fmt == SESSION_JSON:
        doc = {"format": "worldserve.sessions.v1",
               "sessions": [to_session_json(rec, turns) for rec, turns in sessions]}
        return json.dumps(doc, ensure_ascii=False, indent=1).encode()
    raise ValueError(f"format must be one of {', '.join(FORMATS)}")


@dataclass(frozen=True, slots=True)
class ImportedTrajectory:
    domain: str
    system_prompt: str
    task_instruction: str
    initial_state: str
    turns: list[PastTurn]
    source_id: str


def _fields(prompt: str) -> dict[str, str]:
    """The ``**Field:**`` values of an action prompt (empty if it is not in that format)."""
    marks = list(_FIELD.finditer(prompt))
    out = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(prompt)
        out[m.group(1)] = prompt[m.end():end].strip()
    return out


def _text(value: object) -> str:
    """A prompt or response as text: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError:
        raise ValueError("a prompt or response is nested too deeply") from None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _turn_index(record: dict[str, Any]) -> int:
    """A record's position: its ``turn_idx`` (an integer within ±2^53), else its prompt count."""
    value = record.get("turn_idx")
    if value is None:
        prompts = record.get("prompt")
        return len(prompts) if isinstance(prompts, list) else 0
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or abs(value) > 2**53 or value != int(value)):
        raise ValueError("turn_idx must be an integer")
    return int(value)


def parse_agentworldbench(content: bytes | str, domain: str = "") -> ImportedTrajectory:
    """The fullest record of an AgentWorldBench JSONL text as a history of real turns.

    Turns with an observation become history; a trailing prompt without one is ignored (it is
    the action the caller will step next). Prompts not in the action-prompt format are taken
    whole as the action. Raises ValueError with the reason.
    """
    text = content.decode("utf-8") if isinstance(content, bytes) else content
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                record = json.loads(line, parse_constant=_reject_constant)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number} is not JSON: {exc}") from None
            except RecursionError:
                raise ValueError(f"line {number} is nested too deeply") from None
            if not isinstance(record, dict):
                raise ValueError(f"line {number} is not a JSON object")
            records.append(record)
    if not records:
        raise ValueError("no AgentWorldBench record found")
    record = max(records, key=_turn_index)
    prompts, responses = record.get("prompt"), record.get("response")
    if not isinstance(prompts, list) or not isinstance(responses, list):
        raise ValueError("an AgentWorldBench record needs list fields 'prompt' and 'response'")
    if len(responses) > len(prompts):
        raise ValueError("more responses than prompts")
    name = (domain or str(record.get("task", ""))).upper()
    try:
        Domain(name)
    except ValueError:
        raise ValueError(f"unknown domain {name!r}: pass one (the record's task is "
                         f"{record.get('task')!r})") from None
    first = _fields(_text(prompts[0])) if prompts else {}
    turns: list[PastTurn] = []
    for prompt, observation in zip(prompts, responses, strict=False):
        text_prompt = _text(prompt)
        fields = _fields(text_prompt)
        action = fields.get("Action", text_prompt)
        state = fields.get("Current State", "")
        if state == "As left by the previous turns.":
            state = ""
        turns.append(PastTurn(action, _text(observation), state if len(turns) else ""))
    imported = ImportedTrajectory(
        domain=name, system_prompt=str(record.get("system_str", "")),
        task_instruction=first.get("Task Instruction", "").replace("None given.", ""),
        initial_state=first.get("Current State", ""), turns=turns,
        source_id=str(record.get("id", "")))
    texts = [imported.system_prompt, imported.initial_state, imported.source_id,
             *(x for t in turns for x in (t.action, t.observation, t.current_state))]
    if any(not _is_utf8(x) for x in texts):
        raise ValueError("a string is not valid Unicode text (an unpaired surrogate)")
    return imported
