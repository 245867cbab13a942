"""Train the default world model: collect real trajectories, fit a BPE tokenizer, train a tiny
Qwen3-MoE, evaluate held-out fidelity, save an HF checkpoint. One command, CPU, bounded time.

    python -m worldserve.training.train --out models/worldserve-tiny-moe --minutes 20
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3MoeConfig, Qwen3MoeForCausalLM

from worldserve.domains.chat import render_chat
from worldserve.domains.parsing import parse_completion
from worldserve.training.collect import Sample, collect, write_jsonl
from worldserve.training.fidelity import score_pairs

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKERS = ["<think>", "</think>", "<predicted_observation>", "</predicted_observation>"]
WINDOW = 4


def build_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2,
    )
    tok.train_from_iterator(texts, trainer)
    # One token each, but not "special": decoding with skip_special_tokens must keep them.
    tok.add_tokens([AddedToken(m, special=False, normalized=False) for m in MARKERS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, unk_token=None, additional_special_tokens=SPECIAL[1:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def encode(tok: PreTrainedTokenizerFast, sample: Sample, max_len: int) -> tuple[list[int], int]:
    prompt = render_chat(CHAT_TEMPLATE, sample.messages)
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    t_ids = tok(sample.target + "<|im_end|>", add_special_tokens=False)["input_ids"]
    ids = (p_ids + t_ids)[-max_len:]
    return ids, max(len(ids) - len(t_ids), 0)


def make_model(vocab: int, tok: PreTrainedTokenizerFast) -> Qwen3MoeForCausalLM:
    config = Qwen3MoeConfig(  # type: ignore[call-arg]
        vocab_size=vocab, hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1, norm_topk_prob=True,
        max_position_embeddings=2048, rope_theta=10000.0, tie_word_embeddings=True,
        output_router_logits=False, router_aux_loss_coef=0.001,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    return Qwen3MoeForCausalLM(config)


def batches(data: list[tuple[list[int], int]], batch_tokens: int, rng: random.Random
            ) -> list[list[tuple[list[int], int]]]:
    data = sorted(data, key=lambda x: len(x[0]))
    out: list[list[tuple[list[int], int]]] = []
    cur: list[tuple[list[int], int]] = []
    for item in data:
        if cur and len(item[0]) * (len(cur) + 1) > batch_tokens:
            out.append(cur)
            cur = []
        cur.append(item)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(batch: list[tuple[list[int], int]], pad: int, prompt_weight: float
            ) -> tuple[torch.Tensor, ...]:
    """Inputs, attention mask, and per-token loss weights: the answer counts fully, the prompt
    (history, file listings, earlier observations) with ``prompt_weight`` — language-modelling
    the whole transcript is what teaches a small model to copy names and contents."""
    n = max(len(ids) for ids, _ in batch)
    inp = torch.full((len(batch), n), pad, dtype=torch.long)
    weights = torch.zeros((len(batch), n), dtype=torch.float)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    for i, (ids, start) in enumerate(batch):
        inp[i, : len(ids)] = torch.tensor(ids)
        weights[i, : len(ids)] = prompt_weight
        weights[i, start : len(ids)] = 1.0
        mask[i, : len(ids)] = 1
    return inp, mask, weights


def weighted_loss(logits: torch.Tensor, inp: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy, weighted per target token."""
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), inp[:, 1:].reshape(-1),
        reduction="none")
    w = weights[:, 1:].reshape(-1)
    return (losses * w).sum() / w.sum().clamp(min=1.0)


