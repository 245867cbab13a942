"""Training profiles and model sizes (pure: no data, no training)."""

from __future__ import annotations

import pytest

from worldserve.training import train as T


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
