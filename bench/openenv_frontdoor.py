"""Benchmark: what the OpenEnv front door adds to a step, against the gRPC SDK (issue 13).

    .venv/bin/python bench/openenv_frontdoor.py [--sessions 64] [--turns 20] [--rounds 3]

Processes: one model server (real Triton via PyTriton) with the `instant` engine (a fixed answer
at once: only the path around the model is measured), one gateway (real Redis, the dev key) and
one OpenEnv server (`worldserve.frontends.openenv`, its own environment .venv-openenv). Per round
and path, ``--sessions`` episodes of ``--turns`` steps run at once:

* grpc: this process, the SDK's AsyncClient, one session per episode;
* openenv: bench/openenv_client.py in the OpenEnv environment, OpenEnv's EnvClient over one
  WebSocket per episode (reset opens the session, untimed; each step timed).

Rounds alternate the two paths so machine noise hits both alike; figures are medians over rounds.
Errors are counted (target: 0). Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from common import KEY, gateway, log_dir, machine, median, model_server, pct, redis_url

from worldserve.dev.launcher import openenv_interpreter, spawn, wait_for
from worldserve.dev.services import free_port, port_open
from worldserve.sdk import AsyncClient
from worldserve.settings import Settings

ACTION = "ls -la && cat notes.txt"
HERE = Path(__file__).resolve().parent


async def grpc_round(target: str, sessions: int, turns: int) -> tuple[list[float], float, int]:
    latencies: list[float] = []
    errors = 0
    async with AsyncClient(target, KEY) as client:
        ids = [(await client.create_session("TERMINAL", initial_state="notes.txt, todo.md",
                                            max_tokens=64)).session_id for _ in range(sessions)]

        async def episode(sid: str) -> None:
            nonlocal errors
            for turn in range(turns):
                start = time.perf_counter()
                try:
                    r = await client.step(sid, ACTION, expected_turn=turn)
                    errors += r.observation != "ok"
                except Exception:
                    errors += 1
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(episode(sid) for sid in ids))
        wall = time.perf_counter() - start
        for sid in ids:
            await client.close_session(sid)
    return latencies, wall, errors


def openenv_round(python: str, url: str, sessions: int, turns: int
                  ) -> tuple[list[float], float, int]:
    done = subprocess.run([python, str(HERE / "openenv_client.py"), "--url", url, "--key", KEY,
                           "--sessions", str(sessions), "--turns", str(turns)],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    out = json.loads(done.stdout)
    for error in out["errors"][:5]:
        print(f"  openenv error: {error}", file=sys.stderr)
    return out["latencies"], out["wall_s"], len(out["errors"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    python = openenv_interpreter(Settings())
    if python is None:
        sys.exit("no OpenEnv environment: run `make install` (it builds .venv-openenv)")
    logs = log_dir("openenv")
    redis = redis_url()
    runs: dict[str, list[tuple[list[float], float, int]]] = {"grpc": [], "openenv": []}
    with model_server(logs, engine="instant") as ms, \
            gateway(logs, redis, triton_url=ms.url, history_window_turns=4) as gw:
        port = free_port()
        env = {**gw.child.env, "WORLDSERVE_UPSTREAM_GATEWAY": gw.target,
               "WORLDSERVE_OPENENV_PORT": str(port),
               "WORLDSERVE_OPENENV_MAX_SESSIONS": str(args.sessions * 2)}
        door = spawn("openenv", "worldserve.frontends.openenv", env, logs, python=python)
        try:
            wait_for("starting the OpenEnv server", lambda: port_open("127.0.0.1", port), door,
                     90)
            url = f"http://127.0.0.1:{port}"
            openenv_round(python, url, min(args.sessions, 8), 2)  # warm both paths
            asyncio.run(grpc_round(gw.target, min(args.sessions, 8), 2))
            for r in range(args.rounds):
                runs["grpc"].append(asyncio.run(grpc_round(gw.target, args.sessions,
                                                           args.turns)))
                runs["openenv"].append(openenv_round(python, url, args.sessions, args.turns))
                print(f"round {r + 1}: grpc p50 {pct(runs['grpc'][-1][0], 0.5) * 1000:.2f} ms, "
                      f"openenv p50 {pct(runs['openenv'][-1][0], 0.5) * 1000:.2f} ms",
                      flush=True)
        finally:
            door.stop(5)
    rows = {}
    for path, rounds in runs.items():
        rows[path] = {"p50": median([pct(lat, 0.5) * 1000 for lat, _, _ in rounds]),
                      "p99": median([pct(lat, 0.99) * 1000 for lat, _, _ in rounds]),
                      "per_s": median([len(lat) / wall for lat, wall, _ in rounds]),
                      "steps": sum(len(lat) for lat, _, _ in rounds),
                      "errors": sum(e for _, _, e in rounds)}
    print(f"\nMachine: {machine()}. {args.sessions} concurrent episodes of {args.turns} steps, "
          f"{args.rounds} rounds. Logs: {logs}\n")
    print("| path | steps | errors | step p50 (ms) | step p99 (ms) | steps/s |")
    print("|---|---|---|---|---|---|")
    for path, row in rows.items():
        print(f"| {path} | {row['steps']} | {row['errors']} | {row['p50']:.2f} | "
              f"{row['p99']:.2f} | {row['per_s']:.0f} |")
    g, o = rows["grpc"], rows["openenv"]
    print(f"\nOpenEnv adds {o['p50'] - g['p50']:.2f} ms at p50 ({o['p50'] / g['p50']:.2f}×), "
          f"{o['p99'] - g['p99']:.2f} ms at p99; throughput ratio {o['per_s'] / g['per_s']:.2f}×.")


if __name__ == "__main__":
    main()
