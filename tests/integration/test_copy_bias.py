"""Copy bias on the committed checkpoint: the engine serves what the held-out evaluation measures."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast, Qwen3MoeForCausalLM

from worldserve.domains.parsing import parse_completion
from worldserve.evaluation import metrics
from worldserve.modelserver.contract import GenerationRequest
from worldserve.modelserver.port import Delta
from worldserve.modelserver.transformers_engine import TransformersEngine
from worldserve.settings import DEFAULT_MODEL_DIR
from worldserve.training import heldout

pytestmark = pytest.mark.integration

MAX_NEW = 96


def served(engine: TransformersEngine, prompt: str, max_tokens: int = MAX_NEW) -> str:
    parts: list[str] = []
    done = threading.Event()

    def sink(d: Delta) -> None:
        parts.append(d.text)
        if d.finish_reason:
            done.set()

    engine.submit(GenerationRequest(prompt, max_tokens=max_tokens), sink)
    assert done.wait(120)
    return "".join(parts)


def truncated_turn(model_dir: Path) -> tuple[str, str]:
    """The prompt of held-out episode 82's last turn (``cat knor.txt`` under an injected
    ``truncated_output``) and the real output before the cut."""
    [episode] = [e for e in heldout.shipped_episodes(model_dir) if e.index == 82]
    turn = episode.turns[-1]
    assert turn.fault == "truncated_output" and turn.action == "cat knor.txt"
    template = (model_dir / "chat_template.jinja").read_text()
    return heldout.turn_prompts(template, [episode])[-1], turn.normal


def test_the_card_declares_copy_bias_and_the_engine_decodes_with_it() -> None:
    bias = heldout.card_copy_bias(Path(DEFAULT_MODEL_DIR))
    assert bias is not None
    model_dir = Path(DEFAULT_MODEL_DIR)
    prompts = heldout.turn_prompts((model_dir / "chat_template.jinja").read_text(),
                                   heldout.shipped_episodes(model_dir)[:4])
    prompts.append(truncated_turn(model_dir)[0])  # copy bias leaves it to plain greedy
    tok = PreTrainedTokenizerFast.from_pretrained(DEFAULT_MODEL_DIR)
    model = Qwen3MoeForCausalLM.from_pretrained(DEFAULT_MODEL_DIR)
    measured = heldout.generate(model, tok, prompts, batch_size=1, max_new=MAX_NEW,
                                copy_bias=bias)
    plain = heldout.generate(model, tok, prompts, batch_size=1, max_new=MAX_NEW)
    engine = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=0)
    off = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=0, copy_bias=False)
    try:
        assert engine.copy_bias == bias and off.copy_bias is None
        assert [served(engine, p) for p in prompts] == measured
        assert [served(off, p) for p in prompts] == plain
        assert measured[-1] == plain[-1] and measured[:-1] != plain[:-1]
    finally:
        engine.close()
        off.close()


def test_copy_bias_mends_a_name_that_plain_greedy_garbles() -> None:
    # Held-out episode 6, turn 5 (words outside the training split): plain greedy (@13) turns
    # the second line's "2985 64" into "29850" and goes on with a made-up line; the bias keeps
    # copying the line.
    model_dir = Path(DEFAULT_MODEL_DIR)
    [episode] = [e for e in heldout.shipped_episodes(model_dir) if e.index == 6]
    prompt = heldout.turn_prompts((model_dir / "chat_template.jinja").read_text(), [episode])[4]
    real = episode.turns[4].observation
    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = Qwen3MoeForCausalLM.from_pretrained(model_dir)
    bias = heldout.card_copy_bias(model_dir)
    [plain] = heldout.generate(model, tok, [prompt], batch_size=1)
    [biased] = heldout.generate(model, tok, [prompt], batch_size=1, copy_bias=bias)
    assert parse_completion(plain).observation.strip() == (
        "dishmaking s8p9 52 cranially_zoisite\n29850\nanhang ageing Outweep")
    assert parse_completion(biased).observation.strip() == real.strip()
    engine = TransformersEngine(model_dir, "cpu", prefix_cache_bytes=0)
    try:
        assert parse_completion(served(engine, prompt, 256)).observation.strip() == real.strip()
    finally:
        engine.close()


def test_a_truncated_output_shows_because_copy_bias_leaves_the_cut_to_the_model() -> None:
    # Copy bias used to carry a copy on past the model's cut (@9: "...miasmic_1148\nz" became
    # the whole file), and the injected fault no longer showed. @13 cuts this one after its
    # first word, "redismiss", as the real `head -c` did (@12 cut it after "frostation").
    model_dir = Path(DEFAULT_MODEL_DIR)
    prompt, untruncated = truncated_turn(model_dir)
    engine = TransformersEngine(model_dir, "cpu", prefix_cache_bytes=0)
    try:
        observation = parse_completion(served(engine, prompt, 256)).observation
    finally:
        engine.close()
    assert metrics.fault_visible("truncated_output", observation, "", untruncated), observation
    assert observation.strip() == "redismiss"


def test_generation_hands_memory_back_after_every_batch() -> None:
    """``heldout.generate`` runs its ``after_batch`` (by default glibc's malloc_trim: the
    evaluation ``train`` runs in process grew from 4.2 to 8.1 GB without it) once a batch, and
    what it generates does not depend on it."""
    from worldserve.training.memory import memory_trimmer

    model_dir = Path(DEFAULT_MODEL_DIR)
    prompts = heldout.turn_prompts((model_dir / "chat_template.jinja").read_text(),
                                   heldout.shipped_episodes(model_dir)[:1])[:3]
    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = Qwen3MoeForCausalLM.from_pretrained(model_dir)
    calls: list[int] = []
    counted = heldout.generate(model, tok, prompts, batch_size=2, max_new=24,
                               after_batch=lambda: calls.append(1))
    assert len(calls) == 2  # three prompts in batches of two
    assert heldout.generate(model, tok, prompts, batch_size=2, max_new=24) == counted
    trim = memory_trimmer()
    assert trim is not None and trim() in (0, 1)  # glibc here: 1 when it gave memory back
