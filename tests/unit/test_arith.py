"""Written-out arithmetic in the reasoning (training/arith.py)."""

from __future__ import annotations

import random

import pytest

from worldserve.training import arith
from worldserve.training.collect import Episode, Turn
from worldserve.training.recall import reasoning
from worldserve.training.sequence import segments
from worldserve.training.train import CHAT_TEMPLATE, PROFILES


def _result(text: str) -> int:
    return int(text.rstrip(".").rpartition("So ")[2])


def test_the_working_ends_on_the_right_result_for_any_operands() -> None:
    rng = random.Random(5)
    cases = [(0, 0), (5, 5), (9, 1), (10, 99), (99, 99), (100, 1), (1, 100)]
    cases += [(rng.randint(0, 9999), rng.randint(0, 999)) for _ in range(3000)]
    for a, b in cases:
        assert _result(arith.scratchpad(a, "+", b)) == a + b, (a, b)
        assert _result(arith.scratchpad(a, "-", b)) == a - b, (a, b)
        assert _result(arith.scratchpad(a, "*", b)) == a * b, (a, b)
        assert arith.scratchpad(a, "\\*", b) == arith.scratchpad(a, "*", b)  # expr's \*


def test_each_step_is_one_column_as_on_paper() -> None:
    assert arith.scratchpad(78, "+", 84) == "8+4+0=12, 7+8+1=16, carry 1. So 162."
    assert arith.scratchpad(7, "+", 79) == "7+9+0=16, 0+7+1=8. So 86."
    assert arith.scratchpad(86, "-", 67) == "6-7-0<0: 16-7-0=9, 8-6-1=1. So 19."
    assert arith.scratchpad(13, "-", 92) == (
        "13<92, so -(92-13). 2-3-0<0: 12-3-0=9, 9-1-1=7. So -79.")
    assert arith.scratchpad(98, "*", 6) == "98*6: 8*6+0=48, 9*6+4=58. So 588."
    assert arith.scratchpad(98, "*", 62) == (
        "98*2: 8*2+0=16, 9*2+1=19. So 196. 98*6: 8*6+0=48, 9*6+4=58. So 588. "
        "196+5880: 6+0+0=6, 9+8+0=17, 1+8+1=10, 0+5+1=6. So 6076.")


def test_only_actions_that_add_subtract_or_multiply_two_integers_are_worked() -> None:
    op = arith.operation
    assert op("TERMINAL", 'python3 -c "print(18*50)"') == (18, "*", 50)
    assert op("TERMINAL", 'python3 -c "print(92-13)"') == (92, "-", 13)
    assert op("TERMINAL", "echo $((78 + 84))") == (78, "+", 84)
    assert op("TERMINAL", "expr 5 \\* 3") == (5, "*", 3)
    assert op("TERMINAL", "expr 5 / 3") is None  # division and remainder keep plain reasoning
    assert op("TERMINAL", "expr 5 % 3") is None
    assert op("TERMINAL", "python3 -c \"print('ab'.upper())\"") is None
    assert op("TERMINAL", "cat notes.txt") is None
    assert op("MCP", '{"tool": "caseknife_multiply", "arguments": {"x": 98, "y": 28}}') == (
        98, "*", 28)
    assert op("MCP", '{"tool": "add", "arguments": {"a": 4, "b": 9}}') == (4, "+", 9)
    # the calls that fail: a missing or mistyped argument, an extra one, another tool
    assert op("MCP", '{"tool": "add", "arguments": {"a": 4}}') is None
    assert op("MCP", '{"tool": "add", "arguments": {"a": 4, "b": "nine"}}') is None
    assert op("MCP", '{"tool": "add", "arguments": {"a": 4, "b": true}}') is None
    assert op("MCP", '{"tool": "add", "arguments": {"a": 4, "b": 2, "c": 1}}') is None
    assert op("MCP", '{"tool": "get_add", "arguments": {"id": "add-1"}}') is None
    assert op("MCP", "not json") is None
    assert op("SEARCH", "echo $((1 + 2))") is None


def test_an_arith_stage_trains_the_last_answer_to_work_it_out() -> None:
    call = Turn('{"tool": "add", "arguments": {"a": 78, "b": 84}}', '{"result": {"sum": 162}}',
                "add answers from the server's state.", "call")
    assert reasoning("arith", "MCP", [], call, call.reasoning) == (
        "add answers from the server's state. 8+4+0=12, 7+8+1=16, carry 1. So 162.")
    failing = Turn(call.action, "timed out", "The call times out.", "call", "timeout")
    assert reasoning("arith", "MCP", [], failing, failing.reasoning) == "The call times out."
    read = Turn("cat a.txt", "x", "cat prints a.txt.", "cat")
    assert reasoning("arith", "TERMINAL", [], read, read.reasoning) == "cat prints a.txt."
    ep = Episode("TERMINAL", "train", 0, "t", "Working directory: /home/a\nContents: none",
                 [Turn("touch b.txt", "", "touch creates b.txt.", "touch"),
                  Turn('python3 -c "print(86-67)"', "19", "python3 evaluates the expression.",
                       "python_arith")])
    learnt = [t for t, w in segments(ep, CHAT_TEMPLATE, 0.1, "arith") if w == 1.0][-1]
    assert learnt.startswith("<think>\npython3 evaluates the expression. 6-7-0<0: 16-7-0=9, "
                             "8-6-1=1. So 19.\n</think>")
    assert "So 19" not in "".join(t for t, _ in segments(ep, CHAT_TEMPLATE, 0.1))
    stages = PROFILES["arith"].stages  # @11's ten, then one that works sums out
    assert stages[:-1] == PROFILES["pieces"].stages and stages[-1].reasoning == "arith"
    assert stages[-1].seed not in {s.seed for p in PROFILES.values() for s in p.stages
                                   if s is not stages[-1]}


@pytest.mark.parametrize("op", ["/", "%", "**"])
def test_an_operator_it_does_not_work_out_is_refused(op: str) -> None:
    with pytest.raises(KeyError):
        arith.scratchpad(4, op, 2)


def test_the_working_report_counts_steps_and_turns() -> None:
    right = arith.scratchpad(78, "+", 84)
    rows = [
        {"domain": "TERMINAL", "category": "arithmetic", "action": "echo $((78 + 84))",
         "reference": "162", "predicted": "162", "raw": f"<think>\nx. {right}\n</think>"},
        {"domain": "MCP", "category": "mcp:call",
         "action": '{"tool": "multiply", "arguments": {"x": 98, "y": 6}}',
         "reference": '{"result": {"product": 588}}', "predicted": '{"result": {"product": 18}}',
         "raw": "<think>\nx. 98*6: 8*6+0=48, 9*6+4=14. So 18.\n</think>"},
        {"domain": "TERMINAL", "category": "fault:timeout", "action": "echo $((1 + 2))",
         "reference": "timed out", "predicted": "3", "raw": "<think>\n1+2+0=3. So 3.\n</think>"},
        {"domain": "TERMINAL", "category": "reading", "action": "cat a", "reference": "",
         "predicted": "", "raw": ""},
    ]
    assert arith.working_report(rows) == {
        "turns": 2, "written": 2, "working right": 1, "exact": 1,
        "addition steps": 2, "addition steps right": 2,
        "multiplication steps": 2, "multiplication steps right": 1,
        "subtraction steps": 0, "subtraction steps right": 0}
