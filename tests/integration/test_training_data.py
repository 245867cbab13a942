"""Training data comes from real executions: real bash, a real HTTP tool server, real faults."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from worldserve.domains.chat import render_chat
from worldserve.domains.faults import control_instruction
from worldserve.training import collect, terminal, words
from worldserve.training.categories import category_of
from worldserve.training.collect import Episode
from worldserve.training.heldout import fault_visible
from worldserve.training.mcp_tools import McpEpisode, ToolServer
from worldserve.training.sequence import messages_for, segments
from worldserve.training.shell import Sandbox
from worldserve.training.train import CHAT_TEMPLATE


@pytest.fixture
def box() -> Iterator[Sandbox]:
    root = Path(tempfile.mkdtemp(prefix="ws-sandbox-test-"))  # reachable by the sandbox user
    sandbox = Sandbox(root, root / "home" / "agent")
    sandbox.reset({"notes.txt": "alpha beta\ngamma\n", "src/main.py": "print(1)\n"}, ["empty"])
    yield sandbox
    shutil.rmtree(root, ignore_errors=True)


def test_commands_really_run_and_change_the_directory(box: Sandbox) -> None:
    assert box.run("ls") == "empty\nnotes.txt\nsrc"
    assert box.shown == Path("/home/agent")  # the sandbox poses as a machine of its own
    assert box.run("pwd") == "/home/agent"
    assert str(box.root) not in box.run("ls -d \"$PWD\"/notes.txt")
    assert box.run("echo one two > new.txt") == ""
    assert box.run("cat new.txt notes.txt") == "one two\nalpha beta\ngamma"
    assert box.files()["new.txt"] == "one two\n"
    assert box.run("rm notes.txt; cat notes.txt") == "cat: notes.txt: No such file or directory"
    assert box.run("cta x") == "bash: line 1: cta: command not found"
    assert box.run("cat src") == "cat: src: Is a directory"


def test_faults_are_provoked_for_real(box: Sandbox) -> None:
    assert box.run("cat notes.txt", "permission_denied") == "cat: notes.txt: Permission denied"
    assert box.run("ls", "permission_denied") == \
        "ls: cannot open directory '.': Permission denied"
    assert box.run("cat notes.txt") == "alpha beta\ngamma"  # permissions restored
    assert box.run("cat notes.txt", "timeout") == \
        "timeout: sending signal TERM to command 'cat'"
    # cut by a real `head -c` at the end of the first word (shell.truncation_keep)
    assert box.run("cat notes.txt", "truncated_output") == "alpha"
    assert box.last_full == "alpha beta\ngamma"
    assert "Could not resolve host" in box.run("curl -sS http://nowhere.invalid/",
                                               "network_unreachable")
    with pytest.raises(ValueError):
        box.run("ls", "meteor_strike")


def test_the_tool_server_answers_results_errors_and_real_failures() -> None:
    server = ToolServer()
    try:
        ep = McpEpisode(random.Random(3), words.Vocab(random.Random(3)), server)
        catalog = ep.setup()
        assert catalog.startswith("MCP server tools:\n- ")
        create = next(t for t in ep.tools.values() if t.kind == "create")
        args = {p: (7 if t == "integer" else "blue fox") for p, t in create.params}
        action = json.dumps({"tool": create.name, "arguments": args})
        assert json.loads(ep.run(action)) == {"result": {"id": f"{create.noun}-1", "created": True}}
        get = next(t for t in ep.tools.values() if t.kind == "get")
        got = json.loads(ep.run(json.dumps({"tool": get.name, "arguments": {"id": f"{create.noun}-1"}})))
        assert got == {"result": {"id": f"{create.noun}-1", **args}}
        missing = json.loads(ep.run(json.dumps({"tool": get.name, "arguments": {}})))
        assert missing == {"error": {"code": -32602, "message": "Missing required argument: id"}}
        unknown = json.loads(ep.run(json.dumps({"tool": "nope", "arguments": {}})))
        assert unknown["error"]["code"] == -32601
        assert json.loads(ep.run(action, "http_429"))["error"]["code"] == 429
        assert json.loads(ep.run(action, "http_500"))["error"]["message"] == "Internal Server Error"
        assert json.loads(ep.run(action, "permission_denied"))["error"]["code"] == 403
        assert json.loads(ep.run(action, "timeout"))["error"]["message"] == "Request timed out"
        assert "Connection refused" in ep.run(action, "network_unreachable")
        with pytest.raises(json.JSONDecodeError):
            json.loads(ep.run(action, "malformed_json"))
    finally:
        server.close()


def test_held_out_words_never_appear_in_training_words() -> None:
    train, held = set(words.words("train")), set(words.words("heldout"))
    assert len(train) > 10_000 and len(held) > 2_000 and not train & held
    assert all(words.split_of(w) == "heldout" for w in list(held)[:100])


def test_states_are_worded_every_way_users_word_them() -> None:
    files = {"notes.txt": "alpha beta\ngamma\n", "src/main.py": "print(1)\n"}
    rng = random.Random(3)
    states = {terminal.describe(Path("/home/agent"), files, ["empty"], rng) for _ in range(400)}
    for head in terminal.STATE_HEADS:
        first = head.split("{")[0]
        assert any(s.startswith(first) for s in states), head
    for body in terminal.FILE_HEADS:
        shown = body.format(name="notes.txt", content="alpha beta\ngamma")
        assert any(shown in s for s in states), body
    for s in states:
        assert "/home/agent" in s and "empty/" in s and "src/" in s and "print(1)" in s


def test_episodes_carry_state_and_end_in_real_faults(tmp_path: Path) -> None:
    eps = collect.collect(tmp_path / "eps.jsonl", 24, seed=5, workers=1, progress=False)
    again = collect.collect(tmp_path / "eps.jsonl", 24, seed=5, workers=1, progress=False)
    assert [e.turns[0].action for e in eps] == [e.turns[0].action for e in again]
    assert {e.domain for e in eps} == {"TERMINAL", "MCP"}
    faulted = [e for e in eps if e.turns[-1].fault]
    assert faulted, "some episodes end in a fault"
    for ep in faulted:
        last = ep.turns[-1]
        assert all(not t.fault for t in ep.turns[:-1])
        assert fault_visible(last, last.observation), (last.fault, last.action, last.observation)
        assert category_of(ep, len(ep.turns) - 1) == f"fault:{last.fault}"
        system = messages_for(ep, len(ep.turns) - 1)[0]["content"]
        assert system.endswith(control_instruction(last.fault))


def test_a_focused_stage_draws_its_categories_more_often(tmp_path: Path) -> None:
    weights = terminal.kind_weights({"reading": 3.0, "writing": 0.5})
    assert weights["cat"] == 3 * terminal.kind_weights()["cat"]
    assert weights["touch"] == 0.5 * terminal.kind_weights()["touch"]
    assert weights["ls"] == terminal.kind_weights()["ls"]
    with pytest.raises(ValueError, match="no command category"):
        collect.collect(tmp_path / "bad.jsonl", 3, seed=1, workers=1, progress=False,
                        focus=(("readin", 2.0),))
    from worldserve.training.train import PROFILES
    focused = PROFILES["focused"].stages
    # full's first four stages (what made @5), then its own fifth
    assert focused[:-1] == PROFILES["full"].stages[:4] and focused[-1].focus
    terminal.kind_weights(dict(focused[-1].focus))  # every category it names exists

    def share(eps: list[Episode], category: str) -> float:
        kinds = [t.kind for e in eps if e.domain == "TERMINAL" for t in e.turns if not t.fault]
        return sum(terminal.KIND_CATEGORY.get(k) == category for k in kinds) / len(kinds)

    plain = collect.collect(tmp_path / "plain.jsonl", 30, seed=7, workers=1, progress=False)
    focused = collect.collect(tmp_path / "focus.jsonl", 30, seed=7, workers=1, progress=False,
                              focus=(("reading", 4.0), ("writing", 0.25)))
    assert share(focused, "reading") > 1.5 * share(plain, "reading")
    assert share(focused, "writing") < 0.6 * share(plain, "writing")


def test_a_focus_on_mcp_tool_kinds_calls_them_more_often(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no focusable tool kind"):
        collect.collect(tmp_path / "bad.jsonl", 3, seed=1, workers=1, progress=False,
                        focus=(("mcp:multiplyy", 2.0),))
    assert collect.split_focus((("arithmetic", 4.0), ("mcp:add", 2.0))) == (
        {"arithmetic": 4.0}, {"add": 2.0})
    from worldserve.training.train import PROFILES
    compute = PROFILES["compute"].stages
    assert compute[:-1] == PROFILES["broad"].stages and compute[-1].focus
    collect.split_focus(compute[-1].focus)  # every kind it names exists

    def share(eps: list[Episode], tools: tuple[str, ...]) -> float:
        calls = [json.loads(t.action).get("tool", "") for e in eps if e.domain == "MCP"
                 for t in e.turns]
        return sum(c.endswith(tools) for c in calls) / len(calls)

    plain = collect.collect(tmp_path / "plain.jsonl", 60, seed=7, workers=1, progress=False)
    focused = collect.collect(tmp_path / "focus.jsonl", 60, seed=7, workers=1, progress=False,
                              focus=(("mcp:multiply", 3.0), ("mcp:add", 3.0)))
    assert share(focused, ("multiply", "add")) > 2 * share(plain, ("multiply", "add"))
    # the calls still run on the real tool server: a product is the product
    products = 0
    for e in (e for e in focused if e.domain == "MCP"):
        for t in e.turns:
            call = json.loads(t.action)
            if call["tool"].endswith("multiply") and not t.fault and "result" in t.observation:
                args = call["arguments"]
                assert json.loads(t.observation)["result"]["product"] == args["x"] * args["y"]
                products += 1
    assert products >= 5


def test_a_focus_on_a_fault_kind_draws_it_more_often_and_every_cut_shows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no fault kind"):
        collect.collect(tmp_path / "bad.jsonl", 3, seed=1, workers=1, progress=False,
                        focus=(("fault:truncated", 2.0),))
    from worldserve.training.train import PROFILES
    cut = PROFILES["cut"].stages[-1]
    assert PROFILES["cut"].stages[:-1] == PROFILES["pieces"].stages  # after @11
    assert PROFILES["word"].stages[:-1] == PROFILES["cut"].stages  # after @12
    assert PROFILES["word"].stages[-1].focus == cut.focus
    assert collect.fault_focus(cut.focus) == {"truncated_output": 3.0}
    assert collect.split_focus(cut.focus) == ({}, {})  # no command or tool kind drawn more
    errors = PROFILES["errors"].stages  # after @13: its recipe, the error kinds drawn more
    assert errors[:-1] == PROFILES["word"].stages
    assert collect.fault_focus(errors[-1].focus) == collect.fault_focus(cut.focus)
    assert collect.split_focus(errors[-1].focus) == ({"errors": 3.0}, {})

    def truncations(eps: list[Episode]) -> list[collect.Turn]:
        return [e.turns[-1] for e in eps if e.turns[-1].fault == "truncated_output"]

    plain = collect.collect(tmp_path / "plain.jsonl", 60, seed=3, workers=1, progress=False,
                            fault_rate=1.0)
    focused = collect.collect(tmp_path / "focus.jsonl", 60, seed=3, workers=1, progress=False,
                              fault_rate=1.0, focus=(("fault:truncated_output", 20.0),))
    assert len(truncations(focused)) > 2 * len(truncations(plain)) + 4
    for turn in truncations(focused):  # a real cut at the first word's end, and it shows
        words = turn.normal.split()
        assert turn.observation and turn.normal.startswith(turn.observation)
        assert turn.observation != turn.normal and fault_visible(turn, turn.observation)
        shown = turn.observation.strip()
        assert (shown == words[0]) if len(words) > 1 else words[0].startswith(shown), turn
    # Every episode drew a fault (rate 1): a Terminal one that ends plain is a truncation whose
    # output had nothing to cut (an empty grep, one byte), kept as the plain turn it was.
    for turn in (e.turns[-1] for e in focused if e.domain == "TERMINAL" and not e.turns[-1].fault):
        assert turn.kind in terminal.FAULT_KINDS["truncated_output"] and not turn.normal
        assert len(turn.observation.strip()) <= 1, turn


def test_the_coreutils_beyond_the_trained_list_are_drawn_only_when_asked(tmp_path: Path) -> None:
    trained = terminal.kind_weights()
    beyond = {k for kinds in terminal.BEYOND.values() for k in kinds}
    assert not beyond & set(trained)  # the committed stages' data is drawn as it was
    assert list(trained) == list(terminal.kind_weights(commands="all"))[:len(trained)]
    assert set(terminal.kind_weights(commands="beyond")) == beyond | set(
        terminal.CATEGORIES["writing"])
    assert all(terminal.KIND_CATEGORY[k] in terminal.CATEGORIES for k in beyond)
    with pytest.raises(ValueError, match="no command set"):
        collect.collect(tmp_path / "bad.jsonl", 3, seed=1, workers=1, progress=False,
                        commands="everything")
    from worldserve.training.train import PROFILES
    assert all(s.commands == "trained" for s in PROFILES["full"].stages)
    broad = PROFILES["broad"].stages  # full's six stages (what made @7), then every kind
    assert broad[:-1] == PROFILES["full"].stages and broad[-1].commands == "all"
    others = {s.seed for p in PROFILES.values() for s in p.stages if s != broad[-1]}
    assert broad[-1].seed not in others  # data no other stage trained on
    deep = PROFILES["deep"].stages  # broad's seven, then one that deepens the model
    assert deep[:-1] == broad and deep[-1].layers == 6 and deep[-1].commands == "all"
    assert deep[-1].seed not in {s.seed for s in deep[:-1]}

    eps = collect.collect(tmp_path / "beyond.jsonl", 40, seed=3, workers=1, progress=False,
                          fault_rate=0.0, commands="beyond")
    turns = [t for e in eps if e.domain == "TERMINAL" for t in e.turns]
    drawn = {t.kind for t in turns}
    assert drawn <= beyond | set(terminal.CATEGORIES["writing"])
    assert len(drawn & beyond) >= 20  # most of them, in 40 episodes
    for t in turns:  # the real outputs are what these commands print
        words_ = t.action.split()
        if t.kind == "seq":
            first, last = (1, int(words_[1])) if len(words_) == 2 else map(int, words_[1:])
            assert t.observation == "\n".join(str(i) for i in range(first, last + 1))
        elif t.kind == "expr":
            a, op, b = int(words_[1]), words_[2].strip("\\"), int(words_[3])
            assert t.observation == str({"+": a + b, "-": a - b, "*": a * b, "/": a // b,
                                         "%": a % b}[op])
        elif t.kind == "cd_missing":
            assert t.observation.endswith(f"cd: {words_[1]}: No such file or directory")
        elif t.kind in ("cat_n", "nl") and t.observation:
            assert t.observation.split("\n")[0].lstrip().startswith("1\t")
        elif t.kind == "test_f":
            assert t.observation in ("yes", "no")


def test_one_sequence_teaches_every_turn_of_an_episode(tmp_path: Path) -> None:
    ep = collect.collect(tmp_path / "eps.jsonl", 3, seed=1, workers=1, progress=False)[0]
    parts = segments(ep, CHAT_TEMPLATE, 0.1)
    whole = "".join(text for text, _ in parts)
    prompt = render_chat(CHAT_TEMPLATE, messages_for(ep, len(ep.turns) - 1))
    assert whole.startswith(prompt)  # the exact prompt the gateway renders for the last turn
    learnt = [text for text, w in parts if w == 1.0]
    assert len(learnt) == len(ep.turns)  # every turn's observation, then the last answer
    for turn, text in zip(ep.turns, learnt, strict=True):
        assert f"\n{turn.observation}\n</predicted_observation>" in text
    assert learnt[-1].startswith("<think>\n")
    assert all(w == 0.0 for text, w in parts if text.endswith("<predicted_observation>"))


def test_episode_json_round_trip() -> None:
    ep = Episode("TERMINAL", "train", 0, "t", "s", [collect.Turn("ls", "a", "r", "ls")])
    assert Episode.from_json(json.dumps(asdict(ep))) == ep


def test_training_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    import subprocess
    import sys

    work, out = tmp_path / "work", tmp_path / "out"
    base = [sys.executable, "-m", "worldserve.training.train", "--profile", "quick",
            "--episodes", "9", "--work", str(work), "--out", str(out), "--skip-eval",
            "--vocab", "400", "--max-len", "512"]
    first = subprocess.run([*base, "--minutes", "0.05"], capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    log = (work / "progress.log").read_text()
    assert "trained" in log and "resumed" not in log
    assert (out / "model.safetensors").exists() and (out / "README.md").exists()
    second = subprocess.run([*base, "--minutes", "0.1"], capture_output=True, text=True,
                            timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    log = (work / "progress.log").read_text()
    assert "collecting" not in second.stdout  # the data was kept
    assert "resumed at step" in log
    assert json.loads((out / "training.json").read_text())["stages"][-1]["steps"] >= 1


def test_a_collection_resumes_with_another_worker_count(tmp_path: Path) -> None:
    """A GPU machine collects with a worker per core: a run cut off there (or here) resumes
    with any count and gives the same episodes, none lost or doubled."""
    whole = collect.collect(tmp_path / "whole.jsonl", 10, seed=5, workers=2, progress=False)
    cut = tmp_path / "cut.jsonl"
    kept = [0, 3, 6, 1, 4, 2]  # a three-worker run stopped after these (9, 7, 8, 5 missing)
    for w in range(3):
        Path(f"{cut}.part{w}").write_text("".join(
            json.dumps(asdict(whole[i])) + "\n" for i in kept if i % 3 == w) + '{"cut off')
    again = collect.collect(cut, 10, seed=5, workers=2, progress=False)
    assert [e.index for e in again] == list(range(10))
    assert again == whole
    assert not list(tmp_path.glob("cut.jsonl.part*"))


def test_collect_workers_follow_the_cores() -> None:
    assert [collect.collect_workers(c) for c in (1, 2, 4, 16, 64)] == [2, 2, 3, 15, 16]


def test_a_lines_stage_reasons_by_listing_the_lines_it_reads(tmp_path: Path) -> None:
    """``reasoning="lines"``: a command that counts, searches or cuts lines lists the file's
    lines as they are at that turn (after the episode's own writes), numbered as grep -n does;
    half the fault-free Terminal episodes end on such a command (only the last answer's
    reasoning is trained)."""
    plain = collect.collect(tmp_path / "plain.jsonl", 40, seed=9, workers=1, progress=False)
    assert not any(" Lines: " in t.reasoning for e in plain for t in e.turns)
    lines = collect.collect(tmp_path / "lines.jsonl", 40, seed=9, workers=1, progress=False,
                            reasoning="lines")
    listed = 0
    for t in (t for e in lines for t in e.turns if " Lines: " in t.reasoning):
        listed += 1
        assert t.kind in terminal.NUMBERED_KINDS and not t.fault, (t.action, t.reasoning)
        assert "No such file" not in t.observation, (t.action, t.observation)
        shown = t.reasoning.partition(" Lines: ")[2]
        numbered = ({} if shown == "none"  # an empty file
                    else dict(entry.split(":", 1) for entry in shown.split(" | ")))
        if t.action.startswith("grep -n "):  # what grep -n printed is among the lines
            for out in filter(None, t.observation.split("\n")):
                n, _, text = out.partition(":")
                assert numbered[n] == text, (t.action, t.reasoning, t.observation)
        if t.action.startswith("wc -l "):
            assert t.observation.split()[0] == str(len(numbered)), t.reasoning
    assert listed >= 10
    ends = [e.turns[-1] for e in lines if e.domain == "TERMINAL" and not e.turns[-1].fault]
    assert sum(t.kind in terminal.NUMBERED_KINDS for t in ends) >= 0.3 * len(ends)
    with pytest.raises(ValueError, match="no reasoning style"):
        collect.collect(tmp_path / "bad.jsonl", 3, seed=1, workers=1, progress=False,
                        reasoning="numbered")


def test_an_arith_stage_ends_half_its_terminal_episodes_on_a_real_computation(
        tmp_path: Path) -> None:
    """``reasoning="arith"``: about half the fault-free Terminal episodes end on a command that
    computes, and the working the last answer is trained on ends on what the real shell
    printed; the other styles draw the same episodes as before."""
    from worldserve.training import arith
    from worldserve.training.recall import reasoning

    plain = collect.collect(tmp_path / "plain.jsonl", 60, seed=9, workers=1, progress=False,
                            commands="all")
    worked = collect.collect(tmp_path / "arith.jsonl", 60, seed=9, workers=1, progress=False,
                             commands="all", reasoning="arith")
    ends = [e for e in worked if e.domain == "TERMINAL" and not e.turns[-1].fault]
    computing = [e for e in ends if e.turns[-1].kind in arith.TERMINAL_KINDS]
    assert len(computing) >= 0.3 * len(ends)
    assert sum(e.turns[-1].kind in arith.TERMINAL_KINDS for e in plain
               if e.domain == "TERMINAL") < len(computing)
    checked = 0
    for e in computing:
        last = e.turns[-1]
        why = reasoning("arith", e.domain, e.turns[:-1], last, last.reasoning)
        if arith.operation(e.domain, last.action) is not None:
            assert why.rstrip(".").rpartition("So ")[2] == last.observation, (last.action, why)
            checked += 1
    assert checked >= 5
    mcp = [e for e in plain if e.domain == "MCP"]  # MCP episodes are drawn as before
    assert [asdict(e) for e in mcp] == [asdict(e) for e in worked if e.domain == "MCP"]
