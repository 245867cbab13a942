"""Benchmark: training tokens/s of the committed checkpoint with and without an attention mask.

    .venv/bin/python bench/train_speed.py [--episodes 600] [--steps 25] [--rounds 2]

The training loop's own pieces (``train.batches``, ``collate``, ``optimizer_step``: the
weighted loss, AdamW, gradient clipping; bf16 autocast where ``precision`` picks it) on real
episodes (collected as a stage collects them, every command kind, fault share 0.4) encoded
with the committed tokenizer. *masked* (the baseline) passes ``collate``'s attention mask, as
the loop did before session 21; *unmasked* runs the loop's ``forward_inputs`` (right padding,
causal attention: no mask needed). Rounds alternate the two on the same batches, training one
model on, so both pay for the same weights. Tokens/s counts real (unpadded) tokens.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import torch
from common import machine
from transformers import PreTrainedTokenizerFast, Qwen3MoeForCausalLM

from worldserve.settings import DEFAULT_MODEL_DIR
from worldserve.training import precision
from worldserve.training import train as T
from worldserve.training.collect import collect


def run(model: Qwen3MoeForCausalLM, opt: torch.optim.Optimizer, batches: list[list[T.Item]],
        pad: int, masked: bool, bf16: bool) -> float:
    """Real tokens per second over ``batches``, one optimizer step each."""
    autocast = precision.autocast("cpu", bf16)
    seen = 0
    t0 = time.perf_counter()
    for batch in batches:
        inp, mask, weights = T.collate(batch, pad)
        inputs = {"input_ids": inp, "attention_mask": mask} if masked else T.forward_inputs(inp)
        T.optimizer_step(model, opt, inputs, inp, weights, autocast)
        seen += int(mask.sum())
    return seen / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR)
    ap.add_argument("--episodes", type=int, default=600)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        eps = collect(Path(tmp) / "episodes.jsonl", args.episodes, seed=3_000_021,
                      fault_rate=0.4, commands="all", progress=False)
    tok = PreTrainedTokenizerFast.from_pretrained(args.model)
    encoded = [T.encode(tok, e, 2048, 0.1) for e in eps]
    batches = T.batches(encoded, 4096, random.Random(0))[:args.steps]
    model = Qwen3MoeForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, betas=(0.9, 0.95))
    bf16 = precision.use_bf16("cpu")
    print(f"{machine()}; {len(batches)} batches of ≤4,096 tokens; "
          f"{'bf16 autocast' if bf16 else 'float32'}; experts {model.config._experts_implementation}")
    rates: dict[bool, list[float]] = {True: [], False: []}
    for r in range(args.rounds):
        for masked in (True, False):
            rate = run(model, opt, batches, tok.pad_token_id, masked, bf16)
            rates[masked].append(rate)
            print(f"round {r + 1} {'masked  ' if masked else 'unmasked'} {rate:,.0f} tokens/s",
                  flush=True)
    best = {k: max(v) for k, v in rates.items()}
    print(f"unmasked / masked (best of {args.rounds}): {best[False] / best[True]:.2f}x")


if __name__ == "__main__":
    main()
