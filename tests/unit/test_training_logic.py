"""Pure logic of forks, faults and trajectory formats."""

from __future__ import annotations

import json

import pytest

from worldserve.domains.faults import (
    DOMAIN_KINDS,
    control_instruction,
    fault_for,
    normalize_policy,
)
from worldserve.domains.templates import Domain
from worldserve.sessions.lineage import base_count, fork_lineage
from worldserve.sessions.records import Sampling, SessionRecord, TurnRecord
from worldserve.sessions.trajectory import dumps, parse_agentworldbench, to_agentworldbench


def test_fork_lineage_truncates_and_extends() -> None:
    assert fork_lineage("p", [], 3, 2) == [("p", 2)]
    assert fork_lineage("p", [], 3, 0) == []
    grand = fork_lineage("c", [("p", 2)], 4, 5)
    assert grand == [("p", 2), ("c", 3)] and base_count(grand) == 5
    assert fork_lineage("c", [("p", 2)], 4, 1) == [("p", 1)]
    assert fork_lineage("c", [("p", 2), ("q", 0)], 0, 2) == [("p", 2)]  # empty segments dropped
    with pytest.raises(ValueError):
        fork_lineage("p", [], 3, 4)
    with pytest.raises(ValueError):
        fork_lineage("p", [], 3, -1)


def test_fault_policies_are_checked_per_domain() -> None:
    assert normalize_policy("TERMINAL", {}) == {}
    assert normalize_policy("TERMINAL", {"kinds": [], "rate": 0, "turns": []}) == {}
    p = normalize_policy("MCP", {"kinds": ["malformed_json"], "turns": [3, 1, 3], "seed": 4})
    assert p == {"kinds": ["malformed_json"], "rate": 0.0, "turns": [1, 3], "seed": 4}
    with pytest.raises(ValueError, match="do not apply to TERMINAL"):
        normalize_policy("TERMINAL", {"kinds": ["malformed_json"], "rate": 1})
    with pytest.raises(ValueError, match="unknown"):
        normalize_policy("MCP", {"kinds": ["gremlins"], "rate": 1})
    with pytest.raises(ValueError, match="rate"):
        normalize_policy("MCP", {"rate": -0.1})
    with pytest.raises(ValueError, match="1-based"):
        normalize_policy("MCP", {"turns": [0]})
    assert all(DOMAIN_KINDS[d] for d in Domain)


def test_fault_decisions_are_deterministic_and_follow_the_policy() -> None:
    sched = {"kinds": ["timeout"], "rate": 0.0, "turns": [2, 5], "seed": 1}
    assert [fault_for(sched, "OS", n, "s") for n in range(1, 7)] == \
        ["", "timeout", "", "", "timeout", ""]
    always = {"kinds": [], "rate": 1.0, "turns": [], "seed": 7}
    kinds = [fault_for(always, "SWE", n, "s") for n in range(1, 40)]
    assert all(kinds) and set(kinds) <= set(DOMAIN_KINDS[Domain.SWE])
    half = {"kinds": ["http_429"], "rate": 0.5, "turns": [], "seed": 3}
    first = [fault_for(half, "WEB", n, "s") for n in range(1, 200)]
    assert first == [fault_for(half, "WEB", n, "other") for n in range(1, 200)]  # seed wins
    assert 60 < sum(bool(k) for k in first) < 140
    assert fault_for({}, "WEB", 1, "s") == ""
    assert "timeout" in control_instruction("timeout") and control_instruction("") == ""


def _session(turns: int) -> tuple[SessionRecord, list[TurnRecord]]:
    record = SessionRecord("s_1", "t", "TERMINAL", "m@1", "tidy", "cwd /x", "SYSTEM",
                           Sampling(0.0, 1.0, 64), 5, {}, {}, 60, 0.0)
    return record, [TurnRecord(f"cmd {i}", f"out {i}", "r", 1, 2, 1, "m@1", "stop", 0.0,
                               fault_kind="timeout" if i == 1 else "")
                    for i in range(turns)]


def test_agentworldbench_export_parses_back_to_the_same_history() -> None:
    record, turns = _session(3)
    rows = to_agentworldbench(record, turns)
    assert [r["turn_idx"] for r in rows] == [1, 2, 3]
    assert all(r["total_turns"] == 3 and r["task"] == "terminal" for r in rows)
    assert rows[2]["response"] == ["out 0", "out 1", "out 2"]
    assert rows[1]["worldserve"]["turn"]["fault_kind"] == "timeout"
    content = dumps("agentworldbench", [(record, turns)])
    assert len(content.splitlines()) == 3
    back = parse_agentworldbench(content)
    assert back.domain == "TERMINAL" and back.system_prompt == "SYSTEM"
    assert back.task_instruction == "tidy" and back.initial_state == "cwd /x"
    assert [(t.action, t.observation) for t in back.turns] == [(f"cmd {i}", f"out {i}")
                                                              for i in range(3)]
    doc = json.loads(dumps("json", [(record, turns)]))
    assert doc["sessions"][0]["turns"][2]["index"] == 3
    with pytest.raises(ValueError):
        dumps("xml", [(record, turns)])


def test_agentworldbench_import_rejects_what_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_agentworldbench(b"{oops")
    with pytest.raises(ValueError, match="no AgentWorldBench record"):
        parse_agentworldbench(b"\n\n")
    with pytest.raises(ValueError, match="unknown domain"):
        parse_agentworldbench(b'{"task": "chess", "prompt": ["a"], "response": ["b"]}')
    with pytest.raises(ValueError, match="more responses"):
        parse_agentworldbench(b'{"task": "os", "prompt": [], "response": ["b"]}')
    pending = parse_agentworldbench(b'{"task": "os", "prompt": ["a", "b"], "response": ["x"]}')
    assert [t.action for t in pending.turns] == ["a"]  # the unanswered prompt is not history
