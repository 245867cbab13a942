"""Benchmark: CPU decoding speed of the committed checkpoint at batch 1 (target ≥ 100 tokens/s).

    .venv/bin/python bench/decode_speed.py [--tokens 200] [--prompts 12] [--repeats 3]
    .venv/bin/python bench/decode_speed.py --size wide [--rounds 2]   # a size's cost

Two measurements in one run, one process, on the real checkpoint and real held-out prompts
(the prompts the gateway renders for held-out Terminal and MCP turns):

- **forced decode** (the baseline): transformers ``generate`` at batch 1, greedy, exactly
  ``--tokens`` new tokens (``min_new_tokens``) after the prompt; tokens/s over the decode part
  (the time to the first token is measured alone and subtracted);
- **engine**: the model server's ``TransformersEngine`` (what Triton serves), one request at a
  time, the model's own answers (it stops at ``<|im_end|>``); output tokens/s per request,
  prefill included. Reported as a ratio to the forced-decode figure. Run twice: with the copy
  bias the model card declares (``modelserver/copying.py``, what is served) and without it, so
  the bias's cost per token is a ratio measured in the same run;
- **copy bias alone**: one ``copying.next_token`` call mid-copy, in microseconds and as a share
  of a forced-decode step (the engine ratio above is noisier than the effect on 12 prompts).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from common import machine
from transformers import AutoModelForCausalLM, AutoTokenizer

from worldserve.modelserver import copying
from worldserve.modelserver.contract import GenerationRequest
from worldserve.modelserver.port import Delta
from worldserve.modelserver.transformers_engine import TransformersEngine
from worldserve.settings import DEFAULT_MODEL_DIR
from worldserve.training import heldout


def held_out_prompts(model_dir: Path, count: int) -> list[str]:
    """``count`` prompts spread evenly over the checkpoint's held-out turns."""
    prompts = heldout.turn_prompts((model_dir / "chat_template.jinja").read_text(),
                                   heldout.shipped_episodes(model_dir))
    step = max(1, len(prompts) // count)
    return prompts[::step][:count]


@torch.no_grad()
def forced_decode(model_dir: Path, prompts: list[str], tokens: int, repeats: int) -> list[float]:
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rates = []
    for prompt in prompts[:repeats]:
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False)
        t0 = time.perf_counter()
        model.generate(**ids, max_new_tokens=1, do_sample=False, pad_token_id=tok.pad_token_id)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.generate(**ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                       pad_token_id=tok.pad_token_id)
        total = time.perf_counter() - t0
        rates.append((tokens - 1) / max(total - first, 1e-9))
    return rates


def engine_rates(model_dir: Path, prompts: list[str], copy_bias: bool = True
                 ) -> tuple[list[float], list[int]]:
    engine = TransformersEngine(model_dir, device="cpu", max_batch_size=1,
                                prefix_cache_bytes=0,  # no reuse between the prompts
                                copy_bias=copy_bias)
    rates, counts = [], []
    try:
        for prompt in prompts:
            done = threading.Event()
            out: list[Delta] = []

            def sink(d: Delta, out: list[Delta] = out, done: threading.Event = done) -> None:
                out.append(d)
                if d.finish_reason is not None:
                    done.set()

            t0 = time.perf_counter()
            engine.submit(GenerationRequest(prompt, max_tokens=256), sink)
            done.wait(120)
            elapsed = time.perf_counter() - t0
            n = sum(d.num_output_tokens for d in out)
            rates.append(n / elapsed)
            counts.append(n)
    finally:
        engine.close()
    return rates, counts


