"""A truncated output ends at its first word (session 35), and collected sets are cut again."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from worldserve.evaluation.metrics import fault_visible
from worldserve.training.collect import pick_fault
from worldserve.training.retruncate import cut, recut_file, recut_line
from worldserve.training.shell import truncation_keep


def test_the_cut_keeps_the_first_word_with_the_whitespace_before_it() -> None:
    assert truncation_keep(b"alpha beta\ngamma") == 5
    assert truncation_keep(b"ab\ncdef\nghij") == 2
    assert truncation_keep(b"\n\nwxyz\nmore") == 2 + 4
    assert cut("alpha beta\ngamma") == "alpha"
    assert cut("./dir/name.txt\n./other") == "./dir/name.txt"
    assert cut(".\n./a.txt") == "."
    assert cut("      3 foo\n      1 bar") == "      3"  # uniq -c: the padding is kept
    assert cut("1:mity melopiano tranky 1") == "1:mity"
    # one word: half of it (at least one byte); one byte or only whitespace: nothing is cut
    assert cut("\n\nwxyz") == "\n\nwx"
    assert cut("4104\n") == "41"
    assert truncation_keep(b"a") == 1 and truncation_keep(b" \n") == 2
    for full in ("alpha beta\ngamma", ".\n./a.txt", "      3 foo", "4104", "ab cd"):
        assert fault_visible("truncated_output", cut(full), "", full), full
    assert not fault_visible("truncated_output", cut("a"), "", "a")


def test_fault_factors_weigh_the_draw_and_no_factors_draw_as_before() -> None:
    kinds = ["timeout", "permission_denied", "truncated_output", "network_unreachable"]
    a, b = random.Random(7), random.Random(7)
    assert [pick_fault(a, kinds) for _ in range(50)] == [b.choice(kinds) for _ in range(50)]
    drawn = Counter(pick_fault(random.Random(i), kinds, {"truncated_output": 3.0})
                    for i in range(3000))
    assert 0.45 < drawn["truncated_output"] / 3000 < 0.55  # 3 / (1 + 1 + 3 + 1)
    assert min(drawn.values()) > 350


def _episode(observation: str, normal: str, fault: str = "truncated_output") -> str:
    return json.dumps({"domain": "TERMINAL", "index": 4, "turns": [
        {"action": "ls", "observation": "a.txt\nb.txt", "fault": "", "normal": ""},
        {"action": "cat a.txt", "observation": observation, "fault": fault, "normal": normal}]})


def test_collected_truncations_are_cut_again_from_the_output_they_kept(tmp_path: Path) -> None:
    old = "ncy203 lumbric 858.11 jointedly miasmic_1148\nzalop"  # 55 % of it, the old rule
    full = "ncy203 lumbric 858.11 jointedly miasmic_1148\nzalophus neurosome 9459\nscorbute"
    line, changed = recut_line(_episode(old, full))
    turns = json.loads(line)["turns"]
    assert changed == 1 and turns[1]["observation"] == "ncy203"
    assert turns[1]["normal"] == full and turns[1]["fault"] == "truncated_output"
    assert turns[0] == json.loads(_episode(old, full))["turns"][0]  # other turns untouched
    # an output with nothing to cut becomes the plain turn it was
    line, changed = recut_line(_episode("", ""))
    assert changed == 1 and json.loads(line)["turns"][1]["fault"] == ""
    # a set already cut by today's rule, and a turn without a fault, are left as they are
    path = tmp_path / "eps.jsonl"
    path.write_text(f"{line}\n{_episode('alpha', 'alpha beta', fault='')}\n")
    before = path.read_text()
    assert recut_file(path) == 0 and path.read_text() == before
