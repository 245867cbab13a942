"""Each serving benchmark (and the training-speed one) runs end to end at a tiny size and
prints its table (the figures in docs/BENCHMARKS.md come from the same scripts at full size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench"

CASES = {
    "gateway_overhead.py": (["--steps", "16", "--rounds", "1", "--concurrency", "1", "4",
                             "--floor"], "| concurrency | floor p50"),
    "kv_reuse.py": (["--episodes", "1", "--turns", "3", "--max-tokens", "128"],
                    "| turn | prompt tokens"),
    "affinity.py": (["--sessions", "2", "--turns", "2", "--max-tokens", "128"],
                    "| policy | affinity hit rate"),
    "openenv_frontdoor.py": (["--sessions", "3", "--turns", "2", "--rounds", "1"],
                             "| path | steps | errors"),
    "openai_serving.py": (["--steps", "1", "--concurrency", "1", "--max-tokens", "8",
                           "--rounds", "1"], "| concurrent streams | Triton engine"),
    "noisy_neighbour.py": (["--seconds", "3", "--sessions", "2"],
                           "| phase | victim steps"),
    "throughput.py": (["--concurrency", "1", "2", "--turns", "2", "--rounds", "1",
                       "--max-tokens", "128"], "| concurrent sessions | output tokens/s"),
    "train_speed.py": (["--episodes", "16", "--steps", "2", "--rounds", "1"],
                       "unmasked / masked (best of 1)"),
    "alloc_speed.py": (["--episodes", "40", "--steps", "1", "--rounds", "1",
                        "--batch-tokens", "2048"], "default+trim / mmap64k (best of 1)"),
    "decode_speed.py": (["--size", "wide", "--tokens", "8", "--prompts", "2", "--repeats", "1",
                         "--rounds", "1"], "wide / worldserve-tiny-moe:"),
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_benchmark_runs_and_prints_its_table(script: str) -> None:
    args, header = CASES[script]
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert header in done.stdout, done.stdout[-3000:]
