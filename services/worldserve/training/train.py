"""Train the default world model: collect real episodes, fit a tokenizer, train a small Qwen3-MoE,
evaluate on held-out episodes, save a Hugging Face checkpoint with its model card. One command.

    python -m worldserve.training.train --profile quick   # ≤ 30 min on 2 CPU cores
    python -m worldserve.training.train --profile broad   # the committed checkpoint

Resumable: data, tokenizer and a training checkpoint (every few minutes) live in ``--work``; a
rerun with the same arguments continues from the last checkpoint (progress in
``<work>/progress.log``). Uses a CUDA device when there is one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3MoeConfig, Qwen3MoeForCausalLM

from worldserve.training import arith, card, growth, precision, recall
from worldserve.training.collect import FAULT_RATE, Episode, Focus, collect, collect_workers
from worldserve.training.memory import memory_trimmer
from worldserve.training.sequence import PROMPT_WEIGHT, segments
from worldserve.training.words import pieces, rare_weights, words

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
MAX_LEN = 2048  # tokens of a training sequence (its last; --max-len)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKERS = ["<think>", "</think>", "<predicted_observation>", "</predicted_observation>"]
# Whitespace, punctuation and digits are tokens of their own: a name is tokenized the same way
# wherever it appears (after a space, a comma or a newline), which is what copying needs.
PIECES = r"\s|\d|[^\w\s]+"

# The models a first stage can start: "tiny" is worldserve-tiny-moe (7.9 M parameters, 31 MB in
# float32); "wide" is 2.1x its parameters at the same depth (16.9 M; 34 MB in bfloat16, the
# committed limit being 60 MB), for a budget only a GPU gives (the "gpu" profile).
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 256, "layers": 4, "heads": 8, "kv_heads": 4, "experts": 8, "expert": 256},
    "wide": {"hidden": 384, "layers": 4, "heads": 12, "kv_heads": 4, "experts": 8,
             "expert": 384},
}
WEIGHT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Stage:
    """One training run: its own data (seed, size, fault share), budget and peak lr. A stage
    after the first starts from the weights and tokenizer of the one before (fresh optimizer)."""

    episodes: int
    minutes: float
    seed: int = 0
    fault_rate: float = FAULT_RATE
    lr: float = 2e-3
    warmup_steps: int = 100
    focus: Focus = ()  # Terminal command categories drawn more (or less) often than usual
    commands: str = "trained"  # Terminal command kinds drawn (terminal.COMMAND_SETS)
    layers: int = 0  # deepen the model the stage starts from to this many layers (growth.py)
    wider_heads: bool = False  # start from twice the attention heads (growth.widen_heads)
    reasoning: str = "plain"  # the reasoning each answer is trained to give (recall.STYLES)
    size: str = "tiny"  # the model a first stage starts (SIZES); later stages keep theirs
    batch_tokens: int = 0  # tokens per batch (padded); 0: the profile's
    # Share of drawn words that are piece words of the tokenizer it continues (words.Vocab);
    # a first stage has no tokenizer before its data, so it must leave this 0.
    piece_share: float = 0.0
    # Pieces drawn in inverse proportion to how often the list words carry them
    # (words.rare_weights; session 29) instead of all as often; needs a piece share.
    rare_pieces: bool = False
    # Loss weight of the prompt's tokens (system prompt, state, actions); None: the run's
    # --prompt-weight (sequence.PROMPT_WEIGHT). Session 32: at 0.1 they carry 71 % of @11's
    # weighted held-out loss, most of it on random words no model can predict (loss_share.py).
    prompt_weight: float | None = None

    def __post_init__(self) -> None:  # before minutes of collection, not after
        recall.check_style(self.reasoning)
        if self.prompt_weight is not None and not 0.0 <= self.prompt_weight <= 1.0:
            raise ValueError(f"prompt weight {self.prompt_weight} is not in [0, 1]")
        if self.size not in SIZES:
            raise ValueError(f"unknown model size {self.size!r}; known: {sorted(SIZES)}")
        if not 0.0 <= self.piece_share < 1.0:
            raise ValueError(f"piece share {self.piece_share} is not in [0, 1)")
        if self.rare_pieces and not self.piece_share:
            raise ValueError("rare pieces need a piece share")

    def loss_prompt_weight(self, run_default: float) -> float:
        """The loss weight this stage gives its prompt tokens: its own, else the run's."""
        return run_default if self.prompt_weight is None else self.prompt_weight


@dataclass(frozen=True)
class Profile:
    stages: tuple[Stage, ...]
    eval_episodes: int
    batch_tokens: int = 4096
    weights: str = "float32"  # how the exported checkpoint stores its weights (WEIGHT_DTYPES)

    def __post_init__(self) -> None:
        if self.weights not in WEIGHT_DTYPES:
            raise ValueError(f"unknown weight type {self.weights!r}; known: "
                             f"{sorted(WEIGHT_DTYPES)}")


_FULL = (Stage(episodes=12000, minutes=115.0),
         Stage(episodes=16000, minutes=105.0, seed=1, fault_rate=0.5, lr=1.5e-3),
         Stage(episodes=16000, minutes=85.0, seed=2, fault_rate=0.4, lr=1e-3),
         Stage(episodes=16000, minutes=90.0, seed=3, fault_rate=0.4, lr=1e-3),
         Stage(episodes=16000, minutes=75.0, seed=5, fault_rate=0.4, lr=1e-3),
         Stage(episodes=16000, minutes=90.0, seed=7, fault_rate=0.4, lr=3e-4, warmup_steps=50))
