"""Whether a training step runs under bfloat16 autocast: measured on the machine, never assumed.

On CUDA, always. On a CPU, only where bfloat16 matrix products are faster than float32 ones: CPUs
with native bfloat16 (AVX512-BF16, AMX) train about 1.4× faster with it; a CPU without (an AVX2
EPYC Rome, say) emulates it and one product takes over 100× longer, so a wall-clock budget
trains almost nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import torch


def bf16_wins(fp32_s: float, bf16_s: float) -> bool:
    """Pure: train in bfloat16 only if its measured product time beats float32's."""
    return bf16_s < fp32_s


def _best_of(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure_cpu(size: int = 256, repeats: int = 3) -> tuple[float, float]:
    """Seconds for one (4·size × size) @ (size × 4·size) product in float32 and under bf16
    autocast, the best of ``repeats`` after a warm-up each."""
    a = torch.randn(4 * size, size)
    b = torch.randn(size, 4 * size)

    def fp32() -> object:
        return a @ b

    def bf16() -> object:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return a @ b

    fp32()
    bf16()
    return _best_of(fp32, repeats), _best_of(bf16, repeats)


def use_bf16(device: str, measure: Callable[[], tuple[float, float]] = measure_cpu) -> bool:
    return device == "cuda" or bf16_wins(*measure())


def autocast(device: str, bf16: bool) -> contextlib.AbstractContextManager[object]:
    return (torch.autocast(device, dtype=torch.bfloat16) if bf16
            else contextlib.nullcontext())
