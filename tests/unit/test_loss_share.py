"""Where a training sequence's loss lies (training/loss_share.py)."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedTokenizerFast, Qwen3MoeForCausalLM

from worldserve.settings import DEFAULT_MODEL_DIR
from worldserve.training import loss_share as L
from worldserve.training import train as T
from worldserve.training.heldout import shipped_episodes
from worldserve.training.sequence import PROMPT_WEIGHT


def test_shares_follow_the_prompt_weight() -> None:
    totals = {"system": (10, 1.0), "prompt": (100, 300.0), "answer": (50, 10.0),
              "unlearnt": (5, 20.0)}
    at_usual = L.report(totals, 0.1)
    assert at_usual["prompt"] == {"tokens": 100, "mean_ce": 3.0, "loss_share": round(30 / 40.1, 4)}
    assert at_usual["unlearnt"]["loss_share"] == 0.0
    at_zero = L.report(totals, 0.0)
    assert at_zero["answer"]["loss_share"] == 1.0 and at_zero["prompt"]["loss_share"] == 0.0


def test_every_token_of_a_sequence_is_counted_in_its_part() -> None:
    tok = PreTrainedTokenizerFast.from_pretrained(DEFAULT_MODEL_DIR)
    model = Qwen3MoeForCausalLM.from_pretrained(DEFAULT_MODEL_DIR, dtype=torch.float32)
    template = (DEFAULT_MODEL_DIR / "chat_template.jinja").read_text()
    episodes = shipped_episodes(DEFAULT_MODEL_DIR)[:2]
    totals = L.part_losses(model, tok, template, episodes)
    assert set(totals) == set(L.PARTS)
    # the parts hold exactly the tokens training weighs, less each sequence's first token
    weights = [w for ep in episodes for w in T.encode(tok, ep, 10**6, PROMPT_WEIGHT)[1][1:]]
    assert totals["answer"][0] == weights.count(1.0)
    assert totals["system"][0] + totals["prompt"][0] == weights.count(PROMPT_WEIGHT)
    # the committed model predicts its answers far better than the random words of a prompt
    mean = {p: ce / n for p, (n, ce) in totals.items()}
    assert mean["answer"] < 0.5 < mean["prompt"]


def test_a_weight_no_part_carries_is_refused() -> None:
    with pytest.raises(KeyError):
        L.part_of(3, 0.25)