_BROAD = replace(_FULL[-1], minutes=80.0, seed=11, commands="all")
_BATCH = replace(_BROAD, episodes=16000, minutes=50.0, seed=31, lr=5e-4, warmup_steps=100,
                 batch_tokens=16384)
_BATCH2 = replace(_BATCH, minutes=60.0, seed=37)
# The nine stages that made @10; the experiments of sessions 25-28 continue it.
_AT10 = (*_FULL, _BROAD, _BATCH, _BATCH2)
# 4,096-token batches at broad's peak lr: on a CPU without native bf16 (float32) they train
# twice the tokens per second of 16,384-token ones (session 25: ~3,000 against ~1,500).
_LINES = replace(_BROAD, episodes=12000, minutes=50.0, seed=43, reasoning=recall.LINES,
                 focus=(("counting", 2.0), ("searching", 1.5), ("reading", 1.25)))
# Batches four times @10's again (65,536 tokens), on 24,000 fresh episodes: @9's gain came with
# the first 4x (session 23); this stage asked whether a second 4x gains again (session 26: no
# clear gain; docs/MODEL.md "Not adopted: batches of 65,536 tokens").
_BATCH64 = replace(_BATCH, episodes=24000, minutes=90.0, seed=47, warmup_steps=30,
                   batch_tokens=65536)
# A gentle stage (session 27): every stage so far warmed up to its peak lr again and ended at
# a tenth of it; this one continues @10 at a low peak (1.5e-4, ending at 1.5e-5) in 4,096-token
# batches (the faster size on a CPU without native bf16), on 16,000 fresh episodes: does
# annealing what @10 knows gain where another stage at 5e-4 tied? (No: docs/MODEL.md.)
_ANNEAL = replace(_BATCH, minutes=70.0, seed=53, lr=1.5e-4, warmup_steps=20, batch_tokens=4096)
# Piece words (session 28): @10's stage again on fresh episodes in which a quarter of the words
# and names are joined from its tokenizer's word tokens (words.Vocab), so that every token is
# copied as content somewhere: `make demo` loses `todo` (never content in @10's data) and
# `error` (only ever a JSON key there).
_PIECES = replace(_BATCH2, minutes=60.0, seed=59, piece_share=0.25)
# The ten stages that made @11; the experiments of sessions 29-34 continue it.
_AT11 = (*_AT10, _PIECES)
# More and rarer pieces (session 29): @11's stage again, with 35 % piece words instead of 25 %,
# drawn in inverse proportion to the square root of how often the list words carry them
# (words.rare_weights): with every piece as likely, a piece in 1,000 episodes is content 5
# times at the median and 235 pieces not at all.
_RARE = replace(_PIECES, minutes=55.0, seed=61, piece_share=0.35, rare_pieces=True)
# A longer eleventh stage of @11's own recipe (session 30): with the per-step trim (session 29)
# a CPU stage trains ~1.5x the tokens per minute, so 85 minutes is ~15 M fresh tokens, more
# than any stage since @9 saw.
_PIECES2 = replace(_PIECES, minutes=85.0, seed=67)
# Session 31: @11's recipe, the answers that compute worked out digit by digit in their
# reasoning (arith.py), half the fault-free Terminal episodes ending on one, MCP add and
# multiply drawn twice as often.
_ARITH = replace(_PIECES, minutes=80.0, seed=71, reasoning=arith.ARITH,
                 focus=(("mcp:add", 2.0), ("mcp:multiply", 2.0)))
