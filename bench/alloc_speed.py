"""Benchmark: training tokens/s in batches of 16,384 tokens under settings of glibc malloc.

    .venv/bin/python bench/alloc_speed.py [--episodes 500] [--steps 6] [--rounds 2]
        [--settings "mmap64k,glibc default,default+trim"]

Without a setting, glibc keeps the freed blocks of ever-changing shapes, and a 16,384-token CPU
stage grew to 23.7 GB (session 23). Sessions 23-28 set glibc's mmap threshold to 64 KiB, so
every large block was a fresh ``mmap`` whose pages the kernel faulted in and zeroed; session
29's stage spent about a third of its CPU time in the kernel. Since session 29 the trainer
calls ``malloc_trim(0)`` after every step instead (``memory.memory_trimmer``). The settings, each
in a child process of its own (``GLIBC_TUNABLES`` is read when a process starts):

- *mmap64k* (the baseline, sessions 23-28): ``mallopt(M_MMAP_THRESHOLD, 64 KiB)``;
- *glibc default*: no setting (fast, but the memory grows: see the resident sizes);
- *default+trim* (the trainer since session 29): no setting, ``malloc_trim(0)`` after each step;
- with ``--settings``, also *mmap64k+thp*, *mmap4m+thp*, *mmap32m+thp*, *default+thp*: a
  threshold of 64 KiB, 4 MiB or 32 MiB or none, with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``
  (malloc asks for transparent huge pages where ``/sys/kernel/mm/transparent_hugepage/enabled``
  allows ``madvise``).

The children train the committed checkpoint on the same batches (real episodes collected as a
stage collects them, every command kind, fault share 0.4, encoded with the committed
tokenizer), one optimizer step each, after one warm-up step; rounds alternate the settings.
Each reports real (unpadded) tokens/s, the CPU seconds spent in user and in kernel mode, its
peak resident memory, the huge pages it holds at the end, and its resident memory after each
step (``--steps 24`` shows the growth of *glibc default* well).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import pickle
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine

# name: (mmap threshold set with mallopt, bytes; 0: glibc's own, dynamic), huge pages asked
# for, malloc_trim(0) after every step
SETTINGS = {"mmap64k": (64 << 10, False, False), "mmap64k+thp": (64 << 10, True, False),
            "mmap4m+thp": (4 << 20, True, False), "mmap32m+thp": (32 << 20, True, False),
            "glibc default": (0, False, False), "default+thp": (0, True, False),
            "default+trim": (0, False, True)}


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(batches_file: Path, model_dir: Path, threshold: int, trim: bool) -> None:
    """Train on the pickled batches; print one JSON line of figures."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    from worldserve.training import precision
    from worldserve.training import train as T
    from worldserve.training.memory import memory_trimmer

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if threshold and not libc.mallopt(-3, threshold):  # -3: M_MMAP_THRESHOLD (sessions 23-28)
        raise SystemExit("mallopt failed (no glibc?)")
    trimmer = memory_trimmer() if trim else None
    batches, pad = pickle.loads(batches_file.read_bytes())
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    model = Qwen3MoeForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, betas=(0.9, 0.95))
    bf16 = precision.use_bf16("cpu")
    autocast = precision.autocast("cpu", bf16)

    rss: list[float] = []

    def step(batch: list[T.Item]) -> int:
        inp, mask, weights = T.collate(batch, pad)
        T.optimizer_step(model, opt, T.forward_inputs(inp), inp, weights, autocast)
        if trimmer is not None:
            trimmer()
        rss.append(_rss_mb())
        return int(mask.sum())

    step(batches[0])  # warm-up: first-touch costs that every setting pays once
    r0, t0, seen = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), 0
    for batch in batches[1:]:
        seen += step(batch)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    huge_kb = 0
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            huge_kb = int(line.split()[1])
    print(json.dumps({"tokens_per_s": seen / wall, "user_s": r1.ru_utime - r0.ru_utime,
                      "sys_s": r1.ru_stime - r0.ru_stime, "max_rss_mb": r1.ru_maxrss / 1024,
                      "huge_mb": huge_kb / 1024, "precision": "bf16" if bf16 else "float32",
                      "rss_mb": rss}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-tokens", type=int, default=16384)
    ap.add_argument("--child", nargs=3, metavar=("BATCHES", "THRESHOLD", "TRIM"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--settings", default="mmap64k,glibc default,default+trim",
                    help="which settings to run, comma-separated (mmap64k always runs)")
    ap.add_argument("--model", type=Path, default=None)
    args = ap.parse_args()
    from worldserve.settings import DEFAULT_MODEL_DIR

    model_dir = args.model or DEFAULT_MODEL_DIR
    if args.child:
        child(Path(args.child[0]), model_dir, int(args.child[1]), args.child[2] == "1")
        return
    from transformers import PreTrainedTokenizerFast

    from worldserve.training import train as T
    from worldserve.training.collect import collect

    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    with tempfile.TemporaryDirectory() as tmp:
        eps = collect(Path(tmp) / "episodes.jsonl", args.episodes, seed=3_000_029,
                      fault_rate=0.4, commands="all", progress=False)
        tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
        encoded = [T.encode(tok, e, 2048, 0.1) for e in eps]
        batches = T.batches(encoded, args.batch_tokens, random.Random(0))[:args.steps + 1]
        if len(batches) < args.steps + 1:
            raise SystemExit(f"{args.episodes} episodes make {len(batches)} batches; "
                             f"--steps {args.steps} needs {args.steps + 1}")
        data = Path(tmp) / "batches.pkl"
        data.write_bytes(pickle.dumps((batches, tok.pad_token_id)))
        print(f"{machine()}; transparent huge pages: "
              f"{thp.read_text().strip() if thp.exists() else 'unknown'}; {args.steps} batches "
              f"of <= {args.batch_tokens:,} tokens after one warm-up", flush=True)
        chosen = ["mmap64k", *(n for n in args.settings.split(",") if n != "mmap64k")]
        unknown = set(chosen) - set(SETTINGS)
        if unknown:
            raise SystemExit(f"unknown settings {sorted(unknown)}; known: {list(SETTINGS)}")
        results: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
        for r in range(args.rounds):
            for name in chosen:
                threshold, huge, trim = SETTINGS[name]
                env = dict(os.environ)
                env.pop("GLIBC_TUNABLES", None)
                if huge:
                    env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(data), str(threshold),
                     "1" if trim else "0",
                     "--model", str(model_dir)],
                    env=env, check=True, capture_output=True, text=True).stdout
                fig = json.loads(out.strip().splitlines()[-1])
                results[name].append(fig)
                print(f"round {r + 1} {name:14} {fig['tokens_per_s']:7,.0f} tokens/s  "
                      f"user {fig['user_s']:6.1f} s  sys {fig['sys_s']:6.1f} s  "
                      f"peak {fig['max_rss_mb']:6,.0f} MB  huge pages {fig['huge_mb']:5,.0f} MB  "
                      f"({fig['precision']}); resident after each step (MB): "
                      + " ".join(f"{m:,.0f}" for m in fig["rss_mb"]), flush=True)
    best = {name: max(f["tokens_per_s"] for f in figs) for name, figs in results.items()}
    base = best["mmap64k"]
    for name, rate in best.items():
        print(f"{name} / mmap64k (best of {args.rounds}): {rate / base:.2f}x")


if __name__ == "__main__":
    main()
