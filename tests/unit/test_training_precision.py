"""Training precision is measured on the machine: bfloat16 only where it is the faster."""

from __future__ import annotations

import pytest
import torch

from worldserve.training import precision


def test_bf16_is_chosen_only_when_it_measures_faster() -> None:
    assert precision.bf16_wins(fp32_s=1.0, bf16_s=0.7)
    assert not precision.bf16_wins(fp32_s=0.02, bf16_s=3.2)  # emulated bf16 (AVX2 EPYC Rome)
    assert not precision.use_bf16("cpu", measure=lambda: (0.02, 3.2))
    assert precision.use_bf16("cpu", measure=lambda: (1.0, 0.7))


def test_cuda_always_uses_bf16_without_measuring() -> None:
    def never() -> tuple[float, float]:
        raise AssertionError("measured on CUDA")

    assert precision.use_bf16("cuda", measure=never)


@pytest.mark.parametrize("bf16", [True, False])
def test_the_step_runs_under_the_chosen_precision(bf16: bool) -> None:
    with precision.autocast("cpu", bf16):
        assert torch.is_autocast_enabled("cpu") is bf16
        out = torch.ones(4, 8) @ torch.ones(8, 4)
    assert out.dtype == (torch.bfloat16 if bf16 else torch.float32)


def test_the_measurement_times_both_precisions() -> None:
    fp32_s, bf16_s = precision.measure_cpu(size=32, repeats=1)
    assert 0 < fp32_s < 5 and 0 < bf16_s < 5
