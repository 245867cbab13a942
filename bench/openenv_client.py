"""The OpenEnv side of bench/openenv_frontdoor.py (runs in .venv-openenv): ``--sessions``
concurrent WebSocket episodes of ``--turns`` steps with OpenEnv's EnvClient; prints JSON
(per-step latencies in seconds, wall time, errors)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from worldserve.frontends.openenv import WorldAction
from worldserve.frontends.openenv_client import WorldEnv

ACTION = "ls -la && cat notes.txt"


async def episode(url: str, key: str, turns: int, latencies: list[float],
                  errors: list[str]) -> None:
    try:
        async with WorldEnv(url, api_key=key, message_timeout_s=120) as env:
            await env.reset(domain="TERMINAL", initial_state="notes.txt, todo.md",
                            max_tokens=64, max_turns=turns)
            for _ in range(turns):
                start = time.perf_counter()
                result = await env.step(WorldAction(action=ACTION))
                latencies.append(time.perf_counter() - start)
                if result.observation.observation != "ok":
                    errors.append(f"unexpected observation {result.observation.observation!r}")
    except Exception as exc:  # counted, not hidden: the benchmark reports errors
        errors.append(f"{type(exc).__name__}: {exc}")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    await asyncio.gather(*(episode(args.url, args.key, args.turns, latencies, errors)
                           for _ in range(args.sessions)))
    print(json.dumps({"latencies": latencies, "wall_s": time.perf_counter() - start,
                      "errors": errors}))


if __name__ == "__main__":
    asyncio.run(main())
