"""Benchmark (b): step latency as a session grows, with and without KV (prefix) reuse.

    .venv/bin/python bench/kv_reuse.py [--episodes 4] [--turns 20] [--part gateway direct]

Processes: two model servers with the real checkpoint (transformers engine) — one keeps KV caches
by prefix (`WORLDSERVE_PREFIX_CACHE_BYTES`, default 256 MiB), the other has reuse off (0) — each
behind its own gateway (real Redis). Episodes are real Terminal episodes: commands chosen and run
in a sandbox, as the training collector does. Each episode is played on both stacks, alternating
which goes first, greedy (temperature 0): both produce the same text and decode the same tokens,
so only prefill differs. Two parts:

* gateway — `StreamStep` through the gateway with its default strided window (4 turns, stride
  4): the model's own answers become the history, as in training use.
* direct — the whole history in every prompt (as Qwen-AgentWorld's prompts carry it), with the
  real shell output as past observations, sent to each model server with the gateway's Triton
  client. The demo checkpoint was trained on 4-turn windows and cannot keep a 20-turn
  whole-history episode going through the gateway (its answers stop parsing), so this part
  measures the engine on the prompts a real world model would get, without parsing answers.

Reported per turn: prompt tokens, prompt tokens actually prefilled with reuse, time to the first
streamed delta (TTFT: prefill + first token) and the whole step, medians over episodes, and the
no-reuse/reuse ratios. Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from common import (
    KEY,
    TASK,
    Episode,
    ModelServer,
    diff,
    gateway,
    log_dir,
    machine,
    median,
    model_server,
    play_episode,
    redis_url,
    scrape,
    terminal_episode,
)

from worldserve.backends.base import Completion
from worldserve.backends.checkpoint import load_chat_template
from worldserve.backends.triton import TritonBackend
from worldserve.domains.chat import render_chat
from worldserve.domains.rendering import PastTurn, PromptInput, build_messages
from worldserve.domains.templates import Domain, system_prompt
from worldserve.sdk import AsyncClient
from worldserve.settings import DEFAULT_MODEL_DIR

Turn = dict[str, float]


async def via_gateway(target: str, ep: Episode, max_tokens: int, metrics_url: str) -> list[Turn]:
    async with AsyncClient(target, KEY) as client:
        records, error = await play_episode(client, ep, max_tokens,
                                            engine_metrics_url=metrics_url)
    assert not error, error
    return [{"ttft_s": r.ttft_s, "step_s": r.step_s, "prompt": float(r.input_tokens),
             "prefilled": r.prefilled} for r in records]


async def measured(call: Callable[[], Awaitable[tuple[float | None, float]]], metrics_url: str
                   ) -> Turn:
    before = scrape(metrics_url)
    start = time.perf_counter()
    first, prompt = await call()
    total = time.perf_counter() - start
    d = diff(scrape(metrics_url), before)
    return {"ttft_s": first - start if first else total, "step_s": total, "prompt": prompt,
            "prefilled": d["worldserve_engine_prefilled_tokens_total"]}


def whole_history_prompts(ep: Episode) -> list[str]:
    template = load_chat_template(DEFAULT_MODEL_DIR)
    history = [PastTurn(a, o) for a, o in zip(ep.actions, ep.observations, strict=True)]
    return [render_chat(template, build_messages(PromptInput(
        system_prompt(Domain.TERMINAL), TASK, ep.initial_state, history[:n], action),
        window=10_000)) for n, action in enumerate(ep.actions)]


async def direct(server: ModelServer, ep: Episode, max_tokens: int) -> list[Turn]:
    backend = TritonBackend(server.url, server.settings.model_name)
    out = []
    for prompt in whole_history_prompts(ep):
        async def step(prompt: str = prompt) -> tuple[float | None, float]:
            first, n_in = None, 0
            async for chunk in backend.stream(Completion(prompt, max_tokens, 0.0, 1.0, None),
                                              120.0):
                first = first or time.perf_counter()
                n_in = chunk.num_input_tokens or n_in
            return first, float(n_in)

        out.append(await measured(step, server.metrics_url))
    await backend.aclose()
    return out


def report(part: str, runs: dict[str, list[list[Turn]]], turns: int) -> None:
    print(f"\n**{part}**\n")
    print("| turn | prompt tokens | prefilled with reuse | TTFT no reuse / reuse (ms) | TTFT "
          "ratio | step no reuse / reuse (ms) | step ratio |")
    print("|---|---|---|---|---|---|---|")
    for turn in sorted({1, 2, 5, 10, 15, turns} & set(range(1, turns + 1))):
        def med(mode: str, key: str, turn: int = turn) -> float:
            return median([run[turn - 1][key] for run in runs[mode]])

        t_none, t_reuse = med("none", "ttft_s") * 1000, med("reuse", "ttft_s") * 1000
        s_none, s_reuse = med("none", "step_s") * 1000, med("reuse", "step_s") * 1000
        print(f"| {turn} | {med('reuse', 'prompt'):.0f} | {med('reuse', 'prefilled'):.0f} | "
              f"{t_none:.0f} / {t_reuse:.0f} | {t_none / t_reuse:.2f}× | {s_none:.0f} / "
              f"{s_reuse:.0f} | {s_none / s_reuse:.2f}× |")
    same = sum(1 for a, b in zip(runs["reuse"], runs["none"], strict=True)
               for x, y in zip(a, b, strict=True) if x["prompt"] == y["prompt"])
    print(f"\nTurns with the same prompt length on both stacks (same text, greedy): {same} of "
          f"{sum(len(r) for r in runs['reuse'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--part", nargs="+", default=["gateway", "direct"],
                        choices=["gateway", "direct"])
    args = parser.parse_args()
    logs = log_dir("kv")
    redis = redis_url()
    episodes = [terminal_episode(e, args.turns) for e in range(args.episodes)]
    warm = terminal_episode(10_000, 3)
    results: dict[str, dict[str, list[list[Turn]]]] = {}
    with model_server(logs, "ms-reuse") as ms_reuse, \
            model_server(logs, "ms-none", prefix_cache_bytes=0) as ms_none, \
            gateway(logs, redis, "gw-reuse", triton_url=ms_reuse.url) as g_reuse, \
            gateway(logs, redis, "gw-none", triton_url=ms_none.url) as g_none:
        servers = {"reuse": (ms_reuse, g_reuse), "none": (ms_none, g_none)}

        def play(part: str, mode: str, ep: Episode) -> list[Turn]:
            ms, gw = servers[mode]
            if part == "gateway":
                return asyncio.run(via_gateway(gw.target, ep, args.max_tokens, ms.metrics_url))
            return asyncio.run(direct(ms, ep, args.max_tokens))

        for part in args.part:
            runs: dict[str, list[list[Turn]]] = {"reuse": [], "none": []}
            for mode in runs:  # load code paths once
                play(part, mode, warm)
            for e, ep in enumerate(episodes):
                for mode in (["reuse", "none"] if e % 2 == 0 else ["none", "reuse"]):
                    runs[mode].append(play(part, mode, ep))
                    last = runs[mode][-1][-1]
                    print(f"{part} episode {e} {mode}: turn {args.turns} prompt "
                          f"{last['prompt']:.0f} tok, prefilled {last['prefilled']:.0f}, ttft "
                          f"{last['ttft_s'] * 1000:.0f} ms, step {last['step_s'] * 1000:.0f} ms",
                          flush=True)
            results[part] = runs
    print(f"\nMachine: {machine()}. {args.episodes} episodes of {args.turns} turns, greedy, "
          f"max_tokens {args.max_tokens}. Logs: {logs}")
    titles = {"gateway": "Through the gateway (default window 4, stride 4)",
              "direct": "Whole-history prompts, model server direct"}
    for part, runs in results.items():
        report(titles[part], runs, args.turns)


if __name__ == "__main__":
    main()