# Session 32: pieces2's stage (the same episodes: data seed 67) trained on the answers alone.
# At a prompt weight of 0.1 the prompt's tokens carry 71 % of @11's weighted loss on held-out
# episodes (loss_share.py), most of it on random words that no model can predict. Not adopted:
# net +2 turns over the four sets (821 steps, 13.0 M tokens), and the answers' own held-out
# loss moved as little (0.144 -> 0.142; validation 0.145 -> 0.148): docs/MODEL.md.
_ANSWERS = replace(_PIECES2, minutes=80.0, prompt_weight=0.0)
# Session 33: pieces2's stage (the same episodes: data seed 67) on twice the attention heads, 16
# query and 8 key/value heads of 32 (growth.widen_heads: each trained head kept twice, so the
# stage starts from @11's answers; +0.79 M parameters; it trained at about the 8-head rate,
# ~2,700 tokens/s). Most of @11's listing and reading misses are a copy that drops, repeats
# or picks the wrong item, which is attention's work; the deeper model of session 19 added
# layers, not heads. Not adopted: net 0 turns over the four sets (966 steps, 15.3 M tokens;
# held-out answers' loss 0.144 -> 0.140), and 0.84x @11's decoding speed: docs/MODEL.md.
_HEADS = replace(_PIECES2, minutes=95.0, wider_heads=True)
# Session 34: @11's recipe on fresh episodes where a truncated output is cut in its first line
# (shell.truncation_keep) instead of at 55 % of its bytes, and a Terminal fault is a truncation
# three times as often as any other kind (so half the Terminal faults are truncations).
_CUT = replace(_PIECES, minutes=55.0, seed=73, focus=(("fault:truncated_output", 3.0),))
# The eleven stages that made @12 (session 34).
_AT12 = (*_AT11, _CUT)
# Session 35: _CUT's recipe on fresh episodes (data seed 79) where a truncated output ends at
# its first word (shell.truncation_keep) instead of halfway through its first line: @12 cut
# 1 of 5 held-out truncations where they end, and a word's end needs no counting.
_WORD = replace(_CUT, seed=79)
# The twelve stages that made the committed @13 (`make train`).
_AT13 = (*_AT12, _WORD)
# Session 36: @13's recipe on fresh episodes (data seed 83) that draw the error kinds (missing
# file, typo, directory as a file, mkdir of an existing directory) three times as often: @13
# answered 7 of 23 held-out error turns, 5 fewer than @12, most of them a state question (does
# this name exist now, and is it a file?). Not adopted: it says "No such file" more often,
# not more rightly (docs/MODEL.md).
_ERRORS = replace(_WORD, seed=83, focus=(*_WORD.focus, ("errors", 3.0)))
PROFILES = {
    # The recipe in small, on every command kind there is (those the committed stages drew and
    # the coreutils beyond them: terminal.BEYOND).
    "quick": Profile((Stage(episodes=4000, minutes=20.0, commands="all"),), eval_episodes=40),
    # Stage 1 made worldserve-tiny-moe@2; stage 2 continues it on fresh data (other seed) with
    # half the episodes ending in a fault (@3); stage 3 continues @3 on fresh data again at a
    # lower peak lr (@4); stage 4 continues @4 on data whose states are worded in more of the
    # ways users write them, with paths as a user names them (@5); stage 5 continues @5 on
    # fresh data of the usual mix (data seed 5; @6, session 10, on a faster CPU); stage 6
    # continues @6 on fresh data (seed 7) at a peak lr of 3e-4 (@7, session 14; docs/MODEL.md).
    "full": Profile(_FULL, eval_episodes=120),
    # The committed checkpoint (@8, session 18; `make train`): a seventh stage continues @7
    # (full's sixth) on fresh data that draws every command kind there is, the coreutils beyond
    # the first list included (terminal.BEYOND), at @7's low peak lr. With --work holding
    # full's six stages (or @7 placed as stage 6: docs/MODEL.md) it trains this one only.
    "broad": Profile((*_FULL, _BROAD), eval_episodes=120),
    # @9 (session 23): an eighth stage continues @8 on
    # 16,000 fresh episodes of every command kind in batches of 16,384 tokens, four times the
    # earlier stages' (676 steps, 10.7 M tokens; docs/MODEL.md). With --work holding broad's
    # seven stages, or --continue-from a directory holding @8, it trains this one only.
    "batch": Profile((*_FULL, _BROAD, _BATCH), eval_episodes=120),
    # @10 (session 24): a ninth stage continues @9 with the same recipe on 16,000 other fresh
    # episodes (data seed 37) for 60 minutes (556 steps, 8.8 M tokens; docs/MODEL.md). With
    # --work holding batch's eight stages, or --continue-from a directory holding @9, it
    # trains this one only.
    "batch2": Profile(_AT10, eval_episodes=120),
    # An experiment (session 25, not adopted: held-out 0.611 against @10's 0.646; the model
    # learnt to write the listing but got it right on 8 of 22 checkable turns; docs/MODEL.md):
    # a tenth stage continues @10 (broad's recipe) on 12,000 fresh episodes (data seed 43)
    # whose commands that count, search or cut lines (terminal.NUMBERED_KINDS) reason by
    # listing the file's lines, numbered as grep -n numbers them, before they answer; counting
    # and searching drawn more often. With --continue-from a directory holding @10 it trains
    # this one only.
    "lines": Profile((*_AT10, _LINES), eval_episodes=120),
    # An experiment (session 26, not adopted: held-out 0.644 against @10's 0.646, validation
    # 0.647 against 0.619, beyond-list 0.553 against 0.565; docs/MODEL.md): a tenth stage
    # continues @10 in batches of 65,536 tokens on 24,000 fresh episodes (data seed 47) for 90
    # minutes (187 steps, 12.1 M tokens). With --continue-from a directory holding @10 it trains
    # this one only.
    "batch64": Profile((*_AT10, _BATCH64), eval_episodes=120),
    # An experiment (session 27, not adopted: held-out 0.649 against @10's 0.646, validation
    # 0.616 against 0.619, beyond-list 0.569 against 0.565; 30 turns won, 29 lost over the
    # three sets; docs/MODEL.md): a tenth stage continues @10 at a low peak lr (_ANNEAL) for 70
    # minutes (2,453 steps, 8.6 M tokens). With --continue-from a directory holding @10 it
    # trains this one only.
    "anneal": Profile((*_AT10, _ANNEAL), eval_episodes=120),
    # @11 (session 28): a tenth stage continues @10 with its recipe on 16,000 fresh episodes
    # (data seed 59) a quarter of whose words and names are piece words (_PIECES; 759 steps,
    # 12.0 M tokens; docs/MODEL.md). With --continue-from a directory holding @10 it trains
    # this one only.
    "pieces": Profile(_AT11, eval_episodes=120),
    # An experiment (session 29, not adopted: held-out 0.648 as @11, validation 0.628 against
    # 0.631, piece-word set 0.646 against 0.648; 507 steps, 8.0 M tokens; docs/MODEL.md): an
    # eleventh stage continues @11 with its recipe on 16,000 fresh episodes (data seed 61), 35 %
    # of whose words are piece words that draw the rarely carried pieces more (_RARE). With
    # --continue-from a directory holding @11 it trains this one only.
    "rare": Profile((*_AT11, _RARE), eval_episodes=120),
    # An experiment (session 30, not adopted: held-out 0.649 against @11's 0.648, validation
    # 0.614 against 0.631, beyond-list 0.575 as @11; 998 steps, 15.8 M tokens; docs/MODEL.md):
    # an eleventh stage continues @11 with its own recipe on 16,000 fresh episodes (data seed
    # 67) for 85 minutes (_PIECES2). With --continue-from a directory holding @11 it trains
    # this one only.
    "pieces2": Profile((*_AT11, _PIECES2), eval_episodes=120),
    # An experiment (session 31, not adopted: net -26 turns over four sets, validation 0.605
    # against @11's 0.631; the workings' form learnt, their digit facts not, 0 of 116 computing
    # turns right; 930 steps, 14.7 M tokens; docs/MODEL.md): an eleventh stage continues @11
    # with its recipe, answers that add, subtract or multiply worked out column by column in
    # their reasoning (_ARITH; arith.py). With --continue-from a directory holding @11 it
    # trains this one only.
    "arith": Profile((*_AT11, _ARITH), eval_episodes=120),
    # An experiment (session 32, not adopted: net +2 turns over the four sets; docs/MODEL.md):
    # an eleventh stage continues @11 on pieces2's episodes with the loss on the answers alone
    # (prompt weight 0; _ANSWERS). With --continue-from a directory holding @11 it trains this
    # one only.
    "answers": Profile((*_AT11, _ANSWERS), eval_episodes=120),
    # An experiment (session 33, not adopted: net 0 turns over the four sets; docs/MODEL.md):
    # an eleventh stage continues @11 with twice the attention heads (_HEADS), on pieces2's
    # episodes and recipe. With --continue-from a directory holding @11 it trains this one
    # only.
    "heads": Profile((*_AT11, _HEADS), eval_episodes=120),
    # @12 (session 34): an eleventh stage continues @11 with its recipe on 16,000 fresh
    # episodes (data seed 73) whose truncated outputs are cut in their first line, half the
    # Terminal faults truncations (_CUT; 649 steps, 10.3 M tokens; docs/MODEL.md). With
    # --continue-from a directory holding @11 it trains this one only.
    "cut": Profile(_AT12, eval_episodes=120),
    # The committed checkpoint (@13, session 35; `make train`): a twelfth stage continues @12
    # with its recipe on 16,000 fresh episodes (data seed 79) whose truncated outputs end at
    # their first word (_WORD; 644 steps, 10.2 M tokens; docs/MODEL.md). With --continue-from
    # a directory holding @12 it trains this one only.
    "word": Profile(_AT13, eval_episodes=120),
    # An experiment (session 36, not adopted: error turns +6 over held-out and validation, but
    # error messages where the real output had none 6 -> 18 there, and `make demo` 4 -> 3 of 7;
    # docs/MODEL.md): a thirteenth stage continues @13 with its recipe, the error kinds drawn
    # three times as often (_ERRORS; 331 steps, 5.24 M tokens on an AVX2 CPU). With
    # --continue-from a directory holding @13 it trains this one only.
    "errors": Profile((*_AT13, _ERRORS), eval_episodes=120),
    # An experiment (session 19, not adopted: within noise of @8, 0.74x its decoding speed;
    # docs/MODEL.md): an eighth stage deepens @8 from four layers to six (block expansion: the
    # new layers start as silent copies, growth.py) and trains it on fresh data of every
    # command kind. With --work holding broad's seven stages it trains this one only.
    "deep": Profile((*_FULL, _BROAD, replace(_BROAD, minutes=95.0, seed=13, lr=5e-4,
                                            warmup_steps=100, layers=6)), eval_episodes=120),
    # An experiment (session 20, not adopted: held-out 0.622 against @8's 0.623, reads after a
    # write 12 of 71 against 17; docs/MODEL.md): an eighth stage continues @8 on fresh data of
    # every command kind, its answers' reasoning recalling the earlier commands that changed
    # what a read reads (recall.py). With --work holding broad's seven stages it trains this
    # one only.
    "recall": Profile((*_FULL, _BROAD, replace(_BROAD, minutes=80.0, seed=17, lr=5e-4,
                                              warmup_steps=100, reasoning="recall")),
                      eval_episodes=120),
    # An experiment (session 21, not adopted: held-out 0.627 against @8's 0.624, validation
    # 0.619 against 0.609, more answers out of format; docs/MODEL.md): an eighth stage
    # continues @8 on 24,000 fresh episodes of every command kind for 100 minutes, 22.5 M
    # tokens. With --work holding broad's seven stages it trains this one only.
    "long": Profile((*_FULL, _BROAD, replace(_BROAD, episodes=24000, minutes=100.0, seed=19,
                                            lr=5e-4, warmup_steps=100)), eval_episodes=120),
    # An experiment (session 22, not adopted: held-out 0.618 against @8's 0.624, validation
    # 0.602 against 0.609; on a set of computing turns 0.546 against 0.492, sums learnt a
    # little, products not; docs/MODEL.md): an eighth stage continues @8 on fresh data of every
    # command kind in which the kinds that compute rather than copy are drawn more often:
    # shell arithmetic (python3 -c, $((...)), expr, seq) and the MCP tools add, multiply and
    # to_upper (15 of @8's 20 held-out arithmetic turns wrong, and 26 of its 47 MCP misses).
    # With --work holding broad's seven stages it trains this one only.
    "compute": Profile((*_FULL, _BROAD, replace(
        _BROAD, episodes=14000, minutes=70.0, seed=23, lr=5e-4, warmup_steps=100,
        focus=(("arithmetic", 4.0), ("mcp:add", 2.0), ("mcp:multiply", 2.0),
               ("mcp:upper", 2.0)))), eval_episodes=120),
    # For a lent GPU (session 23; scripts/device_train.sh, docs/MODEL.md "On a lent GPU"):
    # the "wide" model from scratch, on 24,000 episodes of every command kind (collected with
    # a worker per core), in batches four times the CPU stages', for 4 minutes of training:
    # collection, training and the held-out evaluation fit one 10-minute device call. Not yet
    # run on a GPU.
    "gpu": Profile((Stage(episodes=24000, minutes=4.0, seed=29, fault_rate=0.4, lr=2e-3,
                          warmup_steps=200, commands="all", size="wide"),),
                   eval_episodes=120, batch_tokens=16384, weights="bfloat16"),
    # The other choice for a lent GPU (session 23, not yet run there): a thirteenth stage
    # continues @13 (`--continue-from models/worldserve-tiny-moe`) with its own recipe (batches
    # of 16,384 tokens, a quarter piece words, truncations ending at the first word) on 24,000
    # fresh episodes of every command kind, for 4 minutes.
    "gpu-continue": Profile((*_AT13,
                             replace(_WORD, episodes=24000, minutes=4.0, seed=41)),
                            eval_episodes=120),
    # An experiment (session 9, not adopted): a fifth stage continues @5 on data that draws the
    # kinds @5 gets wrong (reading, listing, searching, transforming) more often and the writes
    # it gets right less often. Reading rose, counting fell; overall held-out exact 0.59 either
    # way (docs/MODEL.md). With --work .worldserve/train-full it reuses full's first four.
    "focused": Profile((*_FULL[:4], Stage(
        episodes=14000, minutes=95.0, seed=4, fault_rate=0.4, lr=1e-3,
        focus=(("reading", 2.5), ("listing", 2.0), ("searching", 2.0), ("transforming", 2.0),
               ("counting", 1.5), ("writing", 0.6)))), eval_episodes=120),
}
HELDOUT_SEED = 1_000_003


