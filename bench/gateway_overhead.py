"""Benchmark (a): what the gateway adds to a step, against calling Triton directly.

    .venv/bin/python bench/gateway_overhead.py [--steps 800] [--rounds 3] [--concurrency 1 8]
        [--floor] [--uncached]

Processes: one model server (real Triton via PyTriton) with the `instant` engine — a fixed,
well-formed answer at once, so the model costs nothing and only the path around it is measured —
and one gateway (its own process, real Redis). This process is the client, at the same
concurrency for both paths:

* direct: Triton `ModelStreamInfer` with the gateway's own client code (`TritonBackend`) and a
  prompt rendered as the gateway renders a turn — what a team calling Triton itself would do;
* gateway: `Step` through the SDK — auth, session load, quota reservation, prompt rendering,
  the same Triton call, answer parsing, the atomic commit with its usage event — in episodes of
  20 turns (sessions are created before a round and closed after it, untimed).

* floor (with `--floor`): `Step` through the SDK to `bench/hop_floor.py`, a bare gRPC server
  that forwards the same prompt to Triton and answers — one Python hop and nothing else, the
  least any Python gateway on these cores can add.
* uncached (with `--uncached`): `Step` through a second gateway of the same code with its session
  tail cache off (`session_tail_cache_mib=0`), so every step loads its session from Redis before
  reserving (two round trips before the model call instead of one) — the baseline of that cache.

Rounds alternate the paths so machine noise hits them alike; figures are medians over rounds.
Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from common import KEY, gateway, log_dir, machine, median, model_server, pct, redis_url

from worldserve.backends.base import Completion
from worldserve.backends.checkpoint import load_chat_template
from worldserve.backends.triton import TritonBackend
from worldserve.dev.launcher import spawn, wait_for
from worldserve.dev.services import free_port, port_open
from worldserve.domains.chat import render_chat
from worldserve.domains.rendering import PromptInput, build_messages
from worldserve.domains.templates import Domain, system_prompt
from worldserve.sdk import AsyncClient
from worldserve.settings import DEFAULT_MODEL_DIR

ACTION = "ls -la && cat notes.txt"
TURNS = 20  # steps per session, then the next session: an RL episode's length


def rendered_prompt() -> str:
    messages = build_messages(PromptInput(system_prompt(Domain.TERMINAL), "Inspect the files.",
                                          "notes.txt, todo.md", [], ACTION), 4)
    return render_chat(load_chat_template(DEFAULT_MODEL_DIR), messages)


def triton_request() -> Completion:
    """What both the direct path and the floor send Triton for every step."""
    return Completion(rendered_prompt(), 64, 0.0, 1.0, None)


async def run_round(concurrency: int, steps: int, one_step) -> tuple[list[float], float]:  # type: ignore[no-untyped-def]
    """Per-step latencies (s) and wall time (s) of ``steps`` steps by ``concurrency`` workers."""
    latencies: list[float] = []
    per_worker = steps // concurrency

    async def worker(index: int) -> None:
        for i in range(per_worker):
            start = time.perf_counter()
            await one_step(index, i)
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return latencies, time.perf_counter() - start


@contextlib.contextmanager
def floor_hop(logs: Path, triton_url: str) -> Iterator[str]:
    """`bench/hop_floor.py` as a child process; yields its target."""
    port = free_port()
    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH", "")) if p), PYTHONUNBUFFERED="1")
    child = spawn("floor", "hop_floor", env, logs, args=(str(port), triton_url))
    try:
        wait_for("starting the floor hop", lambda: port_open("127.0.0.1", port), child,
                 timeout_s=60)
        yield f"127.0.0.1:{port}"
    finally:
        child.stop(5)


async def measure(target: str, triton_url: str, concurrency: int, steps: int, rounds: int,
                  floor: str | None = None, uncached: str | None = None
                  ) -> dict[str, dict[str, float]]:
    direct = TritonBackend(triton_url, "worldmodel")
    request = triton_request()
    results: dict[str, list[tuple[list[float], float]]] = {"direct": [], "gateway": []}
    if floor is not None:
        results["floor"] = []
    gateways = {"gateway": target}
    if uncached is not None:
        results["uncached"] = []
        gateways["uncached"] = uncached

    async def direct_step(worker: int, i: int) -> None:
        chunks = [c async for c in direct.stream(request, 30.0)]
        assert chunks and chunks[-1].finish_reason == "stop", chunks

    async with contextlib.AsyncExitStack() as stack:
        clients = {path: await stack.enter_async_context(AsyncClient(t, KEY))
                   for path, t in gateways.items()}
        floor_client = (await stack.enter_async_context(AsyncClient(floor, KEY))
                        if floor is not None else None)

        async def floor_step(worker: int, i: int) -> None:
            assert floor_client is not None
            r = await floor_client.step("floor", ACTION, expected_turn=i % TURNS)
            assert r.observation == "ok", r

        for _ in range(2):  # warm both paths (connections, caches, code paths)
            await run_round(concurrency, concurrency * 10, direct_step)
            if floor_client is not None:
                await run_round(concurrency, concurrency * 10, floor_step)
        for _ in range(rounds):
            per_worker = steps // concurrency
            results["direct"].append(await run_round(concurrency, steps, direct_step))
            for path, client in clients.items():
                sessions = [[(await client.create_session(
                    "TERMINAL", initial_state="notes.txt, todo.md", max_tokens=64)).session_id
                    for _ in range(-(-per_worker // TURNS))] for _ in range(concurrency)]

                async def gateway_step(worker: int, i: int, sessions: list[list[str]] = sessions,
                                       client: AsyncClient = client) -> None:
                    r = await client.step(sessions[worker][i // TURNS], ACTION,
                                          expected_turn=i % TURNS)
                    assert r.observation == "ok", r

                results[path].append(await run_round(concurrency, steps, gateway_step))
                for row in sessions:
                    for sid in row:
                        await client.close_session(sid)
            if floor_client is not None:
                results["floor"].append(await run_round(concurrency, steps, floor_step))
    await direct.aclose()
    out: dict[str, dict[str, float]] = {}
    for path, runs in results.items():
        out[path] = {
            "p50_ms": median([pct(lat, 0.5) * 1000 for lat, _ in runs]),
            "p90_ms": median([pct(lat, 0.9) * 1000 for lat, _ in runs]),
            "per_s": median([len(lat) / wall for lat, wall in runs]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=800, help="steps per round and path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--floor", action="store_true",
                        help="also measure a bare gRPC hop in front of Triton (bench/hop_floor.py)")
    parser.add_argument("--uncached", action="store_true",
                        help="also measure a second gateway with its session tail cache off "
                        "(session_tail_cache_mib=0): every step loads its session")
    args = parser.parse_args()
    logs = log_dir("overhead")
    redis = redis_url()
    rows = []
    floors = []
    uncached_rows = []
    with contextlib.ExitStack() as stack:
        ms = stack.enter_context(model_server(logs, engine="instant"))
        gw = stack.enter_context(gateway(logs, redis, triton_url=ms.url, history_window_turns=4))
        floor = stack.enter_context(floor_hop(logs, ms.url)) if args.floor else None
        uncached = stack.enter_context(gateway(
            logs, redis, name="gateway-uncached", triton_url=ms.url, history_window_turns=4,
            session_tail_cache_mib=0)).target if args.uncached else None
        for c in args.concurrency:
            steps = max(args.steps // c * c, c) if c > 1 else min(args.steps, 400)
            r = asyncio.run(measure(gw.target, ms.url, c, steps, args.rounds, floor, uncached))
            d, g = r["direct"], r["gateway"]
            rows.append((c, d, g))
            if "uncached" in r:
                uncached_rows.append((c, d, r["uncached"]))
            if "floor" in r:
                floors.append((c, d, r["floor"]))
            print(f"concurrency {c}: direct p50 {d['p50_ms']:.2f} ms, {d['per_s']:.0f}/s; "
                  f"gateway p50 {g['p50_ms']:.2f} ms, {g['per_s']:.0f}/s", flush=True)
    print(f"\nMachine: {machine()}. Logs: {logs}\n")
    print("| concurrency | direct p50 / p90 (ms) | gateway p50 / p90 (ms) | overhead p50 (ms) "
          "| direct steps/s | gateway steps/s | throughput ratio |")
    print("|---|---|---|---|---|---|---|")
    for c, d, g in rows:
        print(f"| {c} | {d['p50_ms']:.2f} / {d['p90_ms']:.2f} | {g['p50_ms']:.2f} / "
              f"{g['p90_ms']:.2f} | {g['p50_ms'] - d['p50_ms']:.2f} | {d['per_s']:.0f} | "
              f"{g['per_s']:.0f} | {g['per_s'] / d['per_s']:.2f}× |")
    if uncached_rows:
        print("\nThe same gateway code with its session tail cache off, against the same direct "
              "runs\n")
        print("| concurrency | uncached p50 / p90 (ms) | uncached overhead p50 (ms) "
              "| uncached steps/s | uncached throughput ratio |")
        print("|---|---|---|---|---|")
        for c, d, u in uncached_rows:
            print(f"| {c} | {u['p50_ms']:.2f} / {u['p90_ms']:.2f} | "
                  f"{u['p50_ms'] - d['p50_ms']:.2f} | {u['per_s']:.0f} | "
                  f"{u['per_s'] / d['per_s']:.2f}× |")
    if floors:
        print("\nThe floor: a bare gRPC hop (bench/hop_floor.py) against the same direct runs\n")
        print("| concurrency | floor p50 / p90 (ms) | floor overhead p50 (ms) | floor steps/s "
              "| floor throughput ratio |")
        print("|---|---|---|---|---|")
        for c, d, f in floors:
            print(f"| {c} | {f['p50_ms']:.2f} / {f['p90_ms']:.2f} | "
                  f"{f['p50_ms'] - d['p50_ms']:.2f} | {f['per_s']:.0f} | "
                  f"{f['per_s'] / d['per_s']:.2f}× |")


if __name__ == "__main__":
    main()
