"""Where a training sequence's loss lies (session 32).

A checkpoint's teacher-forced cross-entropy on episodes' training sequences (sequence.py),
summed by the part of the sequence each token belongs to:

- ``system``: the system prompt, the same for every episode of a domain;
- ``prompt``: the rest of the prompt (task, initial state, actions, control instructions),
  whose names and words are random draws no model can predict;
- ``answer``: what a stage teaches (every replayed observation and the last answer);
- ``unlearnt``: the opening of each replayed answer, which no stage trains.

and the share of a stage's weighted loss each part carries at a given prompt weight (the
system prompt counts as prompt). At the usual 0.1, the prompt's share is what the profile
``answers`` (train.py) drops.

    python -m worldserve.training.loss_share --model DIR --data FILE [--prompt-weight 0.1]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast, Qwen3MoeForCausalLM

from worldserve.training.collect import Episode
from worldserve.training.heldout import read_episodes
from worldserve.training.sequence import PROMPT_WEIGHT
from worldserve.training.train import MAX_LEN, segment_ids

PARTS = ("system", "prompt", "answer", "unlearnt")
_MARK = 0.5  # the weight segments() is asked to give prompt text: no other part has it


def part_of(index: int, weight: float) -> str:
    """The part of segment ``index`` whose weight (with the prompt marked ``_MARK``) is given."""
    if index == 0:
        return "system"
    return {_MARK: "prompt", 1.0: "answer", 0.0: "unlearnt"}[weight]


def report(totals: dict[str, tuple[int, float]], prompt_weight: float
           ) -> dict[str, dict[str, float]]:
    """Per part: tokens, mean cross-entropy, and its share of the weighted loss at
    ``prompt_weight`` (pure). ``totals``: part -> (tokens, summed cross-entropy)."""
    weight = {"system": prompt_weight, "prompt": prompt_weight, "answer": 1.0, "unlearnt": 0.0}
    weighted = {p: weight[p] * ce for p, (_, ce) in totals.items()}
    whole = sum(weighted.values()) or 1.0
    return {p: {"tokens": n, "mean_ce": round(ce / n, 4) if n else 0.0,
                "loss_share": round(weighted[p] / whole, 4)}
            for p, (n, ce) in totals.items()}


@torch.no_grad()
def part_losses(model: Qwen3MoeForCausalLM, tok: PreTrainedTokenizerFast, template: str,
                episodes: Iterable[Episode]) -> dict[str, tuple[int, float]]:
    """Tokens and summed teacher-forced cross-entropy per part over ``episodes``."""
    model.eval()
    totals = {p: (0, 0.0) for p in PARTS}
    for ep in episodes:
        ids: list[int] = []
        parts: list[str] = []
        for i, (piece, w) in enumerate(segment_ids(tok, ep, template, _MARK)):
            ids += piece
            parts += [part_of(i, w)] * len(piece)
        inp = torch.tensor([ids[-MAX_LEN:]])  # what train.encode keeps
        parts = parts[-MAX_LEN:]
        logits = model(input_ids=inp).logits[0, :-1].float()
        ce = torch.nn.functional.cross_entropy(logits, inp[0, 1:], reduction="none").tolist()
        for part, loss in zip(parts[1:], ce, strict=True):  # token t's loss predicts token t
            n, s = totals[part]
            totals[part] = (n + 1, s + loss)
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True, help="episodes, JSON lines")
    ap.add_argument("--prompt-weight", type=float, default=PROMPT_WEIGHT)
    ap.add_argument("--episodes", type=int, default=0, help="the first N only (0: all)")
    args = ap.parse_args()
    tok = PreTrainedTokenizerFast.from_pretrained(args.model)
    model = Qwen3MoeForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    episodes = read_episodes(args.data)
    if args.episodes:
        episodes = episodes[:args.episodes]
    template = (args.model / "chat_template.jinja").read_text()
    totals = part_losses(model, tok, template, episodes)
    print(json.dumps(report(totals, args.prompt_weight), indent=1))


if __name__ == "__main__":
    main()