def build_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PIECES), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=4,
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


def segment_ids(tok: PreTrainedTokenizerFast, ep: Episode, template: str, prompt_weight: float,
                style: str = "plain") -> list[tuple[list[int], float]]:
    """The token ids and loss weight of each piece of ``ep``'s sequence (sequence.segments)."""
    return [(tok(text, add_special_tokens=False)["input_ids"], w)
            for text, w in segments(ep, template, prompt_weight, style)]


def encode(tok: PreTrainedTokenizerFast, ep: Episode, max_len: int, prompt_weight: float,
           style: str = "plain") -> tuple[list[int], list[float]]:
    """``ep`` as one training sequence: its last ``max_len`` token ids and their weights."""
    ids: list[int] = []
    weights: list[float] = []
    for piece, w in segment_ids(tok, ep, CHAT_TEMPLATE, prompt_weight, style):
        ids += piece
        weights += [w] * len(piece)
    return ids[-max_len:], weights[-max_len:]


def make_model(vocab: int, tok: PreTrainedTokenizerFast, size: str = "tiny"
               ) -> Qwen3MoeForCausalLM:
    shape = SIZES[size]
    config = Qwen3MoeConfig(  # type: ignore[call-arg]
        vocab_size=vocab, hidden_size=shape["hidden"], intermediate_size=2 * shape["hidden"],
        moe_intermediate_size=shape["expert"], num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"], head_dim=32,
        num_experts=shape["experts"], num_experts_per_tok=2, decoder_sparse_step=1,
        norm_topk_prob=True,
        max_position_embeddings=4096, rope_theta=10000.0, tie_word_embeddings=True,
        output_router_logits=False, router_aux_loss_coef=0.001,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    return Qwen3MoeForCausalLM(config)


Item = tuple[list[int], list[float]]


def batches(data: list[Item], batch_tokens: int, rng: random.Random) -> list[list[Item]]:
    """Length-sorted buckets of at most ``batch_tokens`` (padded) tokens, in random order."""
    order = sorted(data, key=lambda x: len(x[0]) + rng.random())
    out: list[list[Item]] = []
    cur: list[Item] = []
    for item in order:
        if cur and len(item[0]) * (len(cur) + 1) > batch_tokens:
            out.append(cur)
            cur = []
        cur.append(item)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(batch: list[Item], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = max(len(ids) for ids, _ in batch)
    inp = torch.full((len(batch), n), pad, dtype=torch.long)
    weights = torch.zeros((len(batch), n), dtype=torch.float)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    for i, (ids, w) in enumerate(batch):
        inp[i, : len(ids)] = torch.tensor(ids)
        weights[i, : len(ids)] = torch.tensor(w)
        mask[i, : len(ids)] = 1
    return inp, mask, weights


def forward_inputs(inp: torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's inputs for a batch from ``collate``. No attention mask: ``collate`` pads on
    the right and attention is causal, so no real token ever attends to padding, positions
    count from 0 either way, and padding carries no loss weight. Without a mask, SDPA takes
    its causal fast path: 1.25x the tokens per second on a 2-core Xeon (docs/MODEL.md)."""
    return {"input_ids": inp}


def weighted_loss(logits: torch.Tensor, inp: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy; token t's weight applies to predicting token t."""
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), inp[:, 1:].reshape(-1),
        reduction="none")
    w = weights[:, 1:].reshape(-1)
    return (losses * w).sum() / w.sum().clamp(min=1.0)


def optimizer_step(model: Qwen3MoeForCausalLM, opt: torch.optim.Optimizer,
                   inputs: dict[str, torch.Tensor], inp: torch.Tensor, weights: torch.Tensor,
                   autocast: contextlib.AbstractContextManager[object]) -> torch.Tensor:
    """One training step on a batch from ``collate`` (``inputs``: what the model is given);
    gradients clipped to norm 1. Returns the batch's weighted loss."""
    with autocast:
        logits = model(**inputs).logits
    loss = weighted_loss(logits, inp, weights)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


# Above this many tokens per batch, a CPU stage hands its freed memory back to the system after
# every step (memory.py says why and what it costs).
LARGE_CPU_BATCH = 4096


def log(work: Path, line: str) -> None:
    print(line, flush=True)
    with (work / "progress.log").open("a") as fh:
        fh.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def _save_checkpoint(path: Path, state: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


@dataclass
class StageResult:
    model: Qwen3MoeForCausalLM
    tok: PreTrainedTokenizerFast
    record: dict[str, object]


def stage_dir(work: Path, index: int) -> Path:
    return work / f"stage{index + 1}"


def _load_tokenizer(d: Path) -> PreTrainedTokenizerFast:
    tok = PreTrainedTokenizerFast.from_pretrained(d)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _word_tokens(tok: PreTrainedTokenizerFast) -> list[list[str]]:
    """The training split's list words as ``tok`` splits them after a space (as in a file)."""
    encodings = tok.backend_tokenizer.encode_batch([" " + w for w in words("train")],
                                                   add_special_tokens=False)
    return [e.tokens for e in encodings]


def run_stage(args: argparse.Namespace, work: Path, index: int, stage: Stage,
              batch_tokens: int) -> StageResult:
    """Train one stage to its budget (resuming its checkpoint); the model stays in memory."""
    sdir = stage_dir(work, index)
    sdir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed + index)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    prev = stage_dir(work, index - 1) / "model" if index else None
    tok_dir = sdir / "tokenizer"
    # A later stage keeps the tokenizer of the one before; only a first stage fits one to its
    # data. Loaded before collection: piece words are drawn from it.
    tok: PreTrainedTokenizerFast | None = None
    if (tok_dir / "tokenizer.json").exists():
        tok = _load_tokenizer(tok_dir)
    elif prev is not None:
        tok = _load_tokenizer(prev)
        tok.save_pretrained(tok_dir)
    piece_list: tuple[str, ...] = ()
    piece_weights: tuple[float, ...] = ()
    if stage.piece_share:
        if prev is None or tok is None:
            raise ValueError("a first stage has no tokenizer to draw piece words from")
        piece_list = pieces(tok.get_vocab())
        if stage.rare_pieces:
            piece_weights = rare_weights(piece_list, _word_tokens(tok))
    train_eps = collect(sdir / "train.jsonl", stage.episodes, seed=args.seed + stage.seed,
                        workers=args.workers, fault_rate=stage.fault_rate, focus=stage.focus,
                        commands=stage.commands, reasoning=stage.reasoning,
                        pieces=piece_list, piece_share=stage.piece_share,
                        piece_weights=piece_weights)
    log(work, f"stage {index + 1}: {len(train_eps)} train episodes "
              f"(seed {args.seed + stage.seed}, fault share {stage.fault_rate}, "
              f"focus {dict(stage.focus) or 'none'}, commands {stage.commands}"
              + (f", piece words {stage.piece_share} of {len(piece_list)} pieces"
                 + (", the rare drawn more)" if piece_weights else ")") if piece_list else ")"))
    if tok is None:
        texts = ["".join(t for t, _ in segments(e, CHAT_TEMPLATE, 0.0)) for e in train_eps[:3000]]
        tok = build_tokenizer(texts, args.vocab)
        tok.save_pretrained(tok_dir)
    prompt_weight = stage.loss_prompt_weight(args.prompt_weight)
    encoded = [encode(tok, e, args.max_len, prompt_weight, stage.reasoning)
               for e in train_eps]
    total_tokens = sum(len(ids) for ids, _ in encoded)
    log(work, f"tokenizer: {len(tok)} entries; {total_tokens / 1e6:.2f} M tokens per epoch, "
              f"{sum(sum(1 for x in w if x == 1.0) for _, w in encoded) / 1e6:.2f} M answer tokens"
              f"; prompt tokens weigh {prompt_weight}")

    if prev is not None:
        if stage.size != "tiny":  # never a silently ignored field
            raise ValueError(f"stage {index + 1} continues {prev}: a size is for a first stage")
        model = Qwen3MoeForCausalLM.from_pretrained(prev, dtype=torch.float32)
        log(work, f"stage {index + 1} starts from {prev}")
    else:
        model = make_model(len(tok), tok, stage.size)
        log(work, f"stage {index + 1} starts a {stage.size} model from scratch "
                  f"({sum(p.numel() for p in model.parameters()):,} parameters)")
    if stage.layers:  # also on a first stage: never a silently ignored field
        model = growth.deepen(model, stage.layers)
        log(work, f"deepened to {stage.layers} layers (new layers start silent)")
    if stage.wider_heads:
        model = growth.widen_heads(model, seed=args.seed + stage.seed)
        log(work, f"widened to {model.config.num_attention_heads} query and "
                  f"{model.config.num_key_value_heads} key/value heads "
                  f"({sum(p.numel() for p in model.parameters()):,} parameters)")
    model.to(device)  # type: ignore[arg-type]
    opt = torch.optim.AdamW(model.parameters(), lr=stage.lr, weight_decay=0.01,
                            betas=(0.9, 0.95))
    ckpt = sdir / "checkpoint.pt"
    step, elapsed, seen = 0, 0.0, 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, elapsed, seen = state["step"], state["elapsed"], state["tokens"]
        log(work, f"resumed at step {step}, {elapsed:.0f}s trained, {seen / 1e6:.2f} M tokens")
    budget_s = stage.minutes * 60
    rng = random.Random(f"{args.seed}:{index}:{step}")
    bf16 = precision.use_bf16(device)
    autocast = precision.autocast(device, bf16)
    log(work, f"stage {index + 1} trains on {device} in {'bf16 autocast' if bf16 else 'float32'}")
    trim = memory_trimmer() if device == "cpu" and batch_tokens > LARGE_CPU_BATCH else None
    if trim is not None:
        log(work, f"batches of {batch_tokens} tokens on a CPU: free memory goes back to the "
                  "system after every step (glibc malloc_trim)")
    last_save = time.time()
    start = time.time() - elapsed

    def save() -> None:
        _save_checkpoint(ckpt, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                "step": step, "elapsed": time.time() - start, "tokens": seen})

    while time.time() - start < budget_s:
        for batch in batches(encoded, batch_tokens, rng):
            frac = (time.time() - start) / budget_s
            if frac >= 1:
                break
            lr = (stage.lr * min(1.0, (step + 1) / stage.warmup_steps)
                  * (0.1 + 0.45 * (1 + math.cos(math.pi * frac))))
            for g in opt.param_groups:
                g["lr"] = lr
            model.train()
            inp, mask, weights = (t.to(device) for t in collate(batch, tok.pad_token_id))
            loss = optimizer_step(model, opt, forward_inputs(inp), inp, weights, autocast)
            if trim is not None:
                trim()
            step += 1
            seen += int(mask.sum())
            if step % 20 == 0:
                log(work, f"step {step} loss {loss.item():.4f} lr {lr:.2e} tokens "
                          f"{seen / 1e6:.2f}M elapsed {time.time() - start:.0f}s")
            if time.time() - last_save > args.checkpoint_minutes * 60:
                save()
                last_save = time.time()
    save()
    elapsed = time.time() - start
    log(work, f"trained {step} steps, {seen / 1e6:.2f} M tokens in {elapsed:.0f}s")
    record = {"stage": index + 1, "train_episodes": len(train_eps), "data_seed": args.seed + stage.seed,
              "fault_share": stage.fault_rate, "peak_lr": stage.lr,
              **({"focus": dict(stage.focus)} if stage.focus else {}),
              **({"commands": stage.commands} if stage.commands != "trained" else {}),
              **({"layers": stage.layers} if stage.layers else {}),
              **({"wider_heads": True} if stage.wider_heads else {}),
              **({"reasoning": stage.reasoning} if stage.reasoning != "plain" else {}),
              **({"piece_share": stage.piece_share} if stage.piece_share else {}),
              **({"rare_pieces": True} if stage.rare_pieces else {}),
              **({"prompt_weight": prompt_weight} if prompt_weight != PROMPT_WEIGHT else {}),
              "batch_tokens": batch_tokens,
              "tokens_per_epoch": total_tokens, "tokens_seen": seen, "steps": step,
              "train_seconds": round(elapsed), "device": device,
              "precision": "bf16" if bf16 else "float32"}
    return StageResult(model, tok, record)


