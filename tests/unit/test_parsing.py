from __future__ import annotations

import random

import pytest

from worldserve.domains.parsing import (
    MalformedCompletion,
    Part,
    StreamSplitter,
    parse_completion,
)

GOOD = "<think>\nls lists files.\n</think>\n\n<predicted_observation>\na.txt\n\nb.txt\n" \
       "</predicted_observation>"


def test_parses_reasoning_and_observation() -> None:
    parsed = parse_completion(GOOD)
    assert parsed.reasoning == "ls lists files."
    assert parsed.observation == "a.txt\n\nb.txt"


def test_without_reasoning_block() -> None:
    parsed = parse_completion("<predicted_observation>\nok\n</predicted_observation>")
    assert parsed == type(parsed)("", "ok")


def test_completion_that_starts_inside_an_opened_think_block() -> None:
    parsed = parse_completion("thinking\n</think>\n<predicted_observation>x</predicted_observation>")
    assert parsed.reasoning == "thinking" and parsed.observation == "x"


def test_empty_observation_is_valid() -> None:
    assert parse_completion("<predicted_observation>\n\n</predicted_observation>").observation == ""


def test_text_after_the_block_is_ignored() -> None:
    text = "<predicted_observation>\nA\n</predicted_observation> trailing"
    assert parse_completion(text).observation == "A"


@pytest.mark.parametrize("bad", [
    "",
    "just text",
    "<think>never closed",
    "<think>x</think> no block",
    "<think>x</think><predicted_observation>unterminated",
    "</predicted_observation>",
])
def test_malformed_completions_raise(bad: str) -> None:
    with pytest.raises(MalformedCompletion):
        parse_completion(bad)


def _split(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, min(20, len(text) - 1))))
    return [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]


@pytest.mark.parametrize("seed", range(50))
def test_stream_splitter_agrees_with_the_parser_for_any_chunking(seed: int) -> None:
    rng = random.Random(seed)
    splitter = StreamSplitter()
    reasoning, observation = "", ""
    for chunk in _split(GOOD, rng):
        assert not splitter.finished
        for part, delta in splitter.feed(chunk):
            assert "<" not in delta or "<" in GOOD  # never a partial tag
            if part is Part.REASONING:
                reasoning += delta
            else:
                observation += delta
    parsed = parse_completion(GOOD)
    assert splitter.finished and splitter.in_observation
    assert observation == parsed.observation
    assert reasoning.strip() == parsed.reasoning


def test_stream_splitter_never_leaks_tag_fragments() -> None:
    splitter = StreamSplitter()
    out = []
    for ch in GOOD:  # one character at a time
        out.extend(d for _, d in splitter.feed(ch))
    assert not any("predicted" in d or "think" in d for d in out)


def test_stream_splitter_ignores_text_outside_blocks() -> None:
    splitter = StreamSplitter()
    assert splitter.feed("preamble ") == []
    assert splitter.feed("<predicted_observation>\nX\n</predicted_observation>tail") == [
        (Part.OBSERVATION, "X")]