@torch.no_grad()
def evaluate(model: Qwen3MoeForCausalLM, tok: PreTrainedTokenizerFast, samples: list[Sample],
             max_new: int = 160) -> dict[str, object]:
    model.eval()
    pairs: list[tuple[str, str]] = []
    valid = 0
    for s in samples:
        prompt = render_chat(CHAT_TEMPLATE, s.messages)
        ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new,
                             do_sample=False, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)
        text = str(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
        try:
            predicted = parse_completion(text).observation
            valid += 1
        except ValueError:
            predicted = ""
        pairs.append((predicted, s.observation))
    report = score_pairs(pairs)
    report["format_valid"] = valid / max(len(samples), 1)
    by_domain = {}
    for domain in sorted({s.domain for s in samples}):
        sub = [p for p, s in zip(pairs, samples, strict=True) if s.domain == domain]
        by_domain[domain] = score_pairs(sub)
    report["by_domain"] = by_domain
    return report


def reevaluate(out: Path, eval_samples: int) -> None:
    tok = PreTrainedTokenizerFast.from_pretrained(out)
    model = Qwen3MoeForCausalLM.from_pretrained(out)
    held = [Sample(**json.loads(line)) for line in (out / "data" / "heldout.jsonl").open()]
    report = evaluate(model, tok, held[:eval_samples])
    path = out / "fidelity.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    keep = ("train_steps", "train_seconds", "parameters", "train_samples")
    report.update({k: previous[k] for k in keep if k in previous})
    report["eval_samples"] = min(len(held), eval_samples)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("models/worldserve-tiny-moe"))
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--heldout", type=int, default=60)
    ap.add_argument("--minutes", type=float, default=22.0, help="training time budget")
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--max-len", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt-weight", type=float, default=0.25,
                    help="loss weight of prompt tokens relative to answer tokens")
    ap.add_argument("--eval-samples", type=int, default=100)
    ap.add_argument("--eval-only", action="store_true",
                    help="re-evaluate the checkpoint in --out on its held-out data")
    args = ap.parse_args()
    if args.eval_only:
        reevaluate(args.out, args.eval_samples)
        return

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    t0 = time.time()
    train = collect(args.episodes, seed=args.seed, window=WINDOW)
    held = collect(args.heldout, seed=args.seed + 1_000_003, window=WINDOW)
    print(f"collected {len(train)} train / {len(held)} held-out steps in {time.time() - t0:.0f}s")
    args.out.mkdir(parents=True, exist_ok=True)
    data_dir = args.out / "data"
    data_dir.mkdir(exist_ok=True)
    write_jsonl(held, str(data_dir / "heldout.jsonl"))

    texts = [render_chat(CHAT_TEMPLATE, s.messages) + s.target for s in train[:4000]]
    tok = build_tokenizer(texts, args.vocab)
    encoded = [encode(tok, s, args.max_len) for s in train]
    mean_len = sum(len(e[0]) for e in encoded) / len(encoded)
    print(f"tokenizer vocab {len(tok)}; mean sample {mean_len:.0f} tokens")

    model = make_model(len(tok), tok)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: Qwen3MoeForCausalLM, {n_params / 1e6:.2f} M parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    budget_s = args.minutes * 60
    start = time.time()
    step = 0
    # Schedule by time: warm-up, then cosine decay over the whole budget.
    while step < args.max_steps and time.time() - start < budget_s:
        for batch in batches(encoded, args.batch_tokens, rng):
            frac = (time.time() - start) / budget_s
            if frac >= 1 or step >= args.max_steps:
                break
            lr = args.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
            for g in opt.param_groups:
                g["lr"] = lr
            model.train()
            inp, mask, weights = collate(batch, tok.pad_token_id, args.prompt_weight)
            logits = model(input_ids=inp, attention_mask=mask).logits
            loss = weighted_loss(logits, inp, weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 25 == 0:
                print(f"step {step} loss {loss.item():.4f} lr {lr:.2e} "
                      f"elapsed {time.time() - start:.0f}s", flush=True)
    train_s = time.time() - start
    model.config.use_cache = True
    model.save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    print(f"trained {step} steps in {train_s:.0f}s; saved to {args.out}")

    report = evaluate(model, tok, held[: args.eval_samples])
    report.update({"train_steps": step, "train_seconds": round(train_s), "parameters": n_params,
                   "train_samples": len(train), "eval_samples": min(len(held), args.eval_samples)})
    (args.out / "fidelity.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
