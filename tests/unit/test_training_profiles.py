"""Training profiles and model sizes (pure: no data, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldserve.training import train as T
from worldserve.training.sequence import PROMPT_WEIGHT


def test_every_profile_names_known_sizes_and_weight_types() -> None:
    for profile in T.PROFILES.values():
        assert profile.weights in T.WEIGHT_DTYPES
        assert all(stage.size in T.SIZES for stage in profile.stages)
        # a size starts a model: only a first stage may ask for one
        assert all(stage.size == "tiny" for stage in profile.stages[1:])


def test_unknown_sizes_and_weight_types_are_refused_before_any_work() -> None:
    with pytest.raises(ValueError, match="unknown model size 'huge'"):
        T.Stage(episodes=1, minutes=1, size="huge")
    with pytest.raises(ValueError, match="unknown weight type 'float8'"):
        T.Profile((T.Stage(episodes=1, minutes=1),), eval_episodes=1, weights="float8")


class _Tok:
    eos_token_id, pad_token_id = 2, 0


@pytest.mark.parametrize(("size", "parameters"), [("tiny", 7_857_664), ("wide", 16_898_176)])
def test_model_sizes_are_what_the_docs_say(size: str, parameters: int) -> None:
    model = T.make_model(3004, _Tok(), size)  # type: ignore[arg-type]
    assert sum(p.numel() for p in model.parameters()) == parameters
    # the committed limit is 60 MB: tiny in float32, wide in bfloat16
    limit_bytes = 60_000_000
    assert parameters * (4 if size == "tiny" else 2) <= limit_bytes


def test_the_gpu_profile_stores_bfloat16_and_batches_larger() -> None:
    gpu = T.PROFILES["gpu"]
    assert gpu.weights == "bfloat16" and gpu.stages[0].size == "wide"
    assert gpu.batch_tokens > T.PROFILES["broad"].batch_tokens
    assert T.PROFILES["batch"].stages[-1].batch_tokens == gpu.batch_tokens


def test_a_checkpoint_placed_stands_in_for_every_stage_before_the_last(tmp_path: Path) -> None:
    ckpt, work = tmp_path / "ckpt", tmp_path / "work"
    (ckpt / "data").mkdir(parents=True)
    (ckpt / "data" / "heldout_episodes.jsonl").write_text("{}\n")
    (ckpt / "config.json").write_text('{"hidden_size": 256}')
    (ckpt / "model.safetensors").write_bytes(b"weights")
    records = [{"stage": i + 1, "steps": 10 * (i + 1)} for i in range(7)]
    (ckpt / "training.json").write_text(json.dumps({"profile": "broad", "stages": records}))
    (work / "stage2" / "model").mkdir(parents=True)
    (work / "stage2" / "model" / "config.json").write_text("kept")

    T.place_checkpoint(ckpt, work, stages=8)

    last = work / "stage7" / "model"
    assert (last / "model.safetensors").read_bytes() == b"weights"
    assert not (last / "data").exists()
    assert (work / "stage2" / "model" / "config.json").read_text() == "kept"
    for i in (1, 3, 6, 7):
        model = work / f"stage{i}" / "model"
        assert json.loads((model / "training.json").read_text())["stages"] == records[:i]
        assert (model / "config.json").read_text() == '{"hidden_size": 256}'
    assert not (work / "stage8").exists()
    for wrong in (7, 9):  # the records must say what the weights went through
        with pytest.raises(ValueError, match=f"records 7 stages; this profile's last stage "
                                             f"continues stage {wrong - 1}"):
            T.place_checkpoint(ckpt, tmp_path / "other", stages=wrong)


def test_a_stage_may_train_on_the_answers_alone() -> None:
    answers = T.PROFILES["answers"].stages[-1]
    assert answers.loss_prompt_weight(PROMPT_WEIGHT) == 0.0
    # the same episodes as pieces2's stage: only the prompt weight differs
    assert answers.seed == T.PROFILES["pieces2"].stages[-1].seed
    assert T.PROFILES["pieces2"].stages[-1].loss_prompt_weight(0.25) == 0.25  # the run's
    with pytest.raises(ValueError, match=r"prompt weight 1\.5 is not in"):
        T.Stage(episodes=1, minutes=1, prompt_weight=1.5)


def test_the_heads_stage_widens_attention_on_pieces2s_episodes() -> None:
    heads, pieces2 = T.PROFILES["heads"].stages[-1], T.PROFILES["pieces2"].stages[-1]
    assert heads.wider_heads and not pieces2.wider_heads
    assert (heads.seed, heads.episodes, heads.lr, heads.piece_share) == (
        pieces2.seed, pieces2.episodes, pieces2.lr, pieces2.piece_share)
    assert T.PROFILES["heads"].stages[:-1] == T.PROFILES["pieces2"].stages[:-1]  # after @11
    assert not any(stage.wider_heads for stage in T.PROFILES["pieces"].stages)


def test_at_prompt_weight_zero_only_the_answers_carry_loss() -> None:
    from transformers import PreTrainedTokenizerFast

    from worldserve.settings import DEFAULT_MODEL_DIR
    from worldserve.training.heldout import shipped_episodes

    tok = PreTrainedTokenizerFast.from_pretrained(DEFAULT_MODEL_DIR)
    episode = shipped_episodes(DEFAULT_MODEL_DIR)[0]
    ids, usual = T.encode(tok, episode, 4096, PROMPT_WEIGHT)
    same_ids, answers = T.encode(tok, episode, 4096, 0.0)
    assert same_ids == ids
    assert set(usual) == {0.0, PROMPT_WEIGHT, 1.0}
    # every token of weight 1 keeps it; every prompt token drops to 0
    assert answers == [0.0 if w == PROMPT_WEIGHT else w for w in usual]