def copy_bias_step_us(model_dir: Path, prompts: list[str], calls: int = 500) -> float:
    """Microseconds one ``copying.next_token`` call takes on these prompts, mid-copy: the
    observation so far is the opening tag and the 30 tokens before the prompt's last 10 (a
    long match, the dearest case), the logits random."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    bias = heldout.card_copy_bias(model_dir) or copying.CopyBias()
    marks = copying.markers(tok, [tok.eos_token_id])
    assert marks.opening is not None
    logits = torch.randn(len(tok))
    greedy = int(logits.argmax())
    cases = []
    for prompt in prompts:
        ids = np.asarray(tok(prompt, add_special_tokens=False)["input_ids"], dtype=np.int64)
        cases.append((ids, [marks.opening, *ids[-40:-10].tolist()]))
    t0 = time.perf_counter()
    for i in range(calls):
        ids, generated = cases[i % len(cases)]
        copying.next_token(logits, ids, generated, bias, marks, greedy)
    return (time.perf_counter() - t0) / calls * 1e6


def size_comparison(model_dir: Path, size: str, prompts: list[str], tokens: int, repeats: int,
                    rounds: int) -> None:
    """Forced decode of ``model_dir`` against a model of ``size`` (train.SIZES) with random
    weights and the same tokenizer, rounds alternating: what a size costs a CPU before any
    such model is trained (the weights do not change the work of a forced token)."""
    from worldserve.training import train

    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / size
        shutil.copytree(model_dir, other, ignore=shutil.ignore_patterns("model*.safetensors*"))
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = train.make_model(len(tok), tok, size)
        model.save_pretrained(other)
        rates: dict[str, list[float]] = {model_dir.name: [], size: []}
        for _ in range(rounds):
            for name, d in ((model_dir.name, model_dir), (size, other)):
                rates[name].append(statistics.median(forced_decode(d, prompts, tokens, repeats)))
    base, new = statistics.median(rates[model_dir.name]), statistics.median(rates[size])
    print(f"Machine: {machine()}; torch threads {torch.get_num_threads()}.")
    print(f"| model | forced decode, batch 1, {tokens} tokens: tokens/s per round | median |")
    print("| --- | --- | --- |")
    for name, runs in rates.items():
        print(f"| {name} | {', '.join(f'{r:.0f}' for r in runs)} | "
              f"{statistics.median(runs):.0f} |")
    print(f"{size} / {model_dir.name}: {new / base:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", default=None,
                    help="compare forced decode with a random-weight model of this size "
                         "(train.SIZES: tiny, wide) instead of the engine measurements")
    ap.add_argument("--rounds", type=int, default=2, help="with --size: rounds alternating")
    args = ap.parse_args()
    torch.manual_seed(0)
    prompts = held_out_prompts(args.model, args.prompts)
    if args.size is not None:
        size_comparison(args.model, args.size, prompts, args.tokens, args.repeats, args.rounds)
        return
    forced = forced_decode(args.model, prompts, args.tokens, args.repeats)
    served, counts = engine_rates(args.model, prompts)
    plain, plain_counts = engine_rates(args.model, prompts, copy_bias=False)
    step_us = copy_bias_step_us(args.model, prompts)
    base = statistics.median(forced)
    print(f"Machine: {machine()}; torch threads {torch.get_num_threads()}.")
    print(f"prompts: {len(prompts)} held-out prompts, median "
          f"{statistics.median(len(p) for p in prompts)} characters")
    print(f"forced decode, batch 1, {args.tokens} tokens: median {base:.0f} tokens/s "
          f"(runs: {', '.join(f'{r:.0f}' for r in forced)})")
    print(f"engine, batch 1, the model's own answers (median {statistics.median(counts):.0f} "
          f"tokens, prefill included): median {statistics.median(served):.0f} tokens/s "
          f"= {statistics.median(served) / base:.2f}x forced decode")
    print(f"engine without copy bias (median {statistics.median(plain_counts):.0f} tokens): "
          f"median {statistics.median(plain):.0f} tokens/s; with it "
          f"{statistics.median(served) / statistics.median(plain):.2f}x that")
    print(f"copy bias alone: {step_us:.0f} us per token mid-copy = "
          f"{step_us * 1e-6 * base:.3f}x a forced-decode step")


if __name__ == "__main__":
    main()
