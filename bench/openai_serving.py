"""Benchmark (issue 14): the OpenAI-compatible path, in two same-run comparisons.

    .venv/bin/python bench/openai_serving.py [--steps 24] [--concurrency 1 8] [--max-tokens 64]

Processes: `transformers serve` (transformers' OpenAI-compatible server, continuous batching)
and our model server (real Triton via PyTriton, the transformers engine), both loading the
committed checkpoint; one gateway (real Redis) with the OpenAI backend in front of the first.

1. Gateway overhead over the OpenAI backend: a step through the gateway (SDK ``Step``: auth,
   session, quota, prompt rendering, the same completions call, parsing, commit) against the
   same completions request sent straight to `transformers serve` with the gateway's own client
   (``OpenAIBackend``), one at a time, alternating, greedy, the same prompt.
2. Output tokens/s of our Triton engine against `transformers serve` at each concurrency: N
   streams at once of the same rendered Terminal prompts (greedy, ``--max-tokens``), each
   server called with the gateway's client for it; tokens = what each server reports.

Prints Markdown tables for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from common import KEY, gateway, log_dir, machine, median, model_server, pct, redis_url

from worldserve.backends.base import Backend, Completion
from worldserve.backends.checkpoint import load_chat_template
from worldserve.backends.openai import OpenAIBackend
from worldserve.backends.triton import TritonBackend
from worldserve.dev.launcher import start_transformers_serve
from worldserve.dev.services import free_port
from worldserve.domains.chat import render_chat
from worldserve.domains.rendering import PromptInput, build_messages
from worldserve.domains.templates import Domain, system_prompt
from worldserve.sdk import AsyncClient
from worldserve.settings import DEFAULT_MODEL_DIR

MODEL = str(DEFAULT_MODEL_DIR)
STATE = "Current directory: /home/agent\nFiles: notes.txt todo.md src/"
ACTIONS = ["ls -la", "cat notes.txt", "wc -l todo.md", "ls src", "pwd", "head -n 3 todo.md",
           "grep -n TODO notes.txt", "echo done > status.txt"]


def prompt_for(action: str) -> str:
    messages = build_messages(PromptInput(system_prompt(Domain.TERMINAL), "Inspect the files.",
                                          STATE, [], action), 4)
    return render_chat(load_chat_template(DEFAULT_MODEL_DIR), messages)


@contextlib.contextmanager
def transformers_serve(logs: Path) -> Iterator[str]:
    url = f"http://127.0.0.1:{free_port()}"
    server = start_transformers_serve(MODEL, url, logs)
    try:
        yield url
    finally:
        server.stop(30)


async def stream_tokens(backend: Backend, prompt: str, max_tokens: int) -> int:
    chunks = [c async for c in backend.stream(Completion(prompt, max_tokens, 0.0, 1.0, 1), 300)]
    return sum(c.num_output_tokens for c in chunks)


async def overhead(target: str, url: str, steps: int, max_tokens: int
                   ) -> dict[str, list[float]]:
    direct = OpenAIBackend(url, MODEL)
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    async with AsyncClient(target, KEY) as client:
        session = await client.create_session("TERMINAL", task_instruction="Inspect the files.",
                                              initial_state=STATE, max_tokens=max_tokens)
        prompt = prompt_for(ACTIONS[0])
        for _ in range(2):  # warm both paths
            await stream_tokens(direct, prompt, max_tokens)
            await client.step(session.session_id, ACTIONS[0])
        for _ in range(steps):
            fresh = await client.create_session("TERMINAL", task_instruction="Inspect the files.",
                                                initial_state=STATE, max_tokens=max_tokens)
            start = time.perf_counter()
            await stream_tokens(direct, prompt, max_tokens)
            times["direct"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await client.step(fresh.session_id, ACTIONS[0])  # turn 1: the same prompt
            times["gateway"].append(time.perf_counter() - start)
            await client.close_session(fresh.session_id)
    await direct.aclose()
    return times


async def tokens_per_s(backend: Backend, concurrency: int, max_tokens: int) -> tuple[float, int]:
    prompts = [prompt_for(ACTIONS[i % len(ACTIONS)]) for i in range(concurrency)]
    await asyncio.gather(*(stream_tokens(backend, p, 8) for p in prompts))  # warm
    start = time.perf_counter()
    counts = await asyncio.gather(*(stream_tokens(backend, p, max_tokens) for p in prompts))
    return sum(counts) / (time.perf_counter() - start), sum(counts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--max-tokens", type=int, default=64, help="per stream, tokens/s part")
    ap.add_argument("--step-max-tokens", type=int, default=160,
                    help="max_tokens of the overhead part (room for a whole answer)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    logs = log_dir("openai")
    redis = redis_url()
    with transformers_serve(logs) as url, model_server(logs) as ms, \
            gateway(logs, redis, backend_protocol="openai", openai_url=url,
                    openai_model=MODEL, default_temperature=0.0) as gw:
        times = asyncio.run(overhead(gw.target, url, args.steps, args.step_max_tokens))
        rates: dict[tuple[str, int], list[float]] = {}

        async def measure() -> None:
            servers: dict[str, Backend] = {"triton": TritonBackend(ms.url, "worldmodel"),
                                           "transformers serve": OpenAIBackend(url, MODEL)}
            for r in range(args.rounds):
                for c in args.concurrency:
                    order = list(servers) if r % 2 == 0 else list(reversed(servers))
                    for name in order:
                        rate, tokens = await tokens_per_s(servers[name], c, args.max_tokens)
                        rates.setdefault((name, c), []).append(rate)
                        print(f"round {r + 1}, {c} streams, {name}: {rate:.1f} tok/s "
                              f"({tokens} tokens)", flush=True)
            for backend in servers.values():
                await backend.aclose()

        asyncio.run(measure())
    print(f"\nMachine: {machine()}. Logs: {logs}\n")
    d, g = times["direct"], times["gateway"]
    print("| path (transformers serve, greedy, max_tokens "
          f"{args.step_max_tokens}) | steps | p50 (ms) | p90 (ms) |")
    print("|---|---|---|---|")
    print(f"| direct `/v1/completions` (OpenAIBackend) | {len(d)} | {pct(d, 0.5) * 1000:.1f} | "
          f"{pct(d, 0.9) * 1000:.1f} |")
    print(f"| through the gateway (SDK Step) | {len(g)} | {pct(g, 0.5) * 1000:.1f} | "
          f"{pct(g, 0.9) * 1000:.1f} |")
    print(f"\nGateway overhead over the OpenAI backend: {(pct(g, 0.5) - pct(d, 0.5)) * 1000:.1f} "
          f"ms at p50 ({pct(g, 0.5) / pct(d, 0.5):.2f}×).\n")
    print("| concurrent streams | Triton engine (tok/s) | transformers serve (tok/s) | ratio |")
    print("|---|---|---|---|")
    for c in args.concurrency:
        t, s = median(rates[("triton", c)]), median(rates[("transformers serve", c)])
        print(f"| {c} | {t:.1f} | {s:.1f} | {t / s:.2f}× |")


if __name__ == "__main__":
    main()
