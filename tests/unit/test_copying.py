"""Copy bias (modelserver/copying.py): which tokens it offers, when it overrides greedy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

from worldserve.domains import faults, modelcard
from worldserve.modelserver import copying
from worldserve.modelserver.copying import CopyBias
from worldserve.settings import DEFAULT_MODEL_DIR

BIAS = CopyBias(min_match=2, margin=2.0)


def arr(*ids: int) -> np.ndarray:
    return np.asarray(ids, dtype=np.int64)


def test_candidates_follow_the_longest_suffix_found_in_the_prompt() -> None:
    prompt = arr(1, 2, 3, 40, 9, 2, 3, 50)
    assert copying.candidates(prompt, [7, 1, 2, 3], BIAS).tolist() == [40]  # 1 2 3 -> 40 only
    assert copying.candidates(prompt, [7, 8, 2, 3], BIAS).tolist() == [40, 50]  # 2 3: both


def test_candidates_need_min_match_tokens_and_a_token_after() -> None:
    prompt = arr(1, 2, 3, 40)
    assert copying.candidates(prompt, [9, 3], BIAS).size == 0  # one token of suffix is too short
    assert copying.candidates(prompt, [1, 2, 3, 40], BIAS).size == 0  # nothing follows 3 40
    assert copying.candidates(prompt, [], BIAS).size == 0
    assert copying.candidates(arr(5), [5], CopyBias(min_match=1)).size == 0


def test_the_match_may_span_the_prompt_end_and_the_generated_tokens() -> None:
    prompt = arr(10, 11, 12, 13, 0, 10)  # ends where the answer starts copying 10 11 12 ...
    assert copying.candidates(prompt, [0, 10, 11], BIAS).tolist() == [12]


def logprobs(values: dict[int, float], vocab: int = 60) -> torch.Tensor:
    t = torch.full((vocab,), -30.0)
    for k, v in values.items():
        t[k] = v
    return t


def test_a_candidate_within_the_margin_replaces_greedy_and_one_outside_does_not() -> None:
    near = logprobs({7: -0.5, 40: -1.5})
    assert copying.choose(near, 7, arr(40), BIAS) == 40
    far = logprobs({7: -0.1, 40: -4.0})
    assert copying.choose(far, 7, arr(40), BIAS) == 7
    assert copying.choose(near, 7, arr(7, 40), BIAS) == 7  # greedy already copies
    assert copying.choose(near, 7, arr(), BIAS) == 7
    assert copying.choose(logprobs({7: -0.5, 40: -1.9, 50: -1.0}), 7, arr(40, 50), BIAS) == 50


OPEN, CLOSE = 58, 5
MARKS = copying.Markers(OPEN, frozenset({CLOSE}))


def test_next_token_copies_inside_the_observation_but_never_ends_it() -> None:
    prompt = arr(1, 2, 3, 40)
    logits = logprobs({CLOSE: 1.0, 40: 0.5})  # the closing tag, or what the prompt continues
    assert copying.next_token(logits, prompt, [OPEN, 1, 2, 3], BIAS, MARKS) == CLOSE
    unguarded = copying.Markers(OPEN, frozenset())
    assert copying.next_token(logits, prompt, [OPEN, 1, 2, 3], BIAS, unguarded) == 40
    assert copying.next_token(logits, prompt, [OPEN, 8, 8], BIAS, unguarded) == CLOSE


def test_next_token_leaves_the_reasoning_and_the_observations_start_alone() -> None:
    prompt = arr(OPEN, 1, 2, 3, 40)  # an earlier observation in the prompt
    logits = logprobs({7: 1.0, 40: 0.5})
    unguarded = copying.Markers(OPEN, frozenset())
    # before the observation opens (the reasoning): no bias, whatever matches
    assert copying.next_token(logits, prompt, [1, 2, 3], BIAS, unguarded) == 7
    # the match may not reach back over the opening tag: [OPEN, 1] is one token of body
    assert copying.next_token(logits, arr(OPEN, 1, 40), [OPEN, 1], BIAS, unguarded) == 7
    assert copying.next_token(logits, prompt, [9, OPEN, 2, 3], BIAS, unguarded) == 40
    # a tokenizer without a one-token opening tag gets plain greedy
    no_tag = copying.Markers(None, frozenset())
    assert copying.next_token(logits, prompt, [OPEN, 2, 3], BIAS, no_tag) == 7


def test_card_mapping_round_trips_and_rejects_bad_fields() -> None:
    assert copying.from_mapping(None) is None
    assert copying.from_mapping(copying.to_mapping(BIAS)) == BIAS
    assert copying.from_mapping({}) == CopyBias()
    with pytest.raises(ValueError, match="unknown"):
        copying.from_mapping({"min_match": 3, "temperature": 1})
    with pytest.raises(ValueError):
        copying.from_mapping({"min_match": 0})
    with pytest.raises(ValueError):
        copying.from_mapping({"margin": -1})


def test_the_model_card_carries_the_copy_bias() -> None:
    card = modelcard.parse("---\nworldserve:\n  domains: [TERMINAL]\n  decoding:\n"
                           "    copy_bias: {min_match: 4, margin: 1.5}\n---\n")
    assert copying.from_mapping(card.copy_bias) == CopyBias(min_match=4, margin=1.5)
    assert modelcard.parse("---\nworldserve:\n  domains: [MCP]\n---\n").copy_bias is None
    with pytest.raises(ValueError, match="decoding"):
        modelcard.parse("---\nworldserve:\n  decoding: [1, 2]\n---\n")
    with pytest.raises(ValueError, match="copy_bias"):
        modelcard.parse("---\nworldserve:\n  decoding: {copy_bias: 3}\n---\n")


def test_next_token_given_the_greedy_token_decides_as_it_would_alone() -> None:
    # The engine passes the argmax it has already taken; the choice must not change.
    prompt = arr(OPEN, 1, 2, 3, 40, CLOSE)
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        logits = torch.randn(64, generator=gen)
        logits[40] = logits.max() - float(torch.rand(1, generator=gen)) * 3  # near greedy or not
        for generated in ([OPEN, 1, 2, 3], [OPEN, 2, 3], [1, 2, 3]):
            alone = copying.next_token(logits, prompt, generated, BIAS, MARKS)
            given = copying.next_token(logits, prompt, generated, BIAS, MARKS,
                                       int(logits.argmax()))
            assert given == alone


def reference_candidates(prompt: list[int], tail: list[int], bias: CopyBias) -> list[int]:
    """Brute force: the tokens after every occurrence of the longest suffix of ``tail`` (up to
    ``max_match``) that occurs in ``prompt`` with a token after it."""
    for k in range(min(bias.max_match, len(tail)), bias.min_match - 1, -1):
        suffix = tail[-k:]
        after = {prompt[i + k] for i in range(len(prompt) - k) if prompt[i:i + k] == suffix}
        if after:
            return sorted(after)
    return []


def test_candidates_agree_with_a_brute_force_search() -> None:
    rng = np.random.default_rng(0)
    for bias in (CopyBias(min_match=1, max_match=4), BIAS, CopyBias(min_match=3, max_match=6)):
        for _ in range(300):
            prompt = rng.integers(0, 4, size=int(rng.integers(2, 40))).tolist()
            tail = rng.integers(0, 4, size=int(rng.integers(1, 10))).tolist()
            got = copying.candidates(arr(*prompt), tail, bias).tolist()
            assert got == reference_candidates(prompt, tail, bias), (prompt, tail, bias)


COMMA, SPACE, BREAK = 44, 45, 46
SEPS = frozenset({COMMA, SPACE, BREAK})
ITEMS = CopyBias(min_match=2, margin=2.0, items=True)
LISTING = copying.Markers(OPEN, frozenset({CLOSE}), SEPS)


def test_item_candidates_follow_an_item_across_another_layout() -> None:
    # the state lists "10 11, 12 13, 14 15"; the answer prints one item a line
    prompt = arr(9, 10, 11, COMMA, SPACE, 12, 13, COMMA, SPACE, 14, 15, BREAK, 20)
    assert copying.candidates(prompt, [10, 11, BREAK], ITEMS).size == 0  # no exact suffix
    assert copying.item_candidates(prompt, [10, 11, BREAK], ITEMS, SEPS).tolist() == [12]
    assert copying.item_candidates(prompt, [12, 13, BREAK, BREAK], ITEMS, SEPS).tolist() == [14]
    # only at a boundary: the tail must end in a separator ...
    assert copying.item_candidates(prompt, [10, 11], ITEMS, SEPS).size == 0
    # ... and a separator must have followed the match in the prompt (11 then 12: no item ends)
    assert copying.item_candidates(arr(10, 11, 12, 13), [10, 11, BREAK], ITEMS, SEPS).size == 0
    # at least min_match item tokens, and none without separators to skip
    assert copying.item_candidates(prompt, [11, BREAK], ITEMS, SEPS).size == 0
    assert copying.item_candidates(prompt, [10, 11, BREAK], ITEMS, frozenset()).size == 0


def test_next_token_takes_the_next_item_only_when_asked_and_never_for_a_separator() -> None:
    prompt = arr(9, 10, 11, COMMA, SPACE, 12, 13, COMMA, SPACE, 14, 15, BREAK)
    after_first = [OPEN, 10, 11, BREAK]
    repeat = logprobs({10: 1.0, 12: 0.0})  # the model would print the first item again
    assert copying.next_token(repeat, prompt, after_first, ITEMS, LISTING) == 12
    assert copying.next_token(repeat, prompt, after_first, BIAS, LISTING) == 10  # items off
    assert copying.next_token(repeat, prompt, after_first, ITEMS, MARKS) == 10  # no separators
    far = logprobs({10: 1.0, 12: -3.0})  # outside the margin
    assert copying.next_token(far, prompt, after_first, ITEMS, LISTING) == 10
    # the layout stays the model's: a separator it chose is not replaced by an item
    assert copying.next_token(logprobs({SPACE: 1.0, 12: 0.5}), prompt, after_first, ITEMS,
                              LISTING) == SPACE
    assert copying.next_token(logprobs({CLOSE: 1.0, 12: 0.5}), prompt, after_first, ITEMS,
                              LISTING) == CLOSE


def test_items_round_trip_through_the_card_mapping() -> None:
    assert copying.from_mapping(copying.to_mapping(ITEMS)) == ITEMS
    assert "items" not in copying.to_mapping(BIAS)  # a card without it reads as before
    with pytest.raises(ValueError, match="items"):
        copying.from_mapping({"items": "yes"})


def test_a_real_tokenizers_separators() -> None:
    assert copying.is_separator(", ") and copying.is_separator("\n") and copying.is_separator("./")
    assert not copying.is_separator("") and not copying.is_separator("a,")
    assert not copying.is_separator(".")
    tok = PreTrainedTokenizerFast.from_pretrained(DEFAULT_MODEL_DIR)
    marks = copying.markers(tok, {tok.eos_token_id}, separators=True)
    listing = tok.encode("ab.sh, cd.log\n./ef.txt", add_special_tokens=False)
    seps = {tok.decode([t]) for t in listing if t in marks.separators}
    assert seps == {",", " ", "\n", "./"}
    assert not marks.separators & marks.protected
    assert not copying.markers(tok, {tok.eos_token_id}).separators  # only where items is on


def test_a_turn_that_asks_for_a_truncated_output_decodes_plain_greedy() -> None:
    system = "You simulate a Linux shell."
    assert copying.applies(system)
    assert not copying.applies(f"{system}\n\n{faults.control_instruction('truncated_output')}")
    for kind in ("permission_denied", "timeout", "network_unreachable"):  # still copy names
        assert copying.applies(f"{system}\n\n{faults.control_instruction(kind)}")
