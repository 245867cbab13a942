"""Benchmark (d): generated tokens per second at 1, 4 and 8 concurrent sessions.

    .venv/bin/python bench/throughput.py [--concurrency 1 4 8] [--turns 10] [--rounds 2]

Processes: one model server with the real checkpoint (transformers engine: continuous batching,
KV reuse) and one gateway (real Redis). N sessions play real Terminal episodes at once through
the gateway's default window, sampling at temperature 0.7 with a seed per session (so sessions
differ, as RL rollouts do). Tokens/s = output tokens metered by the gateway (reasoning included)
over the wall time of the whole run; the 1-session run in the same process set is the baseline.
Rounds alternate the order of the concurrency levels. Also reported: the engine's mean batch
size (decode rows per decode step) and the step latency.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import (
    KEY,
    diff,
    gateway,
    log_dir,
    machine,
    median,
    model_server,
    pct,
    play_episode,
    redis_url,
    scrape,
    terminal_episode,
)

from worldserve.sdk import AsyncClient


async def run(target: str, sessions: int, turns: int, max_tokens: int, offset: int
              ) -> tuple[int, float, list[float], int]:
    episodes = [terminal_episode(offset + i, turns) for i in range(sessions)]
    async with AsyncClient(target, KEY) as client:
        start = time.perf_counter()
        results = await asyncio.gather(*(
            play_episode(client, ep, max_tokens, temperature=0.7, seed=offset + i)
            for i, ep in enumerate(episodes)))
        wall = time.perf_counter() - start
    steps = [s for records, _ in results for s in records]
    ended = sum(1 for _, err in results if err)
    return sum(s.output_tokens for s in steps), wall, [s.step_s for s in steps], ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="of the model server, which shares the cores with everything else")
    args = parser.parse_args()
    logs = log_dir("throughput")
    redis = redis_url()
    per: dict[int, list[dict[str, float]]] = {c: [] for c in args.concurrency}
    with model_server(logs, torch_threads=args.torch_threads) as ms, \
            gateway(logs, redis, triton_url=ms.url) as gw:
        asyncio.run(run(gw.target, 2, 2, args.max_tokens, 90_000))  # warm-up
        for r in range(args.rounds):
            levels = args.concurrency if r % 2 == 0 else list(reversed(args.concurrency))
            for c in levels:
                # Fixed work per level: each level plays turns × max(levels) steps in total.
                sessions = max(args.concurrency)
                waves = sessions // c
                before = scrape(ms.metrics_url)
                tokens, wall, lat, ended = 0, 0.0, [], 0
                for w in range(waves):
                    t, wl, la, en = asyncio.run(run(gw.target, c, args.turns, args.max_tokens,
                                                    1000 * r + 100 * c + w * c))
                    tokens, wall, lat, ended = tokens + t, wall + wl, lat + la, ended + en
                d = diff(scrape(ms.metrics_url), before)
                batch = d["worldserve_engine_decode_rows_total"] / max(
                    d["worldserve_engine_decode_steps_total"], 1)
                busy = (d["worldserve_engine_prefill_seconds_total"]
                        + d["worldserve_engine_decode_seconds_total"])
                print(f"  engine: prefill {d['worldserve_engine_prefill_seconds_total']:.1f} s, "
                      f"decode {d['worldserve_engine_decode_seconds_total']:.1f} s of "
                      f"{wall:.1f} s wall ({busy / wall:.0%} busy)")
                per[c].append({"tok_s": tokens / wall, "batch": batch,
                               "p50": pct(lat, 0.5) * 1000, "p90": pct(lat, 0.9) * 1000,
                               "tokens": tokens, "ended": ended})
                print(f"round {r} concurrency {c}: {tokens / wall:.0f} tokens/s, mean batch "
                      f"{batch:.2f}, step p50 {pct(lat, 0.5) * 1000:.0f} ms", flush=True)
    base = median([x["tok_s"] for x in per[args.concurrency[0]]])
    print(f"\nMachine: {machine()}. Episodes of {args.turns} turns, temperature 0.7, max_tokens "
          f"{args.max_tokens}, {args.rounds} rounds (medians). Logs: {logs}\n")
    print(f"| concurrent sessions | output tokens/s | vs {args.concurrency[0]} session(s) | mean "
          "decode batch | step p50 / p90 (ms) | episodes ended early |")
    print("|---|---|---|---|---|---|")
    for c, xs in per.items():
        tok = median([x["tok_s"] for x in xs])
        print(f"| {c} | {tok:.0f} | {tok / base:.2f}× | {median([x['batch'] for x in xs]):.2f} "
              f"| {median([x['p50'] for x in xs]):.0f} / {median([x['p90'] for x in xs]):.0f} | "
              f"{sum(int(x['ended']) for x in xs)} |")


if __name__ == "__main__":
    main()
