"""Evaluation logic (pure): samples, metrics, judge parsing, aggregation, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldserve.evaluation import metrics, report
from worldserve.evaluation.dataset import load
from worldserve.evaluation.judge import DIMENSIONS, normalise, parse_scores
from worldserve.settings import DEFAULT_MODEL_DIR
from worldserve.training.collect import Episode, Turn
from worldserve.training.fixture import records

FIXTURE = DEFAULT_MODEL_DIR / "data" / "agentworldbench"


def test_metrics() -> None:
    assert metrics.exact_match(" a b\n", "a b") == 1.0
    assert metrics.rouge_l("a b c d", "a b c d") == 1.0
    # same bag of tokens, different order: F1 is blind to order, ROUGE-L is not
    assert metrics.token_f1("d c b a", "a b c d") == 1.0
    assert metrics.rouge_l("d c b a", "a b c d") == pytest.approx(0.25)
    assert metrics.rouge_l("", "") == 1.0 and metrics.rouge_l("x", "") == 0.0
    assert metrics.json_structure("not json", "plain text") is None  # does not apply
    assert metrics.json_structure("not json", '{"a": 1}') == 0.0
    assert metrics.json_structure('{"a": 2}', '{"a": 1}') == 1.0  # same shape, other value
    half = metrics.json_structure('{"a": 1, "b": "x"}', '{"a": 1, "c": [1]}')
    assert half is not None and 0 < half < 1
    s = metrics.score("x", "y", False)
    assert s["format_valid"] == 0.0 and s["json_structure"] is None
    # a shell's output may happen to parse as JSON ("42"): structure is scored for MCP only
    assert metrics.score("41", "42", True, domain="TERMINAL")["json_structure"] is None
    assert metrics.score("41", "42", True, domain="MCP")["json_structure"] == 1.0


def test_judge_answers_are_parsed_and_normalised() -> None:
    assert normalise(1) == 0 and normalise(5) == 100 and normalise(3) == 50
    scores = parse_scores('Sure! {"format": 5, "factuality": 3, "consistency": 4, '
                          '"realism": 2, "quality": 1} hope that helps')
    assert scores == {"format": 100.0, "factuality": 50.0, "consistency": 75.0, "realism": 25.0,
                      "quality": 0.0}
    with pytest.raises(ValueError, match="no JSON"):
        parse_scores("I cannot grade this")
    with pytest.raises(ValueError, match="left out"):
        parse_scores('{"format": 5}')


def test_aggregate_and_reports() -> None:
    rows = [{"domain": "MCP", "scores": metrics.score('{"a": 1}', '{"a": 1}', True),
             "judge": dict.fromkeys(DIMENSIONS, 100.0)},
            {"domain": "TERMINAL", "scores": metrics.score("x y", "x z", True), "judge": None},
            {"domain": "TERMINAL", "scores": metrics.score("", "z", False), "judge": None}]
    summary = report.aggregate(rows)
    assert list(summary) == ["MCP", "TERMINAL", "overall"]
    assert summary["MCP"]["exact_match"] == 1.0 and summary["MCP"]["judge_overall"] == 100.0
    assert summary["TERMINAL"]["n"] == 2 and summary["TERMINAL"]["format_valid"] == 0.5
    assert "json_structure" not in summary["TERMINAL"]  # no JSON reference there
    assert summary["overall"]["n"] == 3 and summary["overall"]["judge_overall"] == 100.0
    md = report.markdown("t", summary)
    assert "| overall | 3 |" in md and "judge_overall" in md
    assert "<table" in report.to_html("t", summary)


def test_the_fixture_loads_as_samples() -> None:
    samples = load(FIXTURE)
    assert len(samples) >= 100 and {s.domain for s in samples} == {"MCP", "TERMINAL"}
    assert {s.category for s in samples} >= {"listing", "reading", "mcp:call"}
    assert any(s.fault_kind for s in samples)
    first = next(s for s in samples if s.turn_idx == 1)
    assert first.current_state == "" and not first.history_record["response"]
    later = next(s for s in samples if s.turn_idx > 2)
    assert len(later.history_record["response"]) == later.turn_idx - 1
    assert later.action and later.reference


def test_bad_data_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no \*_test\.jsonl"):
        load(tmp_path)
    (tmp_path / "x_test.jsonl").write_text(json.dumps(
        {"task": "os", "id": "a", "prompt": ["p"], "response": [], "turn_idx": 1}) + "\n")
    with pytest.raises(ValueError, match="turn_idx"):
        load(tmp_path)


def test_fixture_records_follow_the_format(tmp_path: Path) -> None:
    ep = Episode("TERMINAL", "heldout", 3, "tidy", "cwd /w holds a.txt", [
        Turn("ls", "a.txt", "r", "ls"), Turn("cat a.txt", "cat: a.txt: Permission denied", "r",
                                             "cat", "permission_denied")])
    recs = records(ep)
    assert [r["id"] for r in recs] == ["terminal-3-1", "terminal-3-2"]
    assert recs[1]["response"] == ["a.txt", "cat: a.txt: Permission denied"]
    assert recs[1]["prompt"][0].startswith("### Turn 1") and recs[1]["turn_idx"] == 2
    assert recs[0]["worldserve"]["category"] == "listing"
    assert recs[1]["worldserve"] == {"category": "fault:permission_denied",
                                     "turn": {"fault_kind": "permission_denied", "untruncated": ""}}
    (tmp_path / "terminal_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    second = load(tmp_path)[1]
    assert (second.category, second.fault_kind, second.action) == \
        ("fault:permission_denied", "permission_denied", "cat a.txt")


def test_fault_visibility() -> None:
    assert metrics.fault_visible("timeout", "timeout: sending signal TERM to command 'ls'", "")
    assert not metrics.fault_visible("timeout", "a.txt", "")
    assert metrics.fault_visible("truncated_output", "alpha be", "", "alpha beta\ngamma")
    assert not metrics.fault_visible("truncated_output", "alpha beta\ngamma", "",
                                     "alpha beta\ngamma")
    assert metrics.fault_visible("malformed_json", '{"result": {"id', "")
    assert not metrics.fault_visible("malformed_json", '{"result": 1}', "")
    assert metrics.fault_visible("http_429", '{"error": {"code": 429}}', "")
    # a failure shown where the real output has none, but not one the real output shows too
    assert metrics.false_failure("cat: a.txt: Permission denied", "alpha")
    assert not metrics.false_failure("cat: a.txt: Permission denied", "cat: a.txt: Permission denied")
    assert not metrics.false_failure("429 lines, 500 words", "12")
    s = metrics.score("x", "y", True, "timeout")
    assert s["fault_visible"] == 0.0 and metrics.score("x", "y", True)["fault_visible"] is None


def test_heldout_score_counts_faults_shown_and_faults_made_up() -> None:
    from worldserve.training.heldout import cases, score
    ep = Episode("TERMINAL", "heldout", 4, "tidy", "cwd /w holds a.txt", [
        Turn("ls", "a.txt", "r", "ls"), Turn("cat a.txt", "alpha", "r", "cat"),
        Turn("cat a.txt", "cat: a.txt: Permission denied", "r", "cat", "permission_denied")])
    predicted = ["a.txt", "cat: a.txt: Permission denied", "cat: a.txt: Permission denied"]
    rows = score([(c, p, True) for c, p in zip(cases([ep]), predicted, strict=True)])
    overall = rows["overall"]
    assert overall["exact"] == pytest.approx(2 / 3, abs=1e-4)
    assert overall["fault_visible"] == 1.0  # the injected fault shows …
    assert overall["false_fault"] == 0.5  # … and so does one made up on a clean read
    by_kind = score([(c, p, True) for c, p in zip(cases([ep]), predicted, strict=True)],
                    by_kind=True)
    assert by_kind["TERMINAL/kind:cat"]["n"] == 2 and by_kind["TERMINAL/kind:ls"]["exact"] == 1.0
    assert "TERMINAL/kind:cat" not in rows  # only when asked


def test_mcp_calls_are_grouped_by_the_tool_that_computes_their_answer() -> None:
    from worldserve.training.categories import tool_group
    from worldserve.training.heldout import cases, score
    assert tool_group('{"tool": "multiply", "arguments": {"x": 3, "y": 4}}') == "multiply"
    assert tool_group('{"tool": "caseknife_multiply", "arguments": {}}') == "multiply"
    assert tool_group('{"tool": "wherein_to_upper", "arguments": {}}') == "to_upper"
    assert tool_group('{"tool": "create_seraglio", "arguments": {}}') == "records"
    assert tool_group('{"tool": "addendum_get", "arguments": {}}') == "records"
    assert tool_group("not json") == "records"
    ep = Episode("MCP", "heldout", 5, "use the tools", "tools: add, create_x", [
        Turn('{"tool": "add", "arguments": {"a": 2, "b": 3}}', '{"result": {"sum": 5}}', "r",
             "call"),
        Turn('{"tool": "create_x", "arguments": {}}', '{"result": {"id": "x-1"}}', "r", "call")])
    predicted = ['{"result": {"sum": 6}}', '{"result": {"id": "x-1"}}']
    rows = score([(c, p, True) for c, p in zip(cases([ep]), predicted, strict=True)],
                 by_kind=True)
    assert rows["MCP/tool:add"] == {**rows["MCP/tool:add"], "n": 1, "exact": 0.0}
    assert rows["MCP/tool:records"]["exact"] == 1.0


def test_listings_are_split_by_whether_an_earlier_turn_changed_the_files() -> None:
    from worldserve.training.categories import files_changed_before
    from worldserve.training.heldout import cases, score
    ep = Episode("TERMINAL", "heldout", 6, "tidy", "cwd /w holds a.txt", [
        Turn("ls", "a.txt", "r", "ls"),
        Turn("touch b.txt", "", "r", "touch", "permission_denied"),  # did not run: no change
        Turn("ls", "a.txt", "r", "ls"),
        Turn("touch c.txt", "", "r", "touch"),
        Turn("ls", "a.txt\nc.txt", "r", "ls")])
    assert [files_changed_before(ep, k) for k in range(5)] == [False, False, False, False, True]
    predicted = ["a.txt", "", "a.txt", "", "a.txt"]
    rows = score([(c, p, True) for c, p in zip(cases([ep]), predicted, strict=True)],
                 by_kind=True)
    assert rows["TERMINAL/listing/as given"] == {**rows["TERMINAL/listing/as given"], "n": 2,
                                                  "exact": 1.0}
    assert rows["TERMINAL/listing/after a change"] == {
        **rows["TERMINAL/listing/after a change"], "n": 1, "exact": 0.0}


def test_card_decoding_of_a_directory_without_a_card_is_said_to_be_greedy(tmp_path: Path) -> None:
    from worldserve.domains import modelcard
    from worldserve.training.heldout import missing_card_note
    note = missing_card_note(tmp_path)
    assert note is not None and "plain greedy" in note and str(tmp_path) in note
    (tmp_path / modelcard.CARD_FILE).write_text("---\nworldserve:\n  name: m\n---\n")
    assert missing_card_note(tmp_path) is None
