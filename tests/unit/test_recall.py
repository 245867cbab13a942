"""Recall in the reasoning (training/recall.py): the earlier writes a read depends on, named."""

from __future__ import annotations

import pytest

from worldserve.training.collect import Episode, Turn
from worldserve.training.recall import MOST, changes, operands, reasoning
from worldserve.training.sequence import segments
from worldserve.training.train import CHAT_TEMPLATE, PROFILES, Stage


def _turn(action: str, kind: str, fault: str = "") -> Turn:
    return Turn(action, "", "why", kind, fault)


HISTORY = [
    _turn("touch notes.md", "touch"),
    _turn("echo alpha beta > data.txt", "echo_new"),
    _turn("cat notes.md", "cat"),
    _turn("echo gamma >> data.txt", "echo_append", fault="permission_denied"),
    _turn("mkdir -p logs/old", "mkdir"),
    _turn("cp data.txt logs/copy.txt", "cp"),
]


def test_operands_leave_out_the_command_its_options_and_shell_operators() -> None:
    assert operands("grep -n 'two words' a.txt | wc -l") == {"two words", "a.txt", "wc"}
    assert operands("echo x >> logs/") == {"x", "logs"}
    assert operands("cat 'unbalanced") == {"'unbalanced"}  # split on whitespace instead


def test_a_read_recalls_the_writes_that_name_its_paths_and_really_ran() -> None:
    assert changes(HISTORY, "cat data.txt", "cat") == [
        "echo alpha beta > data.txt", "cp data.txt logs/copy.txt"]  # the failed append: not
    assert changes(HISTORY, "ls logs", "ls_dir") == [  # a listing: every change, the last four
        "touch notes.md", "echo alpha beta > data.txt", "mkdir -p logs/old",
        "cp data.txt logs/copy.txt"]
    assert changes(HISTORY, "head -n 1 logs/copy.txt", "head") == ["cp data.txt logs/copy.txt"]
    assert changes(HISTORY, "cat logs/old/x", "cat") == ["mkdir -p logs/old"]  # a path under it
    assert changes(HISTORY, "wc -l other.txt", "wc") == []
    many = [_turn(f"touch f{i}", "touch") for i in range(MOST + 2)]
    assert changes(many, "ls", "ls") == [t.action for t in many[-MOST:]]


def test_the_reasoning_line_in_each_style() -> None:
    read = _turn("cat data.txt", "cat")
    assert reasoning("plain", "TERMINAL", HISTORY, read, "cat prints.") == "cat prints."
    assert reasoning("recall", "TERMINAL", HISTORY, read, "cat prints.") == (
        "cat prints. Changed since the state: echo alpha beta > data.txt; "
        "cp data.txt logs/copy.txt.")
    assert reasoning("recall", "TERMINAL", [], read, "cat prints.") == (
        "cat prints. Unchanged since the state.")
    write = _turn("rm data.txt", "rm")  # a write's own reasoning stays as it is
    assert reasoning("recall", "TERMINAL", HISTORY, write, "rm deletes.") == "rm deletes."
    call = _turn('{"tool": "get"}', "call")
    assert reasoning("recall", "MCP", HISTORY, call, "get reads.") == "get reads."
    with pytest.raises(ValueError, match="no reasoning style 'long'"):
        reasoning("long", "TERMINAL", [], read, "x")


def test_a_recall_stage_trains_the_last_answer_to_recall() -> None:
    ep = Episode("TERMINAL", "train", 0, "t", "Working directory: /home/a\nContents: none",
                 [Turn("echo one two > b.txt", "", "writes.", "echo_new"),
                  Turn("cat b.txt", "one two", "cat prints b.txt.", "cat")])
    plain = "".join(t for t, _ in segments(ep, CHAT_TEMPLATE, 0.1))
    learnt = [t for t, w in segments(ep, CHAT_TEMPLATE, 0.1, "recall") if w == 1.0][-1]
    assert learnt.startswith("<think>\ncat prints b.txt. Changed since the state: "
                             "echo one two > b.txt.\n</think>")
    assert "Changed since" not in plain
    recall = PROFILES["recall"].stages  # broad's seven, then one trained to recall
    assert recall[:-1] == PROFILES["broad"].stages and recall[-1].reasoning == "recall"
    assert recall[-1].seed not in {s.seed for p in PROFILES.values() for s in p.stages
                                   if s is not recall[-1]}
    with pytest.raises(ValueError, match="no reasoning style 'long'"):
        Stage(episodes=1, minutes=1.0, reasoning="long")  # at once, not after collecting


def test_lines_reasoning_numbers_lines_as_grep_n_does() -> None:
    from worldserve.training.terminal import numbered
    assert numbered("alpha beta\n\ngamma\n") == "1:alpha beta | 2: | 3:gamma"
    assert numbered("") == "none"
    read = _turn("wc -l data.txt", "wc")  # written by the collector: encoding keeps it
    assert reasoning("lines", "TERMINAL", HISTORY, read, "wc counts. Lines: 1:a") == (
        "wc counts. Lines: 1:a")
    lines = PROFILES["lines"].stages  # batch2's nine, then one that lists lines
    assert lines[:-1] == PROFILES["batch2"].stages and lines[-1].reasoning == "lines"