def export(result: StageResult, out: Path, training: dict[str, object],
           weights: str = "float32") -> None:
    """A Hugging Face checkpoint directory: weights (stored as ``weights``; the model in memory
    keeps its float32 ones), tokenizer, chat template, training.json."""
    out.mkdir(parents=True, exist_ok=True)
    model = result.model
    model.config.use_cache = True
    model.to("cpu")  # type: ignore[arg-type]
    if weights == "float32":
        model.save_pretrained(out, safe_serialization=True)
    else:
        copy = Qwen3MoeForCausalLM(model.config)
        copy.load_state_dict(model.state_dict())
        copy.to(WEIGHT_DTYPES[weights])  # type: ignore[arg-type]
        copy.save_pretrained(out, safe_serialization=True)
    result.tok.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    (out / "training.json").write_text(json.dumps(training, indent=2) + "\n")


def _stage_record(d: Path) -> dict[str, object]:
    """What a finished stage's training.json says about that stage (its last record)."""
    raw = json.loads((d / "training.json").read_text())
    stages = raw.get("stages")
    return dict(stages[-1]) if stages else {k: v for k, v in raw.items() if k != "profile"}


def place_checkpoint(model_dir: Path, work: Path, stages: int) -> None:
    """Set ``work`` up so that a profile of ``stages`` stages trains its last one only, from
    ``model_dir`` (a checkpoint whose training.json lists exactly ``stages - 1`` stages): it
    becomes stage ``stages - 1``'s model, and each earlier stage gets the config and record
    that say it is done. Stages already in ``work`` are left as they are."""
    done = json.loads((model_dir / "training.json").read_text()).get("stages", [])
    if len(done) != stages - 1:  # else the records would not say what the weights went through
        raise ValueError(f"{model_dir} records {len(done)} stages; this profile's last stage "
                         f"continues stage {stages - 1}")
    for index in range(stages - 1):
        target = stage_dir(work, index) / "model"
        if (target / "config.json").exists():
            continue
        if index == stages - 2:
            shutil.copytree(model_dir, target, ignore=shutil.ignore_patterns("data"),
                            dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(model_dir / "config.json", target / "config.json")
        (target / "training.json").write_text(json.dumps(
            {"profile": "placed", "stages": done[:index + 1]}, indent=2) + "\n")


def train(args: argparse.Namespace, profile: Profile) -> None:
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    if args.continue_from is not None:
        place_checkpoint(args.continue_from, work, len(profile.stages))
    held = collect(work / "heldout.jsonl", profile.eval_episodes, seed=HELDOUT_SEED,
                   split="heldout")
    log(work, f"held-out: {len(held)} episodes")
    records: list[dict[str, object]] = []
    last = len(profile.stages) - 1
    result: StageResult | None = None
    for index, stage in enumerate(profile.stages):
        done = stage_dir(work, index) / "model"
        if index < last and (done / "config.json").exists():
            records.append(_stage_record(done))
            log(work, f"stage {index + 1} done: {done}")
            continue
        result = run_stage(args, work, index, stage, stage.batch_tokens or profile.batch_tokens)
        records.append(result.record)
        if index < last:
            export(result, done, {"profile": args.profile, "stages": records})
    assert result is not None
    out: Path = args.out
    training = {"profile": args.profile, "stages": records,
                "tokens_seen": sum(int(str(r["tokens_seen"])) for r in records),
                "train_seconds": sum(int(str(r["train_seconds"])) for r in records),
                "parameters": sum(p.numel() for p in result.model.parameters())}
    export(result, out, training, profile.weights)
    data_dir = out / "data"
    data_dir.mkdir(exist_ok=True)
    (data_dir / "heldout_episodes.jsonl").write_text((work / "heldout.jsonl").read_text())
    if not args.skip_eval:
        from worldserve.training.heldout import evaluate_checkpoint
        report = evaluate_checkpoint(out, held, work / "heldout-predictions.jsonl",
                                     copy_bias=card.COPY_BIAS)
        (out / "fidelity.json").write_text(json.dumps(report, indent=2) + "\n")
        log(work, f"held-out: {json.dumps(report['overall'])}")
    card.write(out, training)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--out", type=Path, default=Path("models/worldserve-tiny-moe"))
    ap.add_argument("--work", type=Path, default=None,
                    help="data and checkpoints (default .worldserve/train-<profile>)")
    ap.add_argument("--minutes", type=float, default=None,
                    help="override the last stage's budget")
    ap.add_argument("--episodes", type=int, default=None,
                    help="override the last stage's data size")
    ap.add_argument("--vocab", type=int, default=3000)
    ap.add_argument("--max-len", type=int, default=MAX_LEN)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt-weight", type=float, default=PROMPT_WEIGHT,
                    help="loss weight of prompt tokens relative to answer tokens")
    ap.add_argument("--checkpoint-minutes", type=float, default=4.0)
    ap.add_argument("--workers", type=int, default=collect_workers(),
                    help="processes that collect episodes (default: one per core but one, "
                         "at least 2); the episodes do not depend on it")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--continue-from", type=Path, default=None,
                    help="a checkpoint (the committed one, say) that the profile's last stage "
                         "continues: it stands in for every stage before it")
    args = ap.parse_args()
    profile = PROFILES[args.profile]
    if args.minutes is not None or args.episodes is not None:
        *head, tail = profile.stages
        tail = replace(tail, episodes=args.episodes or tail.episodes,
                       minutes=args.minutes or tail.minutes)
        profile = replace(profile, stages=(*head, tail))
    args.work = args.work or Path(f".worldserve/train-{args.profile}")
    train(args, profile)


if __name__ == "__main__":
    main()
