"""Benchmark (c): session affinity against round-robin across two model-server replicas.

    .venv/bin/python bench/affinity.py [--sessions 8] [--turns 12] [--rounds 1]

Processes: two model-server replicas of the real checkpoint (transformers engine, KV reuse on,
half the cores' torch threads each)
and one gateway over both (`WORLDSERVE_TRITON_REPLICAS`) with `WORLDSERVE_REPLICA_POLICY` set to
`affinity` (rendezvous hashing on the session, bounded load) or `round_robin` (what a plain
Kubernetes Service does) — fresh replicas for each policy, so neither inherits the other's cache.
`--sessions` real Terminal episodes run at once, greedy, through the gateway's default window.

Reported per policy:
* affinity hit rate — of the steps after a session's first, the share served by the replica
  that served the session's previous step (where its KV is): the gateway's
  `worldserve_replica_routes_total{result=same|moved}`;
* prompt tokens served from the prefix caches (both replicas' engine counters) and the prompt
  tokens actually prefilled;
* step latency: time to the first streamed delta and the whole step, p50 / p90.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from common import (
    KEY,
    StepRecord,
    diff,
    gateway,
    log_dir,
    machine,
    model_server,
    pct,
    play_episode,
    redis_url,
    scrape,
    terminal_episode,
)

from worldserve.sdk import AsyncClient


async def workload(target: str, sessions: int, turns: int, max_tokens: int, offset: int
                   ) -> tuple[list[StepRecord], list[str], float]:
    episodes = [terminal_episode(offset + i, turns) for i in range(sessions)]
    async with AsyncClient(target, KEY) as client:
        start = time.perf_counter()
        results = await asyncio.gather(*(play_episode(client, ep, max_tokens)
                                         for ep in episodes))
        wall = time.perf_counter() - start
    steps = [s for records, _ in results for s in records]
    return steps, [err for _, err in results if err], wall


def run_policy(policy: str, args: argparse.Namespace, redis: str, offset: int
               ) -> dict[str, float]:
    logs = log_dir(f"affinity-{policy}")
    # Two replicas share this machine's cores: one torch thread each (two each oversubscribe the
    # cores, and OpenMP's spinning threads then slow every step down several times).
    threads = max(1, (os.cpu_count() or 2) // 2)
    with model_server(logs, "replica-a", torch_threads=threads) as a, \
            model_server(logs, "replica-b", torch_threads=threads) as b, \
            gateway(logs, redis, triton_replicas=[a.url, b.url], replica_policy=policy) as gw:
        asyncio.run(workload(gw.target, 2, 2, args.max_tokens, 50_000))  # warm both replicas
        before = [scrape(gw.metrics_url), scrape(a.metrics_url), scrape(b.metrics_url)]
        steps, errors, wall = asyncio.run(workload(gw.target, args.sessions, args.turns,
                                                   args.max_tokens, offset))
        g, ea, eb = (diff(scrape(u), s) for u, s in zip(
            (gw.metrics_url, a.metrics_url, b.metrics_url), before, strict=True))
    same = g.get("worldserve_replica_routes_total{result=same}", 0.0)
    moved = g.get("worldserve_replica_routes_total{result=moved}", 0.0)
    prompt = sum(e["worldserve_engine_prompt_tokens_total"] for e in (ea, eb))
    reused = sum(e["worldserve_prefix_cache_reused_tokens_total"] for e in (ea, eb))
    prefilled = sum(e["worldserve_engine_prefilled_tokens_total"] for e in (ea, eb))
    ttft = [s.ttft_s for s in steps]
    total = [s.step_s for s in steps]
    return {"hit": same / max(same + moved, 1), "same": same, "moved": moved,
            "reuse": reused / max(prompt, 1), "prefilled": prefilled, "prompt": prompt,
            "ttft50": pct(ttft, 0.5) * 1000, "ttft90": pct(ttft, 0.9) * 1000,
            "step50": pct(total, 0.5) * 1000, "step90": pct(total, 0.9) * 1000,
            "steps": len(steps), "errors": len(errors),
            "tok_s": sum(s.output_tokens for s in steps) / wall,
            "split": ea["worldserve_engine_requests_total"] / max(
                ea["worldserve_engine_requests_total"] + eb["worldserve_engine_requests_total"],
                1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    redis = redis_url()
    rows = []
    for r in range(args.rounds):
        for policy in (["round_robin", "affinity"] if r % 2 == 0
                       else ["affinity", "round_robin"]):
            res = run_policy(policy, args, redis, offset=1000 * r)
            rows.append((policy, res))
            print(f"{policy}: hit {res['hit']:.1%} ({res['same']:.0f} same, {res['moved']:.0f} "
                  f"moved), cache {res['reuse']:.1%} of prompt tokens, step p50 "
                  f"{res['step50']:.0f} ms, {res['errors']:.0f} episodes ended early",
                  flush=True)
    print(f"\nMachine: {machine()}. {args.sessions} concurrent sessions × {args.turns} turns, "
          f"greedy, max_tokens {args.max_tokens}, {args.rounds} round(s).\n")
    print("| policy | affinity hit rate | prompt tokens from cache | prefilled / prompt tokens "
          "| TTFT p50 / p90 (ms) | step p50 / p90 (ms) | output tokens/s | share on replica a "
          "| steps (episodes ended early) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for policy, res in rows:
        print(f"| {policy} | {res['hit']:.1%} | {res['reuse']:.1%} | {res['prefilled']:.0f} / "
              f"{res['prompt']:.0f} | {res['ttft50']:.0f} / {res['ttft90']:.0f} | "
              f"{res['step50']:.0f} / {res['step90']:.0f} | {res['tok_s']:.0f} | "
              f"{res['split']:.0%} | {res['steps']:.0f} ({res['errors']:.0f}) |")


if __name__ == "__main__":
    main()
